"""A crash storm is one notification updated in place (the server sees ``replaces_id``), and turns
interrupted while the tray was not running are shown once at the next start — never again after."""

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
