"""Without a tray host the tray does not pretend: after waiting for one it shows a status window
(the icon is never created, since an icon made before a tray host exists never registers)."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.conftest import start_tray, wait_for


@pytest.fixture
def demo(tmp_path):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, start_turn=False)
    yield d
    d.cleanup()


def test_status_window_when_no_tray_host(trayless_desktop, demo, tmp_path) -> None:
    tray = start_tray(trayless_desktop, demo, tmp_path, args=("--wait-for-tray", "1.5"))
    try:
        tray.wait_event(lambda e: e["event"] == "status-window", timeout=15, what="status window")
        assert not [e for e in tray.events() if e["event"] == "tray-shown"]

        def visible() -> bool:
            try:
                return bool(trayless_desktop.xdotool("search", "--onlyvisible", "--name", "^Hermes Tray$").split())
            except subprocess.CalledProcessError:
                return False

        wait_for(visible, 10, "status window on screen")
    finally:
        assert tray.stop() == 0
