"""Homes written by newer Hermes (upstream v0.23.x), as fixture homes: markers with fields the tray does not know,
entries Hermes' newer reader drops or does not continue, and a Hermes that keeps its sessions elsewhere.

* Markers grow ``turn_id``, ``conversation_generation``, ``personal_authorization_blocked`` (upstream
  ``tests/test_tui_gateway_auto_continue``-style tests of ``tui_gateway/turn_marker.py``, stored copy: the marker
  round trip with ``turn_id``, the personal flag kept): every write of the tray keeps them, and any field it does
  not know, on every entry it does not mean to change.
* An entry starting more than 5 minutes in the future is dropped by newer Hermes' reader; one whose
  ``conversation_generation`` is not the session's (a chat clear since) is not continued: neither is offered.
* ``sessiondb.provider`` other than ``sqlite``, or a fork's ``sessions.state_backend: authority``: the sessions
  and markers live elsewhere, and the tray says so instead of reading a stale ``state.db`` or marker file."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from hermes_tray.demo import sim_state
from hermes_tray_core.continuing.resume import assess, resume_turn
from hermes_tray_core.hermes.homes import discover_homes
from hermes_tray_core.markers.store import MarkerStore
from hermes_tray_core.scanning.scanner import Scanner
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Outcome, ReasonCode, Refusal, Verdict
from tests.support.product import product_env, tray_argv
from tests.support.sim_homes import dead_identity, make_home, plant_marker

NEWER = {"turn_id": "20261201T101500Z-0123456789ab", "conversation_generation": 3,
         "personal_authorization_blocked": True, "a_field_from_the_future": {"nested": [1, 2]}}


def newer_entry(prompt: str, **more) -> dict:
    ident = dead_identity()
    return {"attempts": 0, "auto_continue": True, "prompt": prompt, "started_at": time.time() - 30,
            "writer_pid": ident.pid, "writer_start_time": ident.start_time, **NEWER, **more}


def write_markers(home, entries: dict) -> None:
    path = home / "desktop" / "interrupted_turns.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries))
    path.chmod(0o600)


def set_generation(home, key: str, generation: int) -> None:
    conn = sim_state.connect(home)
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
        if "conversation_generation" not in cols:
            conn.execute("ALTER TABLE sessions ADD COLUMN conversation_generation INTEGER")
        conn.execute("UPDATE sessions SET conversation_generation = ? WHERE id = ?", (generation, key))
    finally:
        conn.close()


def verdicts(home) -> dict[str, tuple[str, str]]:
    result = Scanner(discover_homes(explicit=[home])).scan()
    return {t.session_key: (t.verdict, t.code) for t in result.turns}


def test_unknown_fields_survive_every_write_of_the_tray(tmp_path):
    home, key = make_home(tmp_path / "h")
    other = sim_state.create_session(home)
    kept = newer_entry("Keep me exactly as Hermes wrote me.")
    write_markers(home, {key: kept, other: newer_entry("Skip me.")})
    store = MarkerStore(home)
    assert store.remove_if_unchanged(other, store.list()[other], settle=False)  # a skip
    assert store.list()[key] == kept
    third = sim_state.create_session(home)
    store.record(third, "A turn of ours.", writer=dead_identity())  # a marker the tray keeps for a run
    assert store.list()[key] == kept
    changed = {**kept, "attempts": 1}
    assert store.replace_if_unchanged(key, kept, changed, settle=False)  # compare-and-swap keeps what it is given
    assert store.list()[key] == changed and store.list()[key]["a_field_from_the_future"] == {"nested": [1, 2]}


def test_an_entry_from_the_future_is_not_offered(tmp_path):
    home, key = make_home(tmp_path / "h")
    soon = sim_state.create_session(home)
    write_markers(home, {key: newer_entry("From a wrong clock.", started_at=time.time() + 3600),
                         soon: newer_entry("Within Hermes' skew.", started_at=time.time() + 120)})
    seen = verdicts(home)
    assert seen[key] == (Verdict.NOT_OURS, ReasonCode.FUTURE_ENTRY)
    assert seen[soon][0] != Verdict.NOT_OURS  # within 5 minutes: Hermes keeps it, and so does the tray


def test_an_entry_of_another_conversation_generation_is_not_offered(tmp_path):
    home, key = make_home(tmp_path / "h")
    same = sim_state.create_session(home)
    write_markers(home, {key: newer_entry("Before the clear."), same: newer_entry("After the clear.")})
    set_generation(home, key, 4)  # cleared since the marker (generation 3) was written
    set_generation(home, same, 3)
    seen = verdicts(home)
    assert seen[key] == (Verdict.NOT_OURS, ReasonCode.OTHER_GENERATION)
    assert seen[same] == (Verdict.ACTIONABLE, ReasonCode.ACTIONABLE)
    entry = MarkerStore(home).list()[key]
    assert assess(Turn.of(home, key, entry)).verdict == Verdict.NOT_OURS  # the resume path decides the same
    res = resume_turn(Turn.of(home, key, entry), via="test")
    assert res.outcome == Outcome.REFUSED and "chat was cleared" in res.message


@pytest.mark.parametrize("config", ["sessiondb:\n  provider: postgres\n",
                                    "sessions:\n  state_backend: authority\n"], ids=["sessiondb", "authority"])
def test_a_hermes_that_keeps_its_sessions_elsewhere_is_said_plainly(tmp_path, config):
    home, key = make_home(tmp_path / "h")
    entry = plant_marker(home, key, "A stale marker in a file this Hermes no longer reads.")
    with (home / "config.yaml").open("a") as fh:
        fh.write(config)
    result = Scanner(discover_homes(explicit=[home])).scan()
    assert result.turns == []  # the stale file is not read as this Hermes' turns
    (report,) = result.homes
    assert report.markers == "elsewhere" and "keeps its sessions elsewhere" in report.unsupported[0]
    text = subprocess.run(tray_argv("status", "--home", home), env=product_env(), capture_output=True, text=True,
                          timeout=120).stdout
    assert "this Hermes keeps its sessions elsewhere" in text and "no interrupted turns\n" not in text
    res = resume_turn(Turn.of(home, key, entry), via="test")
    assert res.outcome == Outcome.REFUSED and res.code == Refusal.SESSIONS_ELSEWHERE
    assert "keeps its sessions elsewhere" in res.message


def test_sqlite_is_where_upstream_keeps_them(tmp_path):
    home, key = make_home(tmp_path / "h")
    plant_marker(home, key, "Still read.")
    with (home / "config.yaml").open("a") as fh:
        fh.write("sessiondb:\n  provider: sqlite\n")
    assert verdicts(home)[key][0] == Verdict.ACTIONABLE
