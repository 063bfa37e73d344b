"""One read-only look at a home's ``state.db`` for all its markers at once (titles, sources, turn leases,
compression roots, how far each turn got): one connection and one query per table, never one per key; also the
helpers :mod:`core.hermes.state_db` shares (the scanner loads this one at start-up, that one only when
needed).

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
from typing import TYPE_CHECKING, Any

from hermes_tray_core.hermes import paths as hermes_paths

if TYPE_CHECKING:  # sqlite3 is imported when a state.db is opened, not with this module
    import sqlite3

    from hermes_tray_core.hermes.progress import TurnProgress

__all__ = ["BUSY_TIMEOUT_S", "HOLD_S", "HomeState", "columns", "describe_error", "session_rows", "text_or_none"]

BUSY_TIMEOUT_S = 0.2
#: Seconds one statement walking a session's messages may hold ``state.db`` before it lets go (Hermes' commits
#: wait for it in rollback-journal mode): tests/bench/bench_statedb_hold.py measures what they wait.
HOLD_S = 0.005
_BATCH = 64  # rows fetched between two looks at the clock
_RETRIES = 3  # statements of one walk tried again after a busy timeout


class HomeState:
    """Batched, because ``status`` must stay fast with 32 markers in each of several homes; lease rows and
    chains are judged by :mod:`core.hermes.state_db`'s rules, loaded only when there is one to judge."""

    def __init__(self, home: Path, now: float) -> None:
        self.home = home
        self.now = now
        self.problem: str | None = None
        self.status = "ok"
        self._conn: Any = None
        self._scols: set[str] = set()
        self._lcols: set[str] = set()
        self._sessions: dict[str, tuple[str | None, str | None, str | None]] = {}  # title, source, parent
        self._generations: dict[str, int] = {}  # sessions.conversation_generation, where the schema has it
        self._derived: set[str] = set()  # sessions whose title Hermes derived from the prompt (title_source)
        self._leases: dict[str, dict[str, object]] = {}
        self._roots: dict[str, str] = {}
        self._compressed: set[str] = set()  # sessions compression closed: their turn went on elsewhere
        self._progress: dict[str, TurnProgress] = {}
        self._lease_error: str | None = None
        self._session_error: str | None = None
        path = str(hermes_paths.state_db(Path(home)))
        if not os.path.isfile(path):
            try:
                os.lstat(path)
            except FileNotFoundError:
                self.status = "missing"
                self.problem = f"no state.db in {home}"
                return
            except OSError as exc:
                self.status, self.problem = "unreadable", f"cannot look for state.db ({exc.strerror or exc})"
                return
            self.status, self.problem = "unreadable", f"{path} is not a file"
            return
        try:
            import sqlite3

            uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._conn = conn
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA query_only = 1")
            self._scols = columns(conn, "sessions")
            self._lcols = columns(conn, "session_turn_leases")
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
        keys = list(keys)
        try:
            wanted: list[str] = [c for c in ("id", "title", "source", "parent_session_id", "end_reason",
                                             "conversation_generation", "title_source") if c in self._scols]
            if "id" in wanted:
                for chunk in _chunks(keys):
                    sql = f"SELECT {', '.join(wanted)} FROM sessions WHERE id IN ({','.join('?' * len(chunk))})"
                    for row in conn.execute(sql, chunk):
                        v = dict(zip(wanted, row, strict=True))
                        self._sessions[str(v["id"])] = (text_or_none(v.get("title")),
                                                        text_or_none(v.get("source")),
                                                        text_or_none(v.get("parent_session_id")) or None)
                        if v.get("end_reason") == "compression":
                            self._compressed.add(str(v["id"]))
                        gen = v.get("conversation_generation")
                        if isinstance(gen, int) and not isinstance(gen, bool):
                            self._generations[str(v["id"])] = gen
                        if v.get("title_source") == "derived":
                            self._derived.add(str(v["id"]))
        except db_errors() as exc:
            self._sessions = {}
            self._session_error = describe_error(exc)
        if since:
            self._prefetch_progress(conn, since)
        cols = self._lcols
        if not cols or not {"conversation_id", "holder", "expires_at"} <= cols:
            return
        try:
            parents = [k for k in keys if (self._sessions.get(k) or (None, None, None))[2]]
            if parents:
                from hermes_tray_core.hermes import state_db as hs

                for key in parents:
                    self._roots[key] = hs.conversation_root_with(conn, key)
            cids = list(dict.fromkeys(keys + list(self._roots.values())))
            wanted = ["conversation_id"] + [c for c in ("holder", "expires_at", "owner_pid", "owner_pid_start")
                                            if c in cols]
            for chunk in _chunks(cids):
                sql = (f"SELECT {', '.join(wanted)} FROM session_turn_leases "
                       f"WHERE conversation_id IN ({','.join('?' * len(chunk))})")
                for row in conn.execute(sql, chunk):
                    v = dict(zip(wanted, row, strict=True))
                    self._leases[str(v.pop("conversation_id"))] = v
        except db_errors() as exc:
            self._lease_error = describe_error(exc)

    def _prefetch_progress(self, conn: sqlite3.Connection, since: Mapping[str, float]) -> None:
        try:
            from hermes_tray_core.hermes.progress import read_progress

            turns = [(k, t) for k, t in since.items() if k not in self._compressed]
            self._progress = read_progress(conn, turns, columns(conn, "messages"))
        except Exception:  # boundary: reading what Hermes wrote in its messages, where anything can be
            self._progress = {}

    def progress(self, key: str) -> TurnProgress | None:
        return self._progress.get(key)

    def session(self, key: str) -> tuple[tuple[str | None, str | None, str | None] | None, str | None]:
        if self._conn is None:
            return None, self.problem
        return self._sessions.get(key), self._session_error

    def generation(self, key: str) -> int | None:
        return self._generations.get(key)

    def title_from_prompt(self, key: str) -> bool:
        """Hermes 0.22 titles a session from its prompt (``title_source = 'derived'``) until a model or the
        user names it: such a title is hidden wherever the prompt is."""
        return key in self._derived

    def lease(self, key: str) -> tuple[str, str]:
        if self._conn is None:
            if self.status == "missing":
                return "free", "no state.db, so no Hermes turn lease"
            return "unknown", self.problem or "state.db unavailable"
        cols = self._lcols
        if not cols:
            return "free", "this Hermes keeps no turn leases"
        if not {"conversation_id", "holder", "expires_at"} <= cols:
            return "unknown", "session_turn_leases has an unexpected schema"
        if self._lease_error:
            return "unknown", self._lease_error
        root = self._roots.get(key, key)
        best = None
        try:
            for cid in dict.fromkeys((root, key)):
                row = self._leases.get(cid)
                if row is None:
                    continue
                from hermes_tray_core.hermes import state_db as hs

                view = hs.judge_lease_row(dict(row), cid, self.now, home=self.home)
                if view.state == "live":
                    return view.state, view.detail
                best = best or (view.state, view.detail)
        except Exception as exc:  # boundary: judging a lease row Hermes wrote, where anything can be
            return "unknown", f"cannot judge the turn lease ({exc})"
        return best or ("free", "no turn lease")


def db_errors() -> tuple[type[Exception], ...]:
    """What reading ``state.db`` can raise (MemoryError: SQLite on a hostile file)."""
    import sqlite3

    return (sqlite3.Error, MemoryError, OSError, ValueError)


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def text_or_none(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


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


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def describe_error(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "locked" in text or "busy" in text:
        return f"state.db is locked ({text})"
    return f"state.db is unreadable ({text})"
