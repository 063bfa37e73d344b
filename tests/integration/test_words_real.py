"""What the tray says about turns, against the real ``hermes dashboard`` (hermes-agent 0.19.0, no auto-continue)
on a random loopback port and the mock model: History after a real continuation (one row per turn), a session
open in the Hermes app (said up front, never offered for a Resume it would refuse), and ``doctor`` with a
running Hermes but no ``hermes`` command.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from real_dashboard import running_dashboard
from real_session import SEED_PROMPT

from hermes_tray_core import turn_key
from tests.support.product import product_env, tray_argv
from tests.support.sim_homes import plant_marker, settings_for

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX process table")


def test_a_resume_inside_the_real_dashboard_is_one_history_row(real_home, mock_llm, hermes_python: Path,
                                                                 user_dirs: dict[str, str], qtbot) -> None:
    """Issue 25.1. Before: after one Resume that ran inside the real dashboard and finished, History showed
    "2 interrupted turns": the real one and a phantom "running" row holding only the ``continuing`` event,
    stamped with the continuation's own start."""
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray_core.stores.ledger import ledger

    home, key = real_home
    settings_for(str(hermes_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    with running_dashboard(hermes_python, home) as (dash, _port):
        plant_marker(home, key, SEED_PROMPT)
        p = subprocess.run(tray_argv("resume", key, "--home", home, "--wait", "--json"), env=product_env(),
                           capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["outcome"] == "completed" and result["ran_in"] == "running-backend"
    assert result["backend_pid"] == dash.pid
    events = [e for e in reversed(ledger().history(500)) if e.get("session_key") == key]
    names = [e["event"] for e in events]
    assert "continuing" in names and names[-1] == "completed", names
    assert len({e["started_at"] for e in events}) == 1  # every step recorded about the interruption it continues
    import sqlite3

    with sqlite3.connect(ledger().path) as conn:  # the continuation's own marker, with its own start, is the run's
        (own,) = conn.execute("SELECT marker_started FROM runs").fetchall()
    assert own[0] is not None and own[0] != events[0]["started_at"], "the continuation's marker has a start of its own"

    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    assert win.tree.topLevelItemCount() == 1
    assert win.summary.text().startswith("1 interrupted turn")
    row = win.selected_turn()
    assert row is not None and row.session_key == key
    assert [str(e["event"]) for e in row.events] == names  # every event of the turn, in its row
    assert row.started_at == min(e["started_at"] for e in events)  # interrupted when the first run was
    assert row.outcome() == "Resumed and finished" and row.where() == "Your running Hermes"


def _window(home: Path, key: str):
    """A stand-in for a Hermes Desktop window holding ``key``: its own /api/ws connection that resumed it."""
    from hermes_tray_core.backend.rpc import RpcSession
    from hermes_tray_core.backend.running import find_live_backend
    from hermes_tray_core.backend.websocket import WebSocketTransport

    backend, why = find_live_backend(home)
    assert backend is not None, why
    s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid))
    s.start()
    s.wait_ready(10)
    s.request("session.resume", {"session_id": key}, timeout=60)
    return s


def test_a_session_open_in_the_hermes_app_is_said_up_front_and_offered_no_resume(
        real_home, mock_llm, hermes_python: Path, user_dirs: dict[str, str], qtbot) -> None:
    """Issue 25.3. Before: ``status`` said ``actionable`` and the Resume button stayed for a session open in the
    Hermes app; pressing it was refused. The running Hermes is asked which sessions it has open before a turn
    is offered: such a turn reads "Open in Hermes — it continues there", with no Resume."""
    from hermes_tray.controller import Controller
    from hermes_tray.engine import CoreEngine
    from hermes_tray.notify.log import LogNotifier
    from hermes_tray.watch.detector import ScanReport
    from hermes_tray_core.backend import sessions as backend_sessions

    home, key = real_home
    settings_for(str(hermes_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    with running_dashboard(hermes_python, home) as (dash, _port):
        plant_marker(home, key, SEED_PROMPT)
        closed = json.loads(subprocess.run(tray_argv("status", "--json", "--home", home), env=product_env(),
                                           capture_output=True, text=True, timeout=60).stdout)
        assert [t["verdict"] for t in closed["turns"] if t["session_key"] == key] == ["actionable"]
        window = _window(home, key)
        try:
            backend_sessions.forget()
            out = json.loads(subprocess.run(tray_argv("status", "--json", "--home", home), env=product_env(),
                                            capture_output=True, text=True, timeout=60).stdout)
            turn = next(t for t in out["turns"] if t["session_key"] == key)
            assert turn["verdict"] == "running" and turn["reason_code"] == "owner-alive", turn
            assert f"pid {dash.pid}" in turn["reason"]

            engine = CoreEngine([str(home)])
            ctrl = Controller(engine, LogNotifier())
            records, problems, extra = engine.scan(engine.homes())
            ctrl.on_scan(ScanReport(tuple(records), tuple(problems), finished=time.time(), extra=extra))
            assert ctrl.state.pending == ()  # no Resume offered
            row = next(r for r in ctrl.state.recent if r.session_key == key)
            assert (row.what, row.why, row.actions) == ("Open in Hermes", "It continues there.", ())
            assert ctrl.resume(turn_key(home, key)) is True  # even asked directly, Hermes' answer stands
            qtbot.waitUntil(lambda: not ctrl.state.running, timeout=90_000)
            note = ctrl.notifier.shown[-1]
            assert note.title == "Turn not resumed" and "Hermes has it open. It continues there." in note.body
        finally:
            window.shutdown(5)


def test_doctor_names_the_running_hermes_and_does_not_also_say_not_found(
        real_home, hermes_python: Path, user_dirs: dict[str, str]) -> None:
    """Issue 25.9. Before: "Hermes: not found … not installed or not on PATH" in the same output as "running
    Hermes: pid N … resumes continue there". No ``hermes`` on PATH and none in the settings here."""
    home, _key = real_home
    env = product_env(PATH=os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                            if not os.path.exists(os.path.join(p, "hermes"))))
    with running_dashboard(hermes_python, home) as (dash, _port):
        p = subprocess.run(tray_argv("doctor", "--home", home, "--no-probe", "--json"), env=env,
                           capture_output=True, text=True, timeout=120)
        text = subprocess.run(tray_argv("doctor", "--home", home, "--no-probe"), env=env,
                              capture_output=True, text=True, timeout=120).stdout
    report = json.loads(p.stdout)
    assert report["hermes"]["installed"] is False
    assert report["hermes"]["running"] == [{"pid": dash.pid, "home": report["homes"][0]["path"]}]
    assert not [x for x in report["problems"] if "not installed" in x or "hermes_command" in x], report["problems"]
    assert f"running Hermes: pid {dash.pid}" in text and "resumes continue there" in text
    hermes = text.split("Hermes:\n", 1)[1].split("Desktop:", 1)[0]
    assert "not found" not in hermes and f"running: pid {dash.pid}" in hermes, hermes
