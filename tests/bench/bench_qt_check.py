"""Benchmark: what the tray's check of Qt's platform plugin (``hermes_tray/cli/qt_platform.py``) costs its start.

    python tests/bench/bench_qt_check.py [--runs 15]

On the repository's test desktop (``tests/desktop/session.py``, no tray needed), three ways to reach a
``QApplication``, each a fresh process, taking turns within each repetition so load on the machine hits them
alike:

* ``plain``: import PySide6's widgets and create the ``QApplication`` (what the tray does, without the check;
  every variant first imports the check's module, as the tray has its command line loaded by then);
* ``checked``: the check in process first (the loader loads the X11 plugin), then the same;
* ``child probe``: the alternative the check was chosen over — a child interpreter loads the plugin and
  answers — then the same.

Printed: the median wall time from process start to the ``QApplication`` existing, the median time of the
check alone, and each variant's ratio to ``plain`` (limit for ``checked``: 1.05×, i.e. within noise).
Run it with the interpreter of an environment where the product is installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

CHILD = r"""
import sys, time
from hermes_tray.cli.qt_platform import check_platform, plugin_dirs  # the tray has the CLI loaded: every variant
t0 = time.perf_counter()
variant = sys.argv[1]
if variant == "checked":
    assert check_platform().ok
elif variant == "child":
    import subprocess
    plugin = next(str(d / "libqxcb.so") for d in plugin_dirs() if (d / "libqxcb.so").is_file())
    subprocess.run([sys.executable, "-S", "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", plugin], check=True)
t1 = time.perf_counter()
from PySide6.QtWidgets import QApplication
app = QApplication(["bench"])
t2 = time.perf_counter()
print(f"{t1 - t0} {time.time()}", flush=True)
"""

VARIANTS = ("plain", "checked", "child")


def run_once(variant: str, env: dict[str, str]) -> tuple[float, float]:
    start = time.time()
    out = subprocess.run([sys.executable, "-c", CHILD, variant], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return float(out[1]) - start, float(out[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    from tests.desktop.session import Desktop, TrayKind

    with Desktop(TrayKind.NONE) as desktop:
        env = {**os.environ, **desktop.env}
        for variant in VARIANTS:  # warm the page cache: the first run of each pays for the disk
            run_once(variant, env)
        total: dict[str, list[float]] = {v: [] for v in VARIANTS}
        check: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.runs):
            for variant in VARIANTS:
                wall, checked = run_once(variant, env)
                total[variant].append(wall * 1000)
                check[variant].append(checked * 1000)
    plain = statistics.median(total["plain"])
    print(f"start to QApplication, median of {args.runs} runs each (alternated):")
    for variant in VARIANTS:
        med = statistics.median(total[variant])
        print(f"  {variant:8s} {med:7.1f} ms  ({statistics.median(check[variant]):6.1f} ms in the check)  "
              f"{med / plain:.2f}× plain")
    ratio = statistics.median(total["checked"]) / plain
    print(f"checked / plain = {ratio:.2f}× (limit 1.05×): {'met' if ratio <= 1.05 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
