"""Read-only views of Hermes' state.db and active-session registry, on schemas built here."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.hermes import state_db as hs
from hermes_tray_core.process.identity import own_pidns, process_start_time

NOW = 1_800_000_000.0


def make_db(home: Path, *, schema: str = "classic", wal: bool = True) -> sqlite3.Connection:
    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "state.db", isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, "
        "parent_session_id TEXT, end_reason TEXT, started_at REAL)"
    )
    if schema == "classic":
        conn.execute(
            "CREATE TABLE session_turn_leases (conversation_id TEXT PRIMARY KEY, holder TEXT, "
            "acquired_at REAL, expires_at REAL)"
        )
    elif schema == "new":
        conn.execute(
            "CREATE TABLE session_turn_leases (conversation_id TEXT PRIMARY KEY, holder TEXT NOT NULL, "
            "acquired_at REAL, expires_at REAL, epoch INTEGER NOT NULL DEFAULT 0, owner_pid INTEGER, "
            "owner_pid_start REAL)"
        )
    return conn


def add_session(conn, sid, *, parent=None, end_reason=None, source="cli", title=None):
    conn.execute(
        "INSERT INTO sessions (id, source, title, parent_session_id, end_reason) VALUES (?,?,?,?,?)",
        (sid, source, title, parent, end_reason),
    )


def add_lease(conn, cid, holder, expires_at, **extra):
    cols = ["conversation_id", "holder", "acquired_at", "expires_at", *extra]
    vals = [cid, holder, expires_at - 300, expires_at, *extra.values()]
    conn.execute(f"INSERT INTO session_turn_leases ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})", vals)


def our_ns() -> int | None:
    return own_pidns()


def holder(pid: int, *, ns: int | None | str = "ours") -> str:
    ns = our_ns() if ns == "ours" else ns
    part = f":pidns={ns}" if ns is not None else ""
    return f"pid={pid}{part}:turn=t1:platform=cli"


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


needs_pidns = pytest.mark.skipif(own_pidns() is None, reason="no pid namespaces on this platform")


def test_session_info_reads_row_and_tolerates_missing_columns(tmp_path):
    conn = make_db(tmp_path)
    add_session(conn, "s1", title="Fix the build", source="bot_room")
    assert hs.lookup_session(tmp_path, "s1")[0] == hs.SessionInfo("s1", "Fix the build", "bot_room", None, None)
    assert hs.lookup_session(tmp_path, "nope") == (None, None)

    old = tmp_path / "old"
    old.mkdir()
    c2 = sqlite3.connect(old / "state.db")
    c2.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT)")
    c2.execute("INSERT INTO sessions VALUES ('s1', 'cli')")
    c2.commit()
    assert hs.lookup_session(old, "s1")[0] == hs.SessionInfo("s1", None, "cli", None, None)
    assert hs.conversation_root_with(c2, "s1") == "s1"


def test_lookup_session_says_why_when_unreadable(tmp_path):
    info, problem = hs.lookup_session(tmp_path, "s1")
    assert info is None and "no state.db" in problem
    (tmp_path / "state.db").write_bytes(b"this is not sqlite at all" * 100)
    info, problem = hs.lookup_session(tmp_path, "s1")
    assert info is None and problem and "unreadable" in problem
    assert hs.turn_lease_view(tmp_path, "s1").state == "unknown"


def test_state_db_is_opened_read_only(tmp_path):
    conn = make_db(tmp_path)
    add_session(conn, "s1")
    conn.close()
    before = (tmp_path / "state.db").read_bytes()
    hs.lookup_session(tmp_path, "s1")[0]
    hs.turn_lease_view(tmp_path, "s1")
    assert (tmp_path / "state.db").read_bytes() == before
    ro_conn, _status, _problem = hs.connect_ro(tmp_path)
    with pytest.raises(sqlite3.OperationalError):
        ro_conn.execute("INSERT INTO sessions (id) VALUES ('x')")
    ro_conn.close()


def test_conversation_root_follows_compression_only(tmp_path):
    conn = make_db(tmp_path)
    add_session(conn, "root", end_reason="compression")
    add_session(conn, "mid", parent="root", end_reason="compression")
    add_session(conn, "leaf", parent="mid")
    add_session(conn, "branch", parent="leaf")  # leaf did not end by compression: a branch, own root
    add_session(conn, "cyc1", parent="cyc2", end_reason="compression")
    add_session(conn, "cyc2", parent="cyc1", end_reason="compression")
    assert hs.conversation_root_with(conn, "leaf") == "root"
    assert hs.conversation_root_with(conn, "mid") == "root"
    assert hs.conversation_root_with(conn, "branch") == "branch"
    assert hs.conversation_root_with(conn, "unknown-id") == "unknown-id"
    assert hs.conversation_root_with(conn, "cyc1") in {"cyc1", "cyc2"}  # terminates


@pytest.mark.parametrize("schema", ["classic", "new"])
def test_lease_free_when_no_row_released_or_expired(tmp_path, schema, sleeper):
    conn = make_db(tmp_path, schema=schema)
    add_session(conn, "s1")
    assert hs.turn_lease_view(tmp_path, "s1", now=NOW).state == "free"
    add_lease(conn, "s1", holder(sleeper.pid), NOW - 1)
    view = hs.turn_lease_view(tmp_path, "s1", now=NOW)
    assert (view.state, view.detail) == ("free", "turn lease expired")
    conn.execute("UPDATE session_turn_leases SET holder = '', expires_at = ?", (NOW + 100,))
    assert hs.turn_lease_view(tmp_path, "s1", now=NOW).state == "free"


@pytest.mark.parametrize("schema", ["classic", "new"])
def test_foreign_or_missing_pidns_is_live_until_expiry(tmp_path, schema, dead_pid):
    conn = make_db(tmp_path, schema=schema)
    add_session(conn, "a")
    add_session(conn, "b")
    add_lease(conn, "a", holder(dead_pid, ns=None), NOW + 60)  # classic Hermes: no pidns
    add_lease(conn, "b", holder(dead_pid, ns=1), NOW + 60)  # some other namespace
    for sid in ("a", "b"):
        view = hs.turn_lease_view(tmp_path, sid, now=NOW)
        assert view.state == "live", view
        assert view.expires_at == NOW + 60
        assert hs.turn_lease_view(tmp_path, sid, now=NOW + 61).state == "free"


@needs_pidns
@pytest.mark.parametrize("schema", ["classic", "new"])
def test_same_pidns_judged_by_pid(tmp_path, schema, sleeper, dead_pid):
    conn = make_db(tmp_path, schema=schema)
    add_session(conn, "alive")
    add_session(conn, "dead")
    add_lease(conn, "alive", holder(sleeper.pid), NOW + 60)
    add_lease(conn, "dead", holder(dead_pid), NOW + 60)
    assert hs.turn_lease_view(tmp_path, "alive", now=NOW).state == "live"
    view = hs.turn_lease_view(tmp_path, "dead", now=NOW)
    assert view.state == "free" and str(dead_pid) in view.detail


@needs_pidns
def test_new_schema_owner_pid_start_detects_recycled_pid(tmp_path, sleeper):
    conn = make_db(tmp_path, schema="new")
    add_session(conn, "same")
    add_session(conn, "recycled")
    start = process_start_time(sleeper.pid)
    add_lease(conn, "same", holder(sleeper.pid), NOW + 60, owner_pid=sleeper.pid, owner_pid_start=start, epoch=3)
    add_lease(conn, "recycled", holder(sleeper.pid), NOW + 60, owner_pid=sleeper.pid,
              owner_pid_start=start - 50, epoch=3)
    assert hs.turn_lease_view(tmp_path, "same", now=NOW).state == "live"
    assert hs.turn_lease_view(tmp_path, "recycled", now=NOW).state == "free"


def test_lease_is_found_under_the_conversation_root(tmp_path, sleeper):
    conn = make_db(tmp_path)
    add_session(conn, "root", end_reason="compression")
    add_session(conn, "child", parent="root")
    add_lease(conn, "root", holder(sleeper.pid, ns=None), NOW + 60)
    view = hs.turn_lease_view(tmp_path, "child", now=NOW)
    assert view.state == "live" and view.conversation_id == "root"


def test_missing_lease_table_or_missing_db_is_free(tmp_path):
    conn = make_db(tmp_path, schema="none")
    add_session(conn, "s1")
    assert hs.turn_lease_view(tmp_path, "s1").state == "free"
    # no state.db at all cannot hold a lease: free (not "unknown", which would leave its turns
    # "running" forever); with no registry either, nothing says a backend is on the session
    (tmp_path / "bare").mkdir()
    view = hs.turn_lease_view(tmp_path / "bare", "s1")
    assert view.state == "free" and "no state.db" in view.detail
    act = hs.session_activity(tmp_path / "bare", "s1")
    assert (act.lease.state, act.owner.state, act.running, act.unsure) == ("free", "none", False, False)
    assert hs.turn_lease_view(tmp_path / "nohome", "s1").state == "free"


def test_state_db_that_exists_but_cannot_be_read_stays_unknown(tmp_path):
    (tmp_path / "dir" / "state.db").mkdir(parents=True)  # not a file
    assert hs.turn_lease_view(tmp_path / "dir", "s1").state == "unknown"
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "state.db").write_bytes(b"this is not sqlite at all" * 100)
    assert hs.turn_lease_view(tmp_path / "garbage", "s1").state == "unknown"
    (tmp_path / "dangling").mkdir()
    (tmp_path / "dangling" / "state.db").symlink_to(tmp_path / "nowhere.db")
    assert hs.turn_lease_view(tmp_path / "dangling", "s1").state == "unknown"


def test_public_names_for_the_scanner(tmp_path):
    conn = make_db(tmp_path)
    add_session(conn, "root", end_reason="compression")
    add_session(conn, "child", parent="root")
    assert hs.conversation_root_with(conn, "child") == "root"
    view = hs.judge_lease_row({"holder": "", "expires_at": NOW + 60}, "root", NOW)
    assert view.state == "free"


def test_locked_state_db_answers_unknown_quickly(tmp_path):
    conn = make_db(tmp_path, wal=False)
    add_session(conn, "s1")
    locker = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        view = hs.turn_lease_view(tmp_path, "s1")
        info, problem = hs.lookup_session(tmp_path, "s1")
        elapsed = time.monotonic() - t0
    finally:
        locker.execute("ROLLBACK")
    assert view.state == "unknown" and "locked" in view.detail
    assert info is None and "locked" in problem
    assert elapsed < 2.0
    assert hs.turn_lease_view(tmp_path, "s1").state == "free"


def write_registry(home: Path, doc) -> None:
    (home / "runtime").mkdir(parents=True, exist_ok=True)
    data = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
    (home / "runtime" / "active_sessions.json").write_text(data if isinstance(data, str) else data.decode())


def test_active_session_owner_states(tmp_path, sleeper, dead_pid):
    assert hs.active_session_owner(tmp_path, "s1").state == "none"
    start = process_start_time(sleeper.pid)
    write_registry(tmp_path, {"entries": [
        {"session_id": "s1", "pid": sleeper.pid, "process_start_time": start, "surface": "desktop"},
        {"session_id": "s2", "pid": dead_pid, "process_start_time": 1.0, "surface": "cli"},
        {"session_id": "s3", "pid": sleeper.pid, "process_start_time": start - 100},
        {"session_id": "s4", "pid": "garbage"},
    ]})
    owner = hs.active_session_owner(tmp_path, "s1")
    assert (owner.state, owner.pid, owner.surface) == ("alive", sleeper.pid, "desktop")
    assert hs.active_session_owner(tmp_path, "s2").state == "dead"
    assert hs.active_session_owner(tmp_path, "s3").state == "dead"  # pid recycled
    assert hs.active_session_owner(tmp_path, "s4").state == "unknown"
    assert hs.active_session_owner(tmp_path, "s5").state == "none"


@pytest.mark.parametrize("content", ["{not json", "[1, 2", '"just a string"', '{"entries": 5}'])
def test_corrupt_registry_is_unknown(tmp_path, content):
    write_registry(tmp_path, content)
    assert hs.active_session_owner(tmp_path, "s1").state == "unknown"


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable_registry_is_unknown(tmp_path):
    write_registry(tmp_path, {"entries": []})
    path = tmp_path / "runtime" / "active_sessions.json"
    path.chmod(0)
    assert hs.active_session_owner(tmp_path, "s1").state == "unknown"


def test_session_activity_combines_both(tmp_path, sleeper):
    conn = make_db(tmp_path)
    add_session(conn, "s1")
    add_session(conn, "s2")
    write_registry(tmp_path, {"entries": [{"session_id": "s2", "pid": sleeper.pid, "surface": "tui"}]})
    quiet = hs.session_activity(tmp_path, "s1")
    assert not quiet.running and not quiet.unsure
    busy = hs.session_activity(tmp_path, "s2")
    assert busy.running and str(sleeper.pid) in busy.reason
    add_lease(conn, "s1", holder(sleeper.pid, ns=None), time.time() + 60)
    leased = hs.session_activity(tmp_path, "s1")
    assert leased.running and "turn lease" in leased.reason
    write_registry(tmp_path, "garbage")
    unsure = hs.session_activity(tmp_path, "s2")
    assert unsure.unsure and not unsure.running and "corrupt" in unsure.reason


# ── a continuation's note and its reply (core.continuing.completion reads these) ──────────────────────────

# hermes-agent 0.19.0's own ``messages`` table (hermes_state.SCHEMA_SQL), and the sessions columns used.
HERMES_019_TABLES = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, parent_session_id TEXT,
    started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, message_count INTEGER DEFAULT 0, title TEXT);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    effect_disposition TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
    reasoning TEXT, reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT,
    codex_message_items TEXT, platform_message_id TEXT, observed INTEGER DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
"""
SID = "20261201_081950_325053"
NOTE = "[System note: …]\n\nCreate notes.txt listing the three largest files."


def hermes_db(home: Path, *, wal: bool = True) -> sqlite3.Connection:
    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "state.db", isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(HERMES_019_TABLES)
    conn.execute("INSERT INTO sessions (id, source, started_at) VALUES (?, 'tui', 1)", (SID,))
    return conn


def msg(conn, role, content, *, sid=SID, finish=None, tool_calls=None, api_content=None) -> int:
    cur = conn.execute("INSERT INTO messages (session_id, role, content, timestamp, finish_reason, tool_calls, "
                       "api_content) VALUES (?,?,?,?,?,?,?)", (sid, role, content, time.time(), finish, tool_calls,
                                                                api_content))
    return int(cur.lastrowid)


def seed_turn(conn) -> int:
    """One earlier finished turn, as the real seed leaves it; returns the high-water id."""
    msg(conn, "user", "Create notes.txt listing the three largest files.")
    return msg(conn, "assistant", "Done.", finish="stop")


def test_high_water_is_the_largest_message_id(tmp_path):
    assert hs.message_high_water(tmp_path)[0] is None  # no state.db: nothing to anchor a mark to
    conn = hermes_db(tmp_path)
    assert hs.message_high_water(tmp_path) == (0, None)
    assert hs.message_high_water(tmp_path) == (0, None)
    top = seed_turn(conn)
    assert hs.message_high_water(tmp_path) == (top, None)
    conn.execute("DROP TABLE messages")
    value, problem = hs.message_high_water(tmp_path)
    assert value is None and "messages" in problem


def test_note_and_finished_reply_read_finished(tmp_path):
    conn = hermes_db(tmp_path)
    after = seed_turn(conn)
    state, why = hs.note_state(tmp_path, SID, NOTE, after)
    assert state == "absent" and "not in state.db" in why
    note_id = msg(conn, "user", NOTE)  # Hermes persists the user message when the turn starts
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "pending"
    # Mid-turn flushes: a tool round is not an end, nor is a truncated reply.
    msg(conn, "assistant", "", tool_calls='[{"name": "terminal", "arguments": "{}"}]', finish="tool_calls")
    msg(conn, "tool", "notes.txt written")
    msg(conn, "assistant", "partial", finish="length")
    state, why = hs.note_state(tmp_path, SID, NOTE, after)
    assert state == "pending" and f"message {note_id}" in why
    reply = msg(conn, "assistant", "Done: notes.txt lists them.", finish="stop")
    state, why = hs.note_state(tmp_path, SID, NOTE, after)
    assert state == "finished" and f"message {reply}" in why


def test_an_older_answered_note_before_the_mark_does_not_count(tmp_path):
    # Attempt 1 sent the same note and was answered; attempt 2 (mark taken after it) has not been.
    conn = hermes_db(tmp_path)
    seed_turn(conn)
    msg(conn, "user", NOTE)
    after = msg(conn, "assistant", "first continuation", finish="stop")
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "absent"
    msg(conn, "user", NOTE)
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "pending"
    msg(conn, "assistant", "second", finish="stop")
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "finished"


def test_another_sessions_reply_or_another_text_does_not_count(tmp_path):
    conn = hermes_db(tmp_path)
    after = seed_turn(conn)
    conn.execute("INSERT INTO sessions (id, source, started_at) VALUES ('other', 'tui', 2)")
    msg(conn, "user", NOTE, sid="other")
    msg(conn, "assistant", "done elsewhere", sid="other", finish="stop")
    msg(conn, "user", NOTE + " (edited)")
    msg(conn, "assistant", "done", finish="stop")
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "absent"


def test_note_kept_as_sent_bytes_and_a_reply_in_the_compressed_child_count(tmp_path):
    # Hermes may store a cleaned transcript value in content and the bytes sent in api_content; a
    # compression mid-turn ends the session ('compression') and goes on in a child.
    conn = hermes_db(tmp_path)
    after = seed_turn(conn)
    msg(conn, "user", "cleaned", api_content=NOTE)
    conn.execute("UPDATE sessions SET end_reason = 'compression' WHERE id = ?", (SID,))
    conn.execute("INSERT INTO sessions (id, source, parent_session_id, started_at) VALUES ('tip', 'tui', ?, 3)",
                 (SID,))
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "pending"
    msg(conn, "assistant", "Done after compression.", sid="tip", finish="stop")
    assert hs.note_state(tmp_path, SID, NOTE, after)[0] == "finished"


def test_no_state_db_an_old_schema_or_a_lock_is_unknown_never_finished(tmp_path):
    assert hs.note_state(tmp_path / "nohome", SID, NOTE, 0)[0] == "unknown"
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / "state.db", isolation_level=None)
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT)")
    state, why = hs.note_state(old, SID, NOTE, 0)
    assert state == "unknown" and "finish_reason" in why
    locked = tmp_path / "locked"
    lconn = hermes_db(locked, wal=False)
    after = seed_turn(lconn)
    msg(lconn, "user", NOTE)
    msg(lconn, "assistant", "Done.", finish="stop")
    lconn.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        state, why = hs.note_state(locked, SID, NOTE, after, busy_timeout=0.3)
        assert state == "unknown" and "locked" in why and time.monotonic() - t0 < 3
    finally:
        lconn.execute("ROLLBACK")
    assert hs.note_state(locked, SID, NOTE, after)[0] == "finished"


def test_a_settled_continuation_is_journalled_completed_and_its_marker_retired(tmp_path):
    from hermes_tray_core.continuing.completion import ContinuationMark, settle_if_finished
    from hermes_tray_core.hermes.note import continuation_note
    from hermes_tray_core.markers.entries import build_entry
    from hermes_tray_core.markers.store import MarkerStore
    from hermes_tray_core.turn import Turn
    from tests.support import book
    from tests.support.sim_homes import dead_identity

    prompt = "Create notes.txt listing the three largest files."
    home = tmp_path / "home"
    conn = hermes_db(home)
    after = seed_turn(conn)
    mark = ContinuationMark.for_note(SID, after, continuation_note(prompt))
    entry = {**build_entry(prompt, attempts=1, writer=dead_identity()), **mark.fields()}
    store = MarkerStore(home)
    store.record(SID, prompt)
    assert store.replace_if_unchanged(SID, store.list()[SID], entry)
    entry = store.list()[SID]
    msg(conn, "user", continuation_note(prompt))
    assert settle_if_finished(Turn.of(home, SID, entry)) is None  # running, or killed mid-turn: not settled
    assert store.list()[SID] == entry
    # A Hermes marker (no mark) is never settled this way, whatever state.db holds.
    plain = {k: v for k, v in entry.items() if not k.startswith("tray_")}
    msg(conn, "assistant", "Done: notes.txt lists them.", finish="stop")
    assert settle_if_finished(Turn.of(home, SID, plain)) is None
    # state.db gone (moved away, a restore in progress): whether it finished cannot be told.
    (home / "state.db").rename(home / "state.db.away")
    unsure = settle_if_finished(Turn.of(home, SID, entry))
    assert unsure is not None and not unsure.finished and unsure.state == "unknown"
    assert store.list()[SID] == entry and book.events(home, SID, entry["started_at"]) == []
    (home / "state.db.away").rename(home / "state.db")
    # A mark whose digest does not match the marker's prompt is left alone.
    assert settle_if_finished(Turn.of(home, SID, {**entry, "prompt": prompt + "!"})) is None
    settled = settle_if_finished(Turn.of(home, SID, entry))
    assert settled is not None and settled.finished and settled.retired and "reply" in settled.reason
    assert SID not in store.list()
    events = book.events(home, SID, entry["started_at"])
    assert events == ["completed"]
    # A second reader finding the same (already retired) entry journals nothing more.
    assert settle_if_finished(Turn.of(home, SID, entry)) is not None
    assert book.events(home, SID, entry["started_at"]) == ["completed"]
