"""``hermes-tray resume`` through the real Hermes gateway (hermes-agent 0.19.0 from PyPI).

0.19.0 predates auto-continue, so these runs exercise the tray's side of the contract: it asks the
installation, submits the continuation note itself, keeps the marker for the run and clears it.
A loopback mock stands in for the model; everything else — the gateway, its agent loop, its
``state.db`` — is Hermes' own.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mock_openai import MockOpenAI, Recorded
from real_flow import turn_requests, wait_for  # noqa: F401 - turn_requests also imported from here by test_real_dashboard
from real_session import SEED_PROMPT

from hermes_tray_core.hermes.config_edit import write_auto_continue
from hermes_tray_core.hermes.note import NOTE_PREFIX, continuation_note
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.turn import Turn
from tests.support.sim_homes import pid_running, plant_marker, settings_for


@pytest.fixture
def env(user_dirs: dict[str, str], hermes_python: Path) -> dict[str, str]:
    dirs = user_dirs  # tests/conftest.py: the test's private tray dirs
    settings_for(str(hermes_python), Path(dirs["HERMES_TRAY_CONFIG_DIR"]))
    return dirs


def cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hermes_tray", *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def continuations(mock: MockOpenAI, since: int) -> list[Recorded]:
    """Model requests of continuation turns (the note as the newest user message) after ``since``."""
    return [r for r in mock.completions()[since:] if r.last_user_text().startswith(NOTE_PREFIX)]


def transcript(home: Path, key: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return [(r, c or "") for r, c in conn.execute(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (key,))]
    finally:
        conn.close()


def journal_events(key: str) -> list[str]:
    from hermes_tray_core.stores.ledger import ledger

    return [e["event"] for e in reversed(ledger().history(500)) if e.get("session_key") == key]


def status_of(home: Path, key: str, env: dict[str, str]) -> dict:
    p = cli("status", "--json", "--home", str(home), env=env)
    out, err = p.communicate(timeout=60)
    turns = [t for t in json.loads(out)["turns"] if t["session_key"] == key]
    assert len(turns) == 1, (out, err)
    return turns[0]


def test_resume_runs_exactly_one_continuation_through_the_real_gateway(real_home, mock_llm, env):
    home, key = real_home
    before = transcript(home, key)
    assert [r for r, _ in before] == ["user", "assistant"]
    plant_marker(home, key, SEED_PROMPT)  # as a backend that died mid-turn leaves it
    since = len(mock_llm.completions())

    p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
    out, err = p.communicate(timeout=150)
    assert p.returncode == 0, err
    result = json.loads(out)
    assert result["outcome"] == "completed" and result["continued_by"] == "tray" and result["attempt"] == 1

    # Exactly one continuation turn reached the model, carrying the note and the original prompt.
    (req,) = continuations(mock_llm, since)
    assert req.last_user_text() == continuation_note(SEED_PROMPT)
    assert len(turn_requests(mock_llm, since)) == 1
    # Hermes' own transcript shows it, after the earlier turn.
    after = transcript(home, key)
    assert after[:2] == before
    assert after[2] == ("user", continuation_note(SEED_PROMPT))
    assert after[3][0] == "assistant" and "notes.txt" in after[3][1]
    # Bookkeeping: marker gone, journal approved → dispatched → completed.
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]


def test_sigkill_mid_continuation_leaves_an_actionable_marker(real_home, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    mock_llm.hold()  # the model "thinks" until released: the turn is reliably mid-run
    try:
        p = cli("resume", key, "--home", str(home), "--wait", env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not continuations(mock_llm, since):
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        assert continuations(mock_llm, since), "the continuation never reached the model"
        running = list_turn_markers(home)[key]
        assert running["attempts"] == 1 and marker_writer_state(running) == "alive"
        assert status_of(home, key, env)["verdict"] == "running"
        gw_pid = running["writer_pid"]
        os.kill(gw_pid, signal.SIGKILL)  # the gateway dies mid-turn
        _out, err = p.communicate(timeout=60)
    finally:
        mock_llm.release()
    assert p.returncode == 3 and "exited mid-turn" in err
    assert not pid_running(gw_pid)
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and m["prompt"] == SEED_PROMPT and marker_writer_state(m) == "dead"
    st = status_of(home, key, env)
    assert st["verdict"] == "actionable" and st["writer"] == "dead" and st["attempts"] == 1
    assert journal_events(key) == ["approved", "continuing", "dispatched", "failed"]
    # At the budget the same marker reads exhausted, never running.
    write_auto_continue(home, max_attempts=1)
    assert status_of(home, key, env)["verdict"] == "exhausted"


def test_two_resumes_at_the_same_instant_run_one_continuation(real_home, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    procs = [cli("resume", key, "--home", str(home), "--wait", env=env) for _ in range(2)]
    outs = [p.communicate(timeout=150) for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 1], outs
    assert len(continuations(mock_llm, since)) == 1
    assert len(turn_requests(mock_llm, since)) == 1
    assert key not in list_turn_markers(home)
    assert [r for r, _ in transcript(home, key)].count("user") == 2


def test_stop_interrupts_a_real_continuation(real_home, mock_llm, env):
    """``session.interrupt`` on the real gateway; the stopped turn is not continued again."""
    import threading

    from hermes_tray_core.continuing import gateway
    from hermes_tray_core.continuing.resume import resume_turn

    home, key = real_home
    entry = plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    stop = threading.Event()
    mock_llm.delay = 3.0  # a slow model: the stop lands mid-request
    try:
        def progress(p: gateway.Progress) -> None:
            if continuations(mock_llm, since):
                stop.set()

        opts = gateway.GatewayOptions(stop_grace=20, progress_interval=0.1)
        res = resume_turn(Turn.of(home, key, entry), stop=stop, listener=gateway.Callbacks(on_progress=progress),
                          options=opts)
    finally:
        mock_llm.delay = 0.0
    assert res.outcome == "interrupted", res.message
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "interrupted"]
    assert res.continuation is not None and not pid_running(res.continuation.gateway_pid)


# ── the kill window: resume --wait stopped or killed after the note reached the model ───────────


def status_turns(home: Path, key: str, env: dict[str, str]) -> list[dict]:
    p = cli("status", "--json", "--home", str(home), env=env)
    out, err = p.communicate(timeout=60)
    return [t for t in json.loads(out)["turns"] if t["session_key"] == key]


def answered(home: Path, key: str) -> bool:
    """Hermes' own transcript: the note and an assistant reply after it."""
    rows = transcript(home, key)
    notes = [i for i, (r, c) in enumerate(rows) if r == "user" and c.startswith(NOTE_PREFIX)]
    return bool(notes) and any(r == "assistant" for r, _c in rows[notes[-1] + 1:])


def start_until_the_model_has_the_note(home: Path, key: str, mock: MockOpenAI, env: dict[str, str]):
    since = len(mock.completions())
    mock.hold()  # the model "thinks" until released: the note is provably with the model, unanswered
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    wait_for(lambda: continuations(mock, since) or p.poll() is not None, "the note to reach the model")
    assert p.poll() is None, p.communicate()
    marker = list_turn_markers(home)[key]
    assert marker["attempts"] == 1 and marker_writer_state(marker) == "alive"
    return p, since, marker["writer_pid"]


def stop_while_hermes_finishes(p: subprocess.Popen[str], home: Path, key: str, mock: MockOpenAI) -> None:
    """SIGSTOP the client (as Ctrl-Z would, but unrefusable), let the model answer, wait for Hermes' reply."""
    os.kill(p.pid, signal.SIGSTOP)
    mock.release()
    wait_for(lambda: answered(home, key), "Hermes to finish the continuation")


def assert_never_doubled(home: Path, key: str, mock: MockOpenAI, since: int, env: dict[str, str]) -> None:
    """`status` shows nothing actionable, a second resume is refused, the model saw exactly one note."""
    assert not [t for t in status_turns(home, key, env) if t["verdict"] == "actionable"]
    again = cli("resume", key, "--home", str(home), "--wait", env=env)
    _out, err = again.communicate(timeout=150)
    assert again.returncode == 1 and "Not resumed" in err, err
    assert len(continuations(mock, since)) == 1
    assert [r for r, c in transcript(home, key) if r == "user" and c.startswith(NOTE_PREFIX)] == ["user"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX job-control signals")
def test_kill_window_sigstop_then_sigkill_after_the_note_reached_the_model(real_home, mock_llm, env):
    # Ctrl-Z then `kill %1`, or a debugger, or a frozen terminal: the client is stopped while Hermes
    # finishes, then killed. Its gateway exits at stdin EOF, leaving the marker (attempts 1, a dead
    # writer) of a turn that completed: Hermes' state.db says so, and every reader honours it.
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    p, since, gw_pid = start_until_the_model_has_the_note(home, key, mock_llm, env)
    try:
        stop_while_hermes_finishes(p, home, key, mock_llm)
    finally:
        mock_llm.release()
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
    wait_for(lambda: not pid_running(gw_pid), "the gateway to exit after its client died", 60)
    left = list_turn_markers(home)[key]  # the dead client could not retire it
    assert left["attempts"] == 1 and marker_writer_state(left) == "dead"
    assert_never_doubled(home, key, mock_llm, since, env)
    assert key not in list_turn_markers(home)  # the first reader retired it
    # completed twice, once per identity: the run the killed client left open (core.continuing.orphans) and the
    # marker it kept (core.continuing.completion) — one turn, one row in History
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed", "completed"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_kill_window_sigterm_after_the_note_reached_the_model(real_home, mock_llm, env):
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    p, since, gw_pid = start_until_the_model_has_the_note(home, key, mock_llm, env)
    try:
        p.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the interrupt is on its way while the model still "thinks"
        mock_llm.release()
        _out, err = p.communicate(timeout=120)
    finally:
        mock_llm.release()
    assert "SIGTERM: stopping…" in err
    assert p.returncode in (0, 3, 4), err  # completed (Hermes finished first), interrupted, or stopped: all recorded
    assert not pid_running(gw_pid)
    assert key not in list_turn_markers(home)
    assert_never_doubled(home, key, mock_llm, since, env)
    assert journal_events(key)[:3] == ["approved", "continuing", "dispatched"]
    assert journal_events(key)[3] in ("completed", "interrupted")


@pytest.mark.skipif(os.name == "nt", reason="POSIX job-control signals")
def test_kill_window_sigterm_to_a_stopped_client_after_hermes_finished(real_home, mock_llm, env):
    # `kill %1` on a job Ctrl-Z stopped, the shell then resuming it: the stop arrives after Hermes
    # finished; the turn is recorded completed (its reply is there), not interrupted, and not run again.
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    p, since, _gw_pid = start_until_the_model_has_the_note(home, key, mock_llm, env)
    try:
        stop_while_hermes_finishes(p, home, key, mock_llm)
        os.kill(p.pid, signal.SIGTERM)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=120)
    finally:
        mock_llm.release()
    assert p.returncode == 0 and "Resumed and finished." in out, err  # the outcome in words (issue 25)
    assert key not in list_turn_markers(home)
    assert_never_doubled(home, key, mock_llm, since, env)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]
