"""A crash storm is one notification updated in place (the server sees ``replaces_id``); an answered note goes,
on a server that leaves it up too; and turns interrupted while the tray was not running are shown once at the
next start — never again after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import start_tray, wait_for
from tests.support.product import product_env

WRITER = (
    "import sys, time; from hermes_tray_core.markers.turn_marker import record_turn_start; "
    "record_turn_start(sys.argv[1], sys.argv[2], 'storm turn ' + sys.argv[2]); print('ready', flush=True); time.sleep(600)"
)


@pytest.fixture
def demo(tmp_path, monkeypatch):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, start_turn=False)
    for k, v in d.env.items():
        monkeypatch.setenv(k, v)
    yield d
    d.cleanup()


def _writers(demo, n: int) -> list[tuple[str, subprocess.Popen]]:
    from hermes_tray.demo import sim_state

    out = []
    for i in range(n):
        key = sim_state.create_session(demo.home, title=f"Storm turn {i + 1}")
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(demo.home), key], stdout=subprocess.PIPE,
                                text=True, env=product_env())
        assert proc.stdout.readline().startswith("ready")
        out.append((key, proc))
    return out


def _ours(desktop, after: float) -> list[dict]:
    return [n for n in desktop.notifications() if n["app_name"] == "Hermes Tray" and n["time"] >= after]


def test_crash_storm_is_one_notification_updated_in_place(desktop, demo, tmp_path) -> None:
    tray = start_tray(desktop, demo, tmp_path)
    writers = _writers(demo, 3)
    try:
        tray.wait_event(lambda e: e["event"] == "scan" and sum(v == "running" for v in e["verdicts"].values()) == 3,
                        what="three running turns")
        t0 = time.time()
        for i, (_key, proc) in enumerate(writers):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            if i < len(writers) - 1:
                time.sleep(0.4)  # a storm: backends dying one after another within the 2 s window
        final = wait_for(lambda: [n for n in _ours(desktop, t0) if n["summary"] == "3 Hermes turns interrupted"], 10,
                         "the storm summary")[-1]
        notes = _ours(desktop, t0)
        first = notes[0]
        assert first["summary"].startswith("Interrupted: ") and first["replaces_id"] == 0
        assert all(n["replaces_id"] == first["id"] for n in notes[1:]), "updates must replace the first notification"
        assert final["id"] == first["id"]
        assert final["actions"] == {"default": "Open", "resume-all": "Resume all", "skip-all": "Skip all"}
        desktop.click_action(final["id"], "skip-all")
        from hermes_tray_core.markers.store import list_turn_markers

        wait_for(lambda: not list_turn_markers(demo.home), 10, "all three skipped")
    finally:
        for _key, proc in writers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert tray.stop() == 0


def _storm(desktop, tray, writers, t0: float) -> dict:
    """Kill ``writers`` one after another within the coalescing window; the note that names them all."""
    keys = {key for key, _proc in writers}
    tray.wait_event(lambda e: e["event"] == "scan" and all(e["verdicts"].get(k) == "running" for k in keys),
                    what="running turns")
    for i, (_key, proc) in enumerate(writers):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if i < len(writers) - 1:
            time.sleep(0.4)
    title = f"{len(writers)} Hermes turns interrupted"
    return wait_for(lambda: [n for n in _ours(desktop, t0) if n["summary"] == title], 10, title,
                    seen=lambda: [n["summary"] for n in _ours(desktop, t0)])[-1]


def test_an_answered_note_goes_on_a_server_that_leaves_it_up(dunst_like_desktop, demo, tmp_path) -> None:
    """dunst's action menu runs the action and leaves the note up: before, it stayed on screen still offering
    Skip all (a second press did nothing), and the next storm's note stacked beside it. The tray closes every note
    the user answered itself; the next storm gets a note of its own, alone on screen; and a storm note replaced in
    place journals each turn as asked once."""
    from hermes_tray_core.markers.store import list_turn_markers
    from hermes_tray_core.stores.ledger import ledger

    desktop = dunst_like_desktop
    tray = start_tray(desktop, demo, tmp_path)
    writers = _writers(demo, 3)
    later: list[tuple[str, subprocess.Popen]] = []
    try:
        first = _storm(desktop, tray, writers, time.time())
        desktop.click_action(first["id"], "skip-all")  # ActionInvoked, and the server leaves the note up
        wait_for(lambda: not list_turn_markers(demo.home), 10, "all three skipped")
        wait_for(lambda: first["id"] not in desktop.on_screen(), 10, "the answered note closed",
                 seen=desktop.on_screen)
        assert [(c["by"], c["was_open"]) for c in desktop.closes() if c["closed"] == first["id"]] == [("app", True)]
        later = _writers(demo, 2)
        second = _storm(desktop, tray, later, time.time())
        assert second["id"] != first["id"] and second["replaces_id"] in (0, second["id"])
        time.sleep(0.5)
        assert desktop.on_screen() == [second["id"]], "a later note stacks beside nothing"
        def asked() -> list[str]:
            return sorted(e["session_key"] for e in ledger().history(100) if e["event"] == "notified")

        wait_for(lambda: len(asked()) >= 5, 10, "five turns journalled as asked", seen=asked)
        time.sleep(0.5)
        assert asked() == sorted(k for k, _p in writers + later), "each turn journalled as asked once"
    finally:
        for _key, proc in writers + later:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert tray.stop() == 0


def test_interrupted_while_tray_was_off_is_shown_once(desktop, demo, tmp_path) -> None:
    ((key, proc),) = _writers(demo, 1)
    os.kill(proc.pid, signal.SIGKILL)  # power loss / crash while no tray runs
    proc.wait()
    t0 = time.time()
    tray = start_tray(desktop, demo, tmp_path)
    try:
        tray.wait_event(lambda e: e["event"] == "scan" and e["verdicts"].get(key) == "actionable", what="first scan")
        wait_for(lambda: [n for n in _ours(desktop, t0) if n["summary"].startswith("Interrupted: ")], 30,
                 "notification at start")  # the notifier loads on first need
    finally:
        assert tray.stop() == 0
    t1 = time.time()
    again = start_tray(desktop, demo, tmp_path)
    try:
        again.wait_event(lambda e: e["event"] == "scan" and e.get("pending") == 1, what="turn still pending")
        time.sleep(1.0)
        assert _ours(desktop, t1) == [], "a restart must not ask again about the same turn"
    finally:
        assert again.stop() == 0
