"""The code is typed and its imports follow the rules: mypy (the whole project in its default mode, the engine
strict) and import-linter (the contracts in pyproject.toml) find nothing.

mypy reads the tree, not the installation: the engine's folder is ``core/`` but its import name is
``hermes_tray_core``, so it is checked through a folder that links both import names to the tree.
import-linter reads the installed packages (the same bytes: ``tests/test_installed_product.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(900)


def _tool(module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        pytest.fail(f"{module} is not installed: it is in the test extra (pip install '.[test]')")


def test_mypy_finds_nothing(tmp_path: Path) -> None:
    _tool("mypy")
    view = tmp_path / "src"
    view.mkdir()
    (view / "hermes_tray").symlink_to(ROOT / "hermes_tray", target_is_directory=True)
    (view / "hermes_tray_core").symlink_to(ROOT / "core", target_is_directory=True)
    cache = Path(os.environ.get("HERMES_TRAY_MYPY_CACHE", ROOT / ".mypy_cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(cache), "-p", "hermes_tray_core", "-p", "hermes_tray"],
                         cwd=view, env=env, capture_output=True, text=True, timeout=880)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_import_contracts_hold() -> None:
    _tool("importlinter")
    lint = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or "lint-imports"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([lint, str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
