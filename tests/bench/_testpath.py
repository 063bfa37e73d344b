"""Benchmarks measure the installed product, never the checkout: import this before anything of ours.

A benchmark runs as a script (``python tests/bench/bench_x.py``, with the interpreter of an environment
where hermes-tray is installed, e.g. ``.venv-test`` after ``./tests/run``). It imports the product from
that installation and the test helpers (``tests.*``) from this checkout, through a private folder that
holds only a ``tests`` link — the rule ``tests/conftest.py`` applies to the suite. Children inherit it
through ``PYTHONPATH``; ``PYTHONSAFEPATH=1`` keeps ``python -m``/``-c`` from adding the working directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if not os.path.isdir(os.environ.get("HERMES_TRAY_TESTPATH", "")):
    _folder = tempfile.mkdtemp(prefix="hermes-tray-testpath-")
    os.symlink(ROOT / "tests", os.path.join(_folder, "tests"))
    atexit.register(shutil.rmtree, _folder, True)
    os.environ["HERMES_TRAY_TESTPATH"] = _folder
TESTPATH = os.environ["HERMES_TRAY_TESTPATH"]
sys.path[:] = [p for p in sys.path if not (p and os.path.isdir(p) and Path(p).resolve() == ROOT)]
if TESTPATH not in sys.path:
    sys.path.append(TESTPATH)
os.environ["PYTHONPATH"] = TESTPATH
os.environ["PYTHONSAFEPATH"] = "1"
