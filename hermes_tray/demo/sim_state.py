"""The simulated backend's own ``state.db``, a small subset of Hermes' schema that it owns as Hermes owns a real
one: sessions, their messages and the session turn lease (the newer schema: ``epoch``/``owner_pid``/
``owner_pid_start``, released by ``holder = ''``). The tray only ever reads such a file.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path

from hermes_tray_core import own_identity, own_pidns

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    title TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    cwd TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    timestamp REAL NOT NULL,
    finish_reason TEXT
);
CREATE TABLE IF NOT EXISTS session_turn_leases (
    conversation_id TEXT PRIMARY KEY,
    holder TEXT,
    acquired_at REAL,
    expires_at REAL,
    epoch INTEGER NOT NULL DEFAULT 0,
    owner_pid INTEGER,
    owner_pid_start REAL
);
"""

LEASE_TTL = 60.0  # shorter than Hermes' 300 s so a demo recovers quickly even across pid namespaces


def connect(home: Path | str) -> sqlite3.Connection:
    """Open (creating, 0600) the demo home's ``state.db`` in WAL mode with the schema in place."""
    path = Path(home) / "state.db"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


def new_session_id() -> str:
    """A Hermes-style stored session id: ``YYYYmmdd_HHMMSS_<6 hex>``."""
    return time.strftime("%Y%m%d_%H%M%S") + "_" + uuid.uuid4().hex[:6]


def create_session(home: Path | str, *, title: str | None = None, source: str = "tui",
                   session_id: str | None = None) -> str:
    sid = session_id or new_session_id()
    with closing(connect(home)) as conn:
        conn.execute("INSERT OR IGNORE INTO sessions (id, source, title, started_at) VALUES (?, ?, ?, ?)",
                     (sid, source, title, time.time()))
    return sid


def session_exists(home: Path | str, sid: str) -> bool:
    with closing(connect(home)) as conn:
        return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is not None


def messages(home: Path | str, sid: str) -> list[tuple[str, str]]:
    with closing(connect(home)) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (sid,))]


def append_message(home: Path | str, sid: str, role: str, content: str, finish_reason: str | None = None) -> None:
    """One ``messages`` row as Hermes writes it (a finished reply has ``finish_reason`` ``stop``)."""
    with closing(connect(home)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO messages (session_id, role, content, timestamp, finish_reason) VALUES (?, ?, ?, ?, ?)",
                     (sid, role, content, time.time(), finish_reason))
        conn.execute("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", (sid,))
        conn.execute("COMMIT")


def holder_string(turn: str) -> str:
    """Hermes' holder format, naming our pid namespace so the tray can judge the pid."""
    ns = own_pidns()
    parts = [f"pid={os.getpid()}"] + ([f"pidns={ns}"] if ns is not None else []) + [f"turn={turn}",
                                                                                     "platform=sim"]
    return ":".join(parts)


def acquire_turn_lease(home: Path | str, sid: str, turn: str, ttl: float = LEASE_TTL) -> str | None:
    """Take the session's turn lease if free (as Hermes would); returns the holder or None."""
    me = own_identity()
    holder = holder_string(turn)
    now = time.time()
    with closing(connect(home)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT holder, expires_at, epoch FROM session_turn_leases WHERE conversation_id = ?",
                           (sid,)).fetchone()
        if row is not None and row[0] and (row[1] or 0) > now and not _holder_dead(row[0]):
            conn.execute("ROLLBACK")
            return None
        epoch = (row[2] if row else 0) + 1
        conn.execute(
            "INSERT OR REPLACE INTO session_turn_leases (conversation_id, holder, acquired_at, expires_at, epoch,"
            " owner_pid, owner_pid_start) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, holder, now, now + ttl, epoch, me.pid, me.start_time))
        conn.execute("COMMIT")
        return holder


def _holder_dead(holder: str) -> bool:
    from hermes_tray_core import parse_holder, process_liveness

    pid, ns = parse_holder(holder)
    return pid is not None and ns is not None and ns == own_pidns() and process_liveness(pid) == "dead"


def refresh_turn_lease(home: Path | str, sid: str, holder: str, ttl: float = LEASE_TTL) -> bool:
    with closing(connect(home)) as conn:
        cur = conn.execute("UPDATE session_turn_leases SET expires_at = ? WHERE conversation_id = ? AND holder = ?",
                           (time.time() + ttl, sid, holder))
        return cur.rowcount == 1


def release_turn_lease(home: Path | str, sid: str, holder: str) -> None:
    with closing(connect(home)) as conn:
        conn.execute("UPDATE session_turn_leases SET holder = '', expires_at = ? WHERE conversation_id = ? "
                     "AND holder = ?", (time.time(), sid, holder))
