"""No display (SSH, a service): the tray says why and starts nothing — no demo, no simulated backend.

Before: plain ``hermes-tray`` built a demo, started its backend, then Qt aborted (exit 134) with a
misleading ``libxcb-cursor0`` message and left the backend orphaned.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.product import product_env, tray_argv


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "HERMES_HOME")}
    env["HOME"] = str(tmp_path / "home")  # no Hermes here: plain `hermes-tray` would open the demo
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        env[f"HERMES_TRAY_{name}_DIR"] = str(tmp_path / f"tray-{name.lower()}")
    return product_env(env)


@pytest.mark.parametrize("argv", [[], ["tray"], ["demo"]], ids=["default", "tray", "demo"])
def test_no_display_refuses_and_starts_nothing(tmp_path: Path, argv: list[str]) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    proc = subprocess.run(tray_argv(*argv), env=_env(tmp_path),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1, proc.stderr  # refused, not Qt's abort (134)
    assert "no display found" in proc.stderr
    assert "hermes-tray helper" in proc.stderr  # what works without one
    assert "Nothing was started" in proc.stderr
    assert "Traceback" not in proc.stderr and "xcb" not in proc.stderr
    assert not (tmp_path / "tray-cache" / "demo").exists()  # no demo home was made
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before  # no simulated backend left running


def test_no_display_does_not_stop_headless_commands(tmp_path: Path) -> None:
    proc = subprocess.run(tray_argv("demo", "--no-tray"), env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "hermes-tray demo ready" in proc.stdout
    root = next(line.split(" in ", 1)[1] for line in proc.stdout.splitlines() if "demo ready in" in line)
    pid = next((int(w) for line in proc.stdout.splitlines() if "backend pid" in line
                for w in line.split() if w.isdigit()), None)
    if pid:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    import shutil

    shutil.rmtree(root, ignore_errors=True)
