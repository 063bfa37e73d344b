"""Without a tray host the tray does not pretend: it shows a status window within 2 s (the icon is
never created, since an icon made before a tray host exists never registers), and when a tray
host appears later the icon takes over from the window."""

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


def _window_visible(desktop) -> bool:
    try:
        return bool(desktop.xdotool("search", "--onlyvisible", "--name", "^Hermes Tray$").split())
    except subprocess.CalledProcessError:
        return False


def test_status_window_then_icon_when_a_tray_host_appears(trayless_desktop, demo, tmp_path) -> None:
    tray = start_tray(trayless_desktop, demo, tmp_path)  # the default wait
    trayer = None
    try:
        started = tray.wait_event(lambda e: e["event"] == "started", timeout=15, what="start")
        shown = tray.wait_event(lambda e: e["event"] == "status-window", timeout=10, what="status window")
        # The tray waits 2 s for a host, then polls every 250 ms; the rest is a loaded machine's scheduling.
        assert shown["t"] - started["t"] < 4.0, "the status window must come within about 2 s"
        assert not [e for e in tray.events() if e["event"] == "tray-shown"]
        wait_for(lambda: _window_visible(trayless_desktop), 10, "status window on screen")

        # a tray host starts later (the user enables the extension): the icon takes over
        trayer = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                                   "--height", "26", "--SetDockType", "true"], env=trayless_desktop.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tray.wait_event(lambda e: e["event"] == "tray-shown", timeout=15, what="icon after the host appeared")
        tray.wait_event(lambda e: e["event"] == "status-window-hidden", timeout=5, what="status window hidden")
        wait_for(lambda: not _window_visible(trayless_desktop), 10, "status window gone from the screen")
    finally:
        assert tray.stop() == 0
        if trayer is not None:
            trayer.terminate()
            trayer.wait(timeout=10)
