"""A tray that cannot build its icon says so and exits; it never lives on showing nothing.

The failure a newcomer once met, reproduced with the installed product: a copy of it without the
``hermes_tray.app.sni`` subpackage (what a wheel built from a hand-kept package list held) is put first
on the path, and ``hermes-tray`` is started with no Hermes, so it opens the demo. Before, the process
kept running with no icon, no window and no notification, the demo's backend was left behind, and a
second launch said it had "asked it to show its window" and exited 0.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil

import hermes_tray
from tests.e2e.conftest import wait_for
from tests.support.product import product_env, tray_argv


def _broken_product(dest: Path) -> Path:
    """The installed hermes_tray package, without its app/sni subpackage."""
    src = Path(hermes_tray.__file__).parent
    shutil.copytree(src.resolve(), dest / "hermes_tray", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(dest / "hermes_tray" / "app" / "sni")
    return dest


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_an_icon_that_cannot_be_built_is_said_and_the_tray_exits(desktop, tmp_path: Path) -> None:
    broken = _broken_product(tmp_path / "broken")
    home = tmp_path / "home"
    home.mkdir()
    env = product_env({**os.environ, **desktop.env, "HOME": str(home)})
    for name in [k for k in env if k.startswith(("HERMES_TRAY_", "XDG_")) and k != "XDG_RUNTIME_DIR"]:
        del env[name]
    env["PYTHONPATH"] = str(broken)  # before site-packages: this copy is the one imported
    err = tmp_path / "tray.err"
    with open(err, "wb") as out:
        tray = subprocess.Popen(tray_argv(), env=env, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)
    seen: dict[int, psutil.Process] = {}
    try:
        def box() -> list[str]:
            for p in _descendants(tray.pid):
                seen.setdefault(p.pid, p)
            try:
                return desktop.xdotool("search", "--onlyvisible", "--name", "^Hermes Tray$").split()
            except subprocess.CalledProcessError:
                return []

        windows = wait_for(box, 60, "the start-up failure's message box")
        text = err.read_text(errors="replace")
        assert "hermes-tray could not start: No module named" in text and "hermes_tray.app.sni" in text, text
        assert "ModuleNotFoundError" not in text, text  # the class name is the log's
        assert "The log has the details" in text
        assert "Traceback" not in text, text  # the traceback is in the log, not thrown at the user
        # What it started is stopped while the message shows: the demo's simulated backend is gone.
        wait_for(lambda: not [p for p in seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
                 15, "the demo backend to be stopped")
        assert tray.poll() is None  # still up: the message is on screen until the user closes it

        # A second launch meanwhile is not told a window opened: the first one showed none.
        second = subprocess.run(tray_argv(), env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        assert "did not answer" in second.stderr

        desktop.xdotool("windowfocus", "--sync", windows[0])  # no window manager: focus it directly
        desktop.xdotool("key", "Return")  # the box's Close button
        assert tray.wait(timeout=30) == 1
    finally:
        if tray.poll() is None:
            os.killpg(tray.pid, signal.SIGKILL)
            tray.wait()
    time.sleep(0.2)
    assert not [p for p in seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
