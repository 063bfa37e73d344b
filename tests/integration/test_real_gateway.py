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
from real_session import SEED_PROMPT

from hermes_tray_core.backend_config import write_auto_continue
from hermes_tray_core.continuation import NOTE_PREFIX, continuation_note
from hermes_tray_core.markers import list_turn_markers, marker_writer_state
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


def turn_requests(mock: MockOpenAI, since: int) -> list[Recorded]:
    """Agent-turn requests after ``since`` (Hermes' auxiliary title generation excluded)."""
    out = []
    for r in mock.completions()[since:]:
        first = r.messages[0].get("content") if r.messages else ""
        if isinstance(first, str) and first.startswith("Generate a short, descriptive title"):
            continue
        out.append(r)
    return out


def transcript(home: Path, key: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return [(r, c or "") for r, c in conn.execute(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (key,))]
    finally:
        conn.close()


def journal_events(key: str) -> list[str]:
    from hermes_tray_core import decisions

    return [e["event"] for e in reversed(decisions.history(500)) if e.get("session_key") == key]


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

    from hermes_tray_core import gateway
    from hermes_tray_core.resume import resume_turn

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
        res = resume_turn(home, key, entry, stop=stop, on_progress=progress, options=opts)
    finally:
        mock_llm.delay = 0.0
    assert res.outcome == "interrupted", res.message
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "interrupted"]
    assert res.continuation is not None and not pid_running(res.continuation.gateway_pid)
