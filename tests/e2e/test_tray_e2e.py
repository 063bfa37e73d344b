"""End to end on a real (virtual) desktop: tray host, session bus, a recording notification server.

crash the demo backend mid-turn → the icon is registered and "Turn interrupted" arrives with
Resume / Skip → pressing Resume runs the continuation → "finished" arrives and the marker is gone;
another crash → pressing Skip removes that marker. Screenshots of what users see go to
docs/screenshots/ (and are looked at by a person before they are committed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, start_tray, wait_for
from tests.support.product import product_env

pytest.importorskip("desktop_notifier")
# Test artifacts by default (git-ignored); HERMES_TRAY_UPDATE_SCREENSHOTS=1 refreshes the README's
# copies in docs/screenshots/ — look at them before committing.
SHOTS = (ROOT / "docs" / "screenshots" if os.environ.get("HERMES_TRAY_UPDATE_SCREENSHOTS")
         else ROOT / "test-artifacts" / "screenshots")


def _notes(desktop, summary: str, after: float) -> list[dict]:
    """Our notes whose title starts with ``summary`` ("Interrupted: " names the turn after it)."""
    return [n for n in desktop.notifications()
            if n["app_name"] == "Hermes Tray" and n["summary"].startswith(summary) and n["time"] >= after]


def _running(tray, key: str) -> None:
    tray.wait_event(lambda e: e["event"] == "scan" and e["verdicts"].get(key) == "running", what="running turn")


@pytest.fixture
def demo(tmp_path, monkeypatch):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, continuation_seconds=1.0)
    for k, v in d.env.items():
        monkeypatch.setenv(k, v)  # this process reads the demo's ledger too
    yield d
    d.cleanup()


def test_crash_notify_resume_finish_then_skip(desktop, demo, tmp_path) -> None:
    from hermes_tray_core.markers.turn_marker import read_turn_marker
    from tests.support import book

    key = demo.session_key
    tray = start_tray(desktop, demo, tmp_path)
    try:
        tray.wait_event(lambda e: e["event"] == "tray-shown", what="tray icon")
        _running(tray, key)

        # 1. the backend dies mid-turn
        killed = time.time()
        assert demo.crash_backend()
        (note,) = wait_for(lambda: _notes(desktop, "Interrupted: ", killed), 10, "interrupted notification")
        assert note["actions"]["resume"] == "Resume" and note["actions"]["skip"] == "Skip"
        assert note["summary"].startswith("Interrupted: Demo: refactor the config parser")  # which turn: the title
        assert note["time"] - killed < 2.0

        # 2. Resume → continuation → finished
        pressed = time.time()
        desktop.click_action(note["id"], "resume")
        (done,) = wait_for(lambda: _notes(desktop, "Hermes turn finished", pressed), 30, "finished notification")
        # the turn finished, where it ran (issue 25.7), then the answer's first line
        lines = done["body"].splitlines()
        assert lines[:2] == ["Demo: refactor the config parser finished.", "It ran in a separate Hermes process."]
        assert len(lines) == 3
        desktop.click_action(done["id"], "default")  # clicking it shows the whole answer
        shown = tray.wait_event(lambda e: e["event"] == "window" and e.get("name") == "answer", what="answer shown")
        assert shown["chars"] >= len(done["body"].splitlines()[2]) > 0
        wait_for(lambda: read_turn_marker(demo.home, key) is None, 10, "marker cleared")
        events = [e["event"] for e in book.history(50) if e["session_key"] == key]
        assert "notified" in events and "approved" in events and "completed" in events

        # 3. another crash → Skip → marker gone, no continuation
        demo.start_turn()
        _running(tray, key)
        killed = time.time()
        assert demo.crash_backend()
        (again,) = wait_for(lambda: _notes(desktop, "Interrupted: ", killed), 10, "second notification")
        marker = read_turn_marker(demo.home, key)
        assert marker is not None and marker["attempts"] == 0
        desktop.click_action(again["id"], "skip")
        wait_for(lambda: read_turn_marker(demo.home, key) is None, 10, "skipped marker removed")
        wait_for(lambda: "skipped" in [e["event"] for e in book.history(10) if e["session_key"] == key], 5,
                 "skip recorded")
        time.sleep(0.5)
        assert not _notes(desktop, "Hermes turn finished", killed), "Skip must not run a continuation"
    finally:
        assert tray.stop() == 0, (tmp_path / "tray.stderr").read_text()[-2000:]
    from hermes_tray.demo.home import DEMO_PROMPT

    log = Path(demo.env["HERMES_TRAY_LOG_DIR"]) / "hermes-tray.log"
    assert log.stat().st_mode & 0o077 == 0
    text = log.read_text() + (tmp_path / "tray.stderr").read_text()
    assert DEMO_PROMPT[:40] not in text, "the tray never logs prompt text"


def _crop(src: Path, dest: Path, x: int, y: int, w: int, h: int) -> None:
    from PySide6.QtGui import QImage

    img = QImage(str(src))
    x, y = max(0, x), max(0, y)
    w, h = min(w, img.width() - x), min(h, img.height() - y)
    dest.parent.mkdir(parents=True, exist_ok=True)
    assert img.copy(x, y, w, h).save(str(dest)), dest


def _menu_bounds(shot: Path) -> tuple[int, int]:
    """Left edge and bottom of the light popup menu below the panel (the screen is black)."""
    from PySide6.QtGui import QImage

    img = QImage(str(shot))
    row = 40
    left = next(x for x in range(img.width()) if img.pixelColor(x, row).lightness() > 200)
    col = img.width() - 30
    bottom = max(y for y in range(30, img.height()) if img.pixelColor(col, y).lightness() > 200)
    return left, bottom


def _window_geometry(desktop, title: str) -> tuple[int, int, int, int]:
    wid = wait_for(lambda: _search(desktop, title), 10, f"window {title!r}")
    out = desktop.xdotool("getwindowgeometry", "--shell", wid)
    g = dict(line.split("=", 1) for line in out.split())
    return int(g["X"]), int(g["Y"]), int(g["WIDTH"]), int(g["HEIGHT"])


def _search(desktop, title: str) -> str | None:
    try:
        ids = desktop.xdotool("search", "--onlyvisible", "--name", title).split()
    except subprocess.CalledProcessError:
        return None
    return ids[-1] if ids else None


def _send(demo, desktop, message: str) -> None:
    code = ("import sys; from PySide6.QtCore import QCoreApplication; "
            "from hermes_tray.app.single_instance import SingleInstance; app = QCoreApplication([]); "
            f"sys.exit(0 if SingleInstance('tray').send_to_primary({message!r}) else 1)")
    env = product_env({**os.environ, **desktop.env, **demo.env})
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=20)


def test_screenshots_menu_prompt_window_settings(desktop, demo, tmp_path) -> None:
    """What the README shows: the tray with its menu open, the prompt window, the settings dialog."""
    tray = start_tray(desktop, demo, tmp_path, ("HOME", str(tmp_path)))  # paths read ~/demo/…
    try:
        tray.wait_event(lambda e: e["event"] == "tray-shown", what="tray icon")
        _running(tray, demo.session_key)
        demo.crash_backend()
        tray.wait_event(lambda e: e["event"] == "scan" and e.get("pending") == 1, what="pending turn")
        x, y, w, h = tray.wait_event(lambda e: e["event"] == "tray-geometry", what="icon placed")["geometry"]
        assert w > 0 and h > 0 and x > 0, "the tray host never embedded the icon"
        full = tmp_path / "full.png"

        desktop.xdotool("mousemove", x + w // 2, y + h // 2, "click", "3")
        time.sleep(1.5)  # let the popup finish painting
        desktop.shot(full)
        left, bottom = _menu_bounds(full)
        _crop(full, SHOTS / "tray-menu.png", left - 16, 0, 10_000, bottom + 16)
        desktop.xdotool("key", "Escape")
        time.sleep(0.2)

        _send(demo, desktop, "show")
        gx, gy, gw, gh = _window_geometry(desktop, "interrupted turns")
        time.sleep(0.5)
        desktop.shot(full)
        _crop(full, SHOTS / "prompt-window.png", gx, gy, gw, gh)

        # a running continuation: elapsed time, streaming status, Stop — live in the same window
        from hermes_tray.demo.sim_backend import write_control

        write_control(demo.home, turn_seconds=20)
        (note,) = [n for n in desktop.notifications() if n["summary"].startswith("Interrupted: Demo")][-1:]
        desktop.click_action(note["id"], "resume")
        tray.wait_event(lambda e: e["event"] == "scan" and e.get("pending") == 0, what="turn taken")
        time.sleep(3.5)
        desktop.shot(full)
        # a test artifact only: the README's copy, with a turn waiting beside it, is make_screenshots.py's
        running = ROOT / "test-artifacts" / "screenshots" / "prompt-window-running-tray.png"
        _crop(full, running, gx, gy, gw, gh)

        _send(demo, desktop, "settings")
        sx, sy, sw, sh = _window_geometry(desktop, "Settings")
        time.sleep(0.5)
        desktop.shot(full)
        _crop(full, SHOTS / "settings.png", sx, sy, sw, sh)
        for shot in (*(SHOTS / n for n in ("tray-menu.png", "prompt-window.png", "settings.png")), running):
            assert shot.stat().st_size > 3000, shot.name
    finally:
        assert tray.stop() == 0, (tmp_path / "tray.stderr").read_text()[-2000:]
