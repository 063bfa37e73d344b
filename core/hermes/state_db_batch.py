"""One read-only look at a home's ``state.db`` for all its markers at once (titles, sources, turn leases,
compression roots, how far each turn got): one connection and one query per table, never one per key. The
single-session reads of :mod:`core.hermes.state_db` are this look at one key (the scanner loads this module at
start-up, that one only when needed).

Reading never holds up Hermes: Hermes 0.22 on SQLite before 3.51.3 keeps ``state.db`` in rollback-journal
mode, where a reader's lock makes its commits wait, so a session's messages are walked by :func:`session_rows`
in statements of at most :data:`HOLD_S` each.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from hermes_tray_core.hermes import paths as hermes_paths

if TYPE_CHECKING:  # sqlite3 is imported when a state.db is opened, not with this module
    import sqlite3

    from hermes_tray_core.hermes.progress import TurnProgress

__all__ = ["BUSY_TIMEOUT_S", "HOLD_S", "HomeState", "LeaseView", "MAX_ROOT_DEPTH", "SessionInfo", "columns",
           "connect_ro", "conversation_root_with", "describe_error", "rows_in", "session_rows", "text_or_none"]

LeaseState = Literal["live", "free", "unknown"]
BUSY_TIMEOUT_S = 0.2
MAX_ROOT_DEPTH = 256
#: Seconds one statement walking a session's messages may hold ``state.db`` before it lets go (Hermes' commits
#: wait for it in rollback-journal mode): tests/bench/bench_statedb_hold.py measures what they wait.
HOLD_S = 0.005
_BATCH = 64  # rows fetched between two looks at the clock
_RETRIES = 3  # statements of one walk tried again after a busy timeout


class SessionInfo(NamedTuple):
    """One ``sessions`` row; a column the schema lacks reads as None."""

    id: str
    title: str | None = None
    source: str | None = None
    parent_session_id: str | None = None
    end_reason: str | None = None
    conversation_generation: int | None = None  # newer Hermes: raised by a chat clear
    title_source: str | None = None


class LeaseView(NamedTuple):
    """What Hermes' turn lease says about a session."""

    state: LeaseState
    detail: str = ""
    holder: str | None = None
    expires_at: float | None = None
    conversation_id: str | None = None
    pid: int | None = None


class HomeState:
    """Batched, because ``status`` must stay fast with 32 markers in each of several homes; lease rows are
    judged by :mod:`core.hermes.state_db`'s rules, loaded only when there is one to judge. ``status``:
    ``ok`` / ``missing`` / ``unreadable``."""

    def __init__(self, home: Path, now: float) -> None:
        self.home = home
        self.now = now
        self._scols: set[str] = set()
        self._lcols: set[str] = set()
        self._sessions: dict[str, SessionInfo] = {}
        self._leases: dict[str, dict[str, object]] = {}
        self._roots: dict[str, str] = {}
        self._progress: dict[str, TurnProgress] = {}
        self._lease_error: str | None = None
        self._session_error: str | None = None
        self._conn, self.status, self.problem = connect_ro(home)
        if self._conn is None:
            return
        try:
            self._scols = columns(self._conn, "sessions")
            self._lcols = columns(self._conn, "session_turn_leases")
        except db_errors() as exc:
            self.status, self.problem = "unreadable", describe_error(exc)
            self.close()

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(*db_errors()):
                self._conn.close()
            self._conn = None

    def has_table(self, name: str) -> bool | None:
        if self._conn is None:
            return None
        try:
            row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
            return row is not None
        except db_errors():
            return None

    def prefetch(self, keys: Sequence[str], since: Mapping[str, float] | None = None) -> None:
        """Read the session and lease rows of ``keys`` (and their roots) at once; with ``since`` (key -> its
        marker's ``started_at``), how far each turn got."""
        if self._conn is None or not keys:
            return
        conn = self._conn
        try:
            wanted = [c for c in SessionInfo._fields if c in self._scols]
            if "id" in wanted:
                for info in map(_session_info, rows_in(conn, "sessions", wanted, "id", keys)):
                    self._sessions[info.id] = info
        except db_errors() as exc:
            self._sessions = {}
            self._session_error = describe_error(exc)
        if since:
            self._prefetch_progress(conn, since)
        cols = self._lcols
        if not {"conversation_id", "holder", "expires_at"} <= cols:
            return
        try:
            for key in keys:
                if (child := self._sessions.get(key)) is not None and child.parent_session_id:
                    self._roots[key] = conversation_root_with(conn, key)
            cids = list(dict.fromkeys([*keys, *self._roots.values()]))
            wanted = ["conversation_id"] + [c for c in ("holder", "expires_at", "owner_pid", "owner_pid_start")
                                            if c in cols]
            for v in rows_in(conn, "session_turn_leases", wanted, "conversation_id", cids):
                self._leases[str(v.pop("conversation_id"))] = v
        except db_errors() as exc:
            self._lease_error = describe_error(exc)

    def _prefetch_progress(self, conn: sqlite3.Connection, since: Mapping[str, float]) -> None:
        try:
            from hermes_tray_core.hermes.progress import read_progress

            turns = [(k, t) for k, t in since.items()
                     if (info := self._sessions.get(k)) is None or info.end_reason != "compression"]
            self._progress = read_progress(conn, turns, columns(conn, "messages"))
        except Exception:  # boundary: reading what Hermes wrote in its messages, where anything can be
            self._progress = {}

    def progress(self, key: str) -> TurnProgress | None:
        return self._progress.get(key)

    def session(self, key: str) -> tuple[SessionInfo | None, str | None]:
        """``(info, None)``, ``(None, None)`` for no such session, or ``(None, problem)`` when unreadable."""
        if self.status != "ok":
            return None, self.problem
        return self._sessions.get(key), self._session_error

    def title_from_prompt(self, key: str) -> bool:
        """Hermes 0.22 titles a session from its prompt (``title_source = 'derived'``) until a model or the
        user names it: such a title is hidden wherever the prompt is."""
        info = self._sessions.get(key)
        return info is not None and info.title_source == "derived"

    def lease(self, key: str) -> LeaseView:
        """Does a Hermes turn hold ``key``'s conversation's lease? The root's row, and the session's own (an
        older backend keyed it so); a schema without the table holds no lease."""
        if self.status == "missing":
            return LeaseView("free", "no state.db, so no Hermes turn lease")
        if self.status != "ok":
            return LeaseView("unknown", self.problem or "state.db unavailable")
        if not self._lcols:
            return LeaseView("free", "this Hermes keeps no turn leases")
        if not {"conversation_id", "holder", "expires_at"} <= self._lcols:
            return LeaseView("unknown", "session_turn_leases has an unexpected schema")
        if self._lease_error:
            return LeaseView("unknown", self._lease_error)
        root = self._roots.get(key, key)
        best = None
        try:
            for cid in dict.fromkeys((root, key)):
                row = self._leases.get(cid)
                if row is None:
                    continue
                from hermes_tray_core.hermes.state_db import judge_lease_row

                view = judge_lease_row(row, cid, self.now, home=self.home)
                if view.state == "live":
                    return view
                best = best or view
        except Exception as exc:  # boundary: judging a lease row Hermes wrote, where anything can be
            return LeaseView("unknown", f"cannot judge the turn lease ({exc})")
        return best or LeaseView("free", "no turn lease", conversation_id=root)


def _session_info(v: Mapping[str, object]) -> SessionInfo:
    gen = v.get("conversation_generation")
    return SessionInfo(str(v["id"]), text_or_none(v.get("title")), text_or_none(v.get("source")),
                       text_or_none(v.get("parent_session_id")) or None, text_or_none(v.get("end_reason")),
                       gen if isinstance(gen, int) and not isinstance(gen, bool) else None,
                       text_or_none(v.get("title_source")))


def connect_ro(home: Path | str, busy_timeout: float = BUSY_TIMEOUT_S) -> tuple[Any, str, str | None]:
    """Open ``<home>/state.db`` read-only: ``(conn, "ok", None)``, else ``(None, "missing" | "unreadable",
    problem)``."""
    path = hermes_paths.state_db(Path(home))
    if not os.path.isfile(path):
        try:
            os.lstat(path)
        except FileNotFoundError:
            return None, "missing", f"no state.db in {home}"
        except OSError as exc:
            return None, "unreadable", f"cannot look for state.db ({exc.strerror or exc})"
        return None, "unreadable", f"{path} is not a file"
    conn = None
    try:
        import sqlite3

        uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA query_only = 1")
        return conn, "ok", None
    except db_errors() as exc:
        if conn is not None:
            conn.close()
        return None, "unreadable", describe_error(exc)


def conversation_root_with(conn: sqlite3.Connection, session_id: str) -> str:
    """The id Hermes keys the turn lease by: ``parent_session_id`` followed while the parent ended by
    compression (may raise ``sqlite3.Error``)."""
    if not {"id", "parent_session_id", "end_reason"} <= columns(conn, "sessions"):
        return session_id
    current, seen = session_id, {session_id}
    for _ in range(MAX_ROOT_DEPTH):
        row = conn.execute("SELECT p.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id "
                           "WHERE c.id = ? AND p.end_reason = 'compression'", (current,)).fetchone()
        if row is None or str(row[0]) in seen:
            break
        current = str(row[0])
        seen.add(current)
    return current


def db_errors() -> tuple[type[Exception], ...]:
    """What reading ``state.db`` can raise (MemoryError: SQLite on a hostile file)."""
    import sqlite3

    return (sqlite3.Error, MemoryError, OSError, ValueError)


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def session_rows(conn: sqlite3.Connection, session_id: str, since: object, values: str, *,
                 value_args: Sequence[object] = (), where: str = "",
                 args: Sequence[object] = ()) -> Iterator[tuple[Any, ...]]:
    """``(id, timestamp, *values)`` of ``session_id``'s messages stamped at or after ``since``, in the order
    of Hermes' index on ``(session_id, timestamp)``, then ``id``. ``values``: SQL computed in SQLite (a long
    text need not leave it); ``where``: further `` AND …`` conditions. Statements stop after about
    :data:`HOLD_S`, letting go of ``state.db``, and their rows are handed on only then; one that met a busy
    timeout is tried again (up to :data:`_RETRIES` a walk)."""
    import sqlite3

    head = f"SELECT id, timestamp, {values} FROM messages WHERE session_id = ? AND timestamp >= ?"
    sql, params = f"{head}{where} ORDER BY timestamp, id", [*value_args, session_id, since, *args]
    retries = _RETRIES
    while True:
        rows: list[tuple[Any, ...]] = []
        try:
            cur = conn.execute(sql, params)
        except sqlite3.OperationalError as exc:  # the lock is taken as a statement starts, or never
            if retries <= 0 or not ("locked" in str(exc) or "busy" in str(exc)):
                raise
            retries -= 1
            continue
        try:
            start = time.monotonic()
            while batch := cur.fetchmany(_BATCH):
                rows += batch
                if time.monotonic() - start >= HOLD_S:
                    break
        finally:
            cur.close()
        yield from rows
        if not batch:  # the statement ran to its end
            return
        rid, ts = rows[-1][0], rows[-1][1]
        sql = f"{head} AND (timestamp > ? OR id > ?){where} ORDER BY timestamp, id"
        params = [*value_args, session_id, ts, ts, rid, *args]


def rows_in(conn: sqlite3.Connection, table: str, wanted: list[str], column: str,
            keys: Sequence[object]) -> Iterator[dict[str, Any]]:
    """``wanted`` of each row whose ``column`` is one of ``keys``, 500 keys a statement (well under SQLite's
    limit of bound values)."""
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        sql = f"SELECT {', '.join(wanted)} FROM {table} WHERE {column} IN ({','.join('?' * len(chunk))})"
        for row in conn.execute(sql, chunk):
            yield dict(zip(wanted, row, strict=True))


def describe_error(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "locked" in text or "busy" in text:
        return f"state.db is locked ({text})"
    return f"state.db is unreadable ({text})"
