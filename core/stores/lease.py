"""Cross-process leases with expiry and fencing epochs, in SQLite: one of our processes acts on a turn.

Each operation is one short ``BEGIN IMMEDIATE`` transaction. ``epoch`` grows with every acquire of a name (the
same holder after a release too) and survives release, so a late actor is told apart. A lease is free with no
holder, once expired, or when its holder *process* is gone: the row keeps the acquirer's pid, create time,
start mark (:mod:`core.process.start_mark`: a wall-clock step never ends a live holder; a row without one is
judged by create time within 1 ms) and pid namespace (a holder in another one keeps it until it expires). WAL,
``synchronous=FULL``: a granted epoch survives power loss, and a store recreated in place of a corrupt one
grants epochs above a floor of milliseconds since the epoch, above any the lost store can have granted (one
per acquire, each over a millisecond).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hermes_tray_core.numbers import as_float
from hermes_tray_core.process.identity import own_identity, own_pidns, process_liveness
from hermes_tray_core.process.start_mark import mark_pid
from hermes_tray_core.stores import fsutil
from hermes_tray_core.vocab import WriterState

__all__ = ["BUSY_TIMEOUT_S", "CORRUPT_SUFFIX", "Lease", "LeaseKeeper", "LeaseStore", "SCHEMA_VERSION",
    "STORE_ERRORS", "shared"]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY, holder TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL DEFAULT 0, acquired_at REAL,
    expires_at REAL, owner_pid INTEGER, owner_start REAL, owner_ns INTEGER, owner_mark TEXT)
"""
# Schema 3: ``owner_mark``, the holder's clock-proof start mark (core.process.start_mark).
_MARK_COLUMN = "ALTER TABLE leases ADD COLUMN owner_mark TEXT"
# Schema 2: ``epoch_floor``, above which a store made in place of a corrupt one grants its epochs.
_META_SCHEMA = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
CORRUPT_SUFFIX = "corrupt"

# A ``leases`` row as SQLite returns it: (holder, epoch, expires_at, owner_pid, owner_start, owner_ns, owner_mark);
# the column values are whatever the file holds, so each use checks its own.
_Row = tuple[Any, ...]
_SELECT_ROW = ("SELECT holder, epoch, expires_at, owner_pid, owner_start, owner_ns, owner_mark FROM leases"
               " WHERE name = ?")
_T = TypeVar("_T")


@dataclass
class Lease:
    """A granted lease; ``epoch`` fences every later refresh and release."""

    name: str
    holder: str
    epoch: int
    expires_at: float


class LeaseStore:
    """Leases in one SQLite file (``core.stores.paths.ledger_db()`` for the tray, where the ledger keeps its tables
    too: :mod:`core.stores.ledger`). Thread-safe; a forked child opens its own connection on first use."""

    def __init__(self, path: Path | str, *, busy_timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._conn_pid = 0
        self._inherited: list[sqlite3.Connection] = []
        self._prepare_file()
        with self._lock:
            self._connection()

    # -- setup ---------------------------------------------------------------------------------

    def _prepare_file(self) -> None:
        """Create the database 0600 in a 0700 dir before SQLite does (its -wal/-shm copy the mode)."""
        fsutil.ensure_private_dir(self.path.parent)
        os.close(fsutil.open_private_lockfile(self.path))
        for suffix in ("-wal", "-shm"):
            fsutil.refuse_symlink(self.path.with_name(self.path.name + suffix))

    def _connection(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) or not _looks_corrupt(exc):
                raise
        # Garbage where the store should be: keep it, start a fresh one (nobody proceeds without a lease).
        log.error("lease store %s is corrupt; set aside and recreated", self.path)
        for suffix in ("-wal", "-shm", ""):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                fsutil.set_aside(side, CORRUPT_SUFFIX)
        self._prepare_file()
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        pid = os.getpid()
        if self._conn is not None and self._conn_pid == pid:
            return self._conn
        if self._conn is not None:
            # Inherited across fork: never used here, kept so that its collection does not close the parent's.
            self._inherited.append(self._conn)
            self._conn = None
        conn = sqlite3.connect(str(self.path), timeout=self._busy_timeout, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            if self._journal_mode_wal(conn).lower() != "wal":
                log.warning("lease store %s: WAL unavailable, using the rollback journal", self.path)
            conn.execute("PRAGMA synchronous = FULL")
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    fresh = conn.execute("PRAGMA user_version").fetchone()[0] == 0
                    conn.execute(_SCHEMA)
                    conn.execute(_META_SCHEMA)
                    if "owner_mark" not in {r[1] for r in conn.execute("PRAGMA table_info(leases)")}:
                        conn.execute(_MARK_COLUMN)
                    if fresh and self._replaces_a_lost_store():
                        # in the transaction that makes the schema: no epoch of the new store is below it
                        floor = int(time.time() * 1000)
                        log.warning("lease store %s replaces a corrupt one: epochs continue above %d",
                                    self.path, floor)
                        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('epoch_floor', ?)",
                                     (floor,))
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        except BaseException:
            conn.close()
            raise
        self._conn, self._conn_pid = conn, pid
        return conn

    def _journal_mode_wal(self, conn: sqlite3.Connection) -> str:
        """Switch a new store to WAL, again until the busy timeout: processes opening a new store together
        all fail but one at once ("database is locked", no busy wait); once the file is WAL it only reads."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if time.monotonic() >= deadline or "locked" not in str(exc):
                    raise
            time.sleep(0.01)

    def _replaces_a_lost_store(self) -> bool:
        """A store set aside as corrupt lies beside this (new) one: its granted epochs are unknown."""
        try:
            return any(self.path.parent.glob(f"{self.path.name}.{CORRUPT_SUFFIX}-*"))
        except OSError:
            return True  # cannot tell: floor the epochs anyway (harmless, they only grow)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._conn_pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> LeaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions --------------------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` in one ``BEGIN IMMEDIATE`` transaction."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    @staticmethod
    def _holder_gone(pid: object, start: object, ns: object, mark: object = None) -> bool:
        """True only when the recorded owner is provably dead (or its pid recycled)."""
        if not isinstance(pid, int) or pid <= 0:
            return False
        ours = own_pidns()
        if ns is not None and ns != ours:
            return False  # another pid namespace: its pid means nothing here
        if isinstance(mark, str) and mark_pid(mark) == pid:
            return process_liveness(pid, start, mark=mark) == WriterState.DEAD
        # No mark of this pid: a row an older tray wrote (or updated) — its create time, within 1 ms.
        if pid == os.getpid():
            mine = own_identity().start_time
            recorded = as_float(start)
            return recorded is not None and mine is not None and abs(recorded - mine) >= 0.001
        return process_liveness(pid, start if isinstance(start, (int, float)) else None) == WriterState.DEAD

    def _free(self, row: _Row | None, now: float) -> bool:
        if row is None:
            return True
        holder, _epoch, expires_at, pid, start, ns, mark = row
        if not holder or expires_at is None or expires_at <= now:
            return True
        return self._holder_gone(pid, start, ns, mark)

    def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` outside a write transaction (a WAL reader never waits for a writer)."""
        with self._lock:
            return fn(self._connection())

    def _peek(self, name: str) -> _Row | None:
        row: _Row | None = self.read(lambda conn: conn.execute(_SELECT_ROW, (name,)).fetchone())
        return row

    def _try_acquire(self, name: str, holder: str, ttl: float,
                     then: Callable[[sqlite3.Connection, Lease], None] | None = None) -> Lease | None:
        # Look first without the write lock: a waiter never contends with the holder or the other waiters.
        row = self._peek(name)
        if row is not None and not self._free(row, time.time()):
            return None
        me = own_identity()
        ns = own_pidns()

        def txn(conn: sqlite3.Connection) -> Lease | None:
            row = conn.execute(_SELECT_ROW, (name,)).fetchone()
            now = time.time()
            if not self._free(row, now):
                return None
            floor = conn.execute("SELECT value FROM meta WHERE key = 'epoch_floor'").fetchone()
            epoch = max(row[1] if row else 0, floor[0] if floor else 0) + 1
            expires = now + ttl
            conn.execute("INSERT OR REPLACE INTO leases (name, holder, epoch, acquired_at, expires_at, owner_pid,"
                         " owner_start, owner_ns, owner_mark) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (name, holder, epoch, now, expires, me.pid, me.start_time, ns, me.mark))
            lease = Lease(name, holder, epoch, expires)
            if then is not None:
                then(conn, lease)
            return lease

        return self.write(txn)

    # -- API -----------------------------------------------------------------------------------

    def acquire(self, name: str, holder: str, *, ttl: float, wait: float = 0.0, poll: float = 0.05,
                then: Callable[[sqlite3.Connection, Lease], None] | None = None) -> Lease | None:
        """Take ``name`` for ``holder`` for ``ttl`` seconds, waiting up to ``wait``; None when the wait ran
        out. ``then(connection, lease)`` commits with the lease (the ledger's run with its claim)."""
        if not name or not isinstance(name, str):
            raise ValueError("lease name must be a non-empty string")
        if not holder or not isinstance(holder, str):
            raise ValueError("lease holder must be a non-empty string")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        start, poll = time.monotonic(), max(poll, 0.001)
        while (lease := self._try_acquire(name, holder, ttl, then)) is None:
            elapsed = time.monotonic() - start
            if elapsed >= wait:
                return None
            time.sleep(min(poll, wait - elapsed))
        return lease

    def refresh(self, lease: Lease, *, ttl: float) -> bool:
        """Extend ``lease`` to now + ``ttl`` iff it is still this holder's at this epoch."""

        def txn(conn: sqlite3.Connection) -> bool:
            expires = time.time() + ttl
            if conn.execute("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND epoch = ?",
                            (expires, lease.name, lease.holder, lease.epoch)).rowcount != 1:
                return False
            lease.expires_at = expires
            return True

        return self.write(txn)

    def release(self, lease: Lease) -> bool:
        """Give ``lease`` up (the epoch stays). False when it was released already or taken over."""
        return self.write(lambda conn: conn.execute(
            "UPDATE leases SET holder = '', expires_at = ?, owner_pid = NULL, owner_start = NULL,"
            " owner_ns = NULL, owner_mark = NULL WHERE name = ? AND holder = ? AND epoch = ?",
            (time.time(), lease.name, lease.holder, lease.epoch)).rowcount == 1)

    def current(self, name: str) -> Lease | None:
        """The live lease on ``name``, or None when it is free."""
        row = self._peek(name)
        if row is None or self._free(row, time.time()):
            return None
        return Lease(name, row[0], row[1], row[2])


_stores: dict[str, LeaseStore] = {}
_stores_lock = threading.Lock()


def shared(path: Path | str | None = None) -> LeaseStore:
    """One open store per file per process (default: the tray's), not a new connection every resume."""
    from hermes_tray_core.stores.paths import ledger_db

    key = str(path or ledger_db())
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = LeaseStore(key)
        return store


#: What the store can raise (MemoryError: SQLite on a broken file); callers that must go on catch these, never
#: more.
STORE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, MemoryError, OSError, ValueError)


def _looks_corrupt(exc: Exception) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


class LeaseKeeper:
    """Refreshes a held lease every ``ttl / 5`` seconds; a miss calls ``on_lost(lease)`` once and ends the
    thread (after :meth:`stop` a miss is the holder's end, not a loss), as Hermes' turn-lease refresher
    does."""

    def __init__(self, store: LeaseStore, lease: Lease, *, ttl: float, on_lost: Callable[[Lease], None] | None = None,
                 interval: float | None = None) -> None:
        self.store = store
        self.lease = lease
        self.ttl = ttl
        self.interval = ttl / 5.0 if interval is None else interval
        self.on_lost = on_lost
        self.lost = False
        self._stop = threading.Event()
        self._state = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"lease-keeper:{lease.name}", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop refreshing (call before releasing the lease)."""
        with self._state:
            self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> LeaseKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                ok = self.store.refresh(self.lease, ttl=self.ttl)
            except Exception:  # boundary: a thread's top (a failed refresh is a lost lease, never a dead keeper)
                log.warning("lease %s: refresh failed", self.lease.name, exc_info=True)
                ok = False
            if ok:
                continue
            with self._state:
                if self._stop.is_set():
                    return
                self.lost = True
            log.error("lease %s lost while held (epoch %s)", self.lease.name, self.lease.epoch)
            if self.on_lost is not None:
                try:
                    self.on_lost(self.lease)
                except Exception:  # boundary: a callback into the caller
                    log.exception("lease %s: on_lost callback failed", self.lease.name)
            return
