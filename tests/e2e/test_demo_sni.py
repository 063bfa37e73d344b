"""``hermes-tray demo`` on a StatusNotifierItem tray (KDE, GNOME with AppIndicator): the menu is
exported over D-Bus; clicking its entries by label drives the whole flow a newcomer sees:
crash → notification → Resume (from the menu) → continuation → finished → Quit."""

from __future__ import annotations

import contextlib
import subprocess
import time

from tests.e2e.conftest import wait_for
from tests.support.product import product_env, tray_argv


def _tray(d) -> dict:
    items = d.tray_items()
    return next((i for i in items if i.get("Id") == "hermes-tray"), {})


def _labels(d) -> list[str]:
    return [m["label"] for m in _tray(d).get("menu", [])]


def test_demo_menu_crash_resume_finish_quit(sni_desktop, tmp_path) -> None:
    d = sni_desktop
    env = product_env({**d.env, "TMPDIR": str(tmp_path)})
    demo = subprocess.Popen(tray_argv("demo", "--crash-after", "0", "--dir", tmp_path / "demo"), env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "demo.err", "wb"))  # noqa: SIM115
    try:
        wait_for(lambda: "Demo: crash the backend" in _labels(d), 20, "demo tray item with its menu")
        assert "Hermes Tray" in _tray(d)["ToolTip"][2]
        started = time.time()
        d.tray_activate("Demo: crash the backend")
        wait_for(lambda: [n for n in d.notifications() if n["summary"].startswith("Interrupted: ")
                          and n["time"] >= started], 10, "interrupted notification")
        wait_for(lambda: "Resume" in _labels(d), 10, "turn listed in the menu")
        assert "1 interrupted turn waiting" in _tray(d)["ToolTip"][2]
        (asked,) = [n for n in d.notifications() if n["summary"].startswith("Interrupted: ") and n["time"] >= started]
        assert asked["hints"].get("desktop-entry") == "hermes-tray"
        assert asked["hints"].get("urgency") == 1 and "attention" in asked["app_icon"]
        assert {"Resume", "Skip"} <= set(asked["actions"].values())

        # crash again while that turn still waits: before, this silently did nothing
        d.tray_activate("Demo: crash the backend")
        wait_for(lambda: "2 interrupted turns" in _labels(d), 15, "a second interrupted turn")
        assert "2 interrupted turns waiting" in _tray(d)["ToolTip"][2]
        d.tray_activate("Resume all")
        wait_for(lambda: len([n for n in d.notifications() if n["summary"] == "Hermes turn finished"
                              and n["time"] >= started]) == 2, 30, "two finished notifications")
        done = [n for n in d.notifications() if n["summary"] == "Hermes turn finished" and n["time"] >= started]
        assert all(n["hints"].get("urgency") == 0 and "finished" in n["app_icon"] for n in done), done
        assert all(n["hints"].get("desktop-entry") == "hermes-tray" for n in done)
        wait_for(lambda: "No interrupted turns" in _labels(d), 10, "menu back to idle")
        d.tray_activate("Quit")
        assert demo.wait(timeout=20) == 0
        # issue 25.10: Quit printed "QObject::startTimer: Timers cannot be started from another thread"
        assert "cannot be started from another thread" not in (tmp_path / "demo.err").read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        _kill_leftover_backends(tmp_path / "demo")


def _kill_leftover_backends(root) -> None:
    """A killed demo cannot stop its simulated backend (it runs in a session of its own): do it here."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if any(str(root) in part for part in proc.info["cmdline"] or ()):
            with contextlib.suppress(psutil.Error):
                proc.kill()
