"""The ledger: the tray's one memory of every interrupted turn, in SQLite beside its claims.

Its tables, and how a run's own marker ties the interruption it becomes to its turn: docs/architecture.md
("The ledger, and the one judge"). A JSON-lines journal of an earlier release is read in once and set aside
(:mod:`core.stores.migrate`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from hermes_tray_core.keys import home_path, validate_session_id
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.stores import paths
from hermes_tray_core.turn import TurnId
from hermes_tray_core.vocab import Event

if TYPE_CHECKING:  # sqlite3 is loaded with the store, when the ledger is first read or written
    import sqlite3

    from hermes_tray_core.stores.lease import Lease, LeaseStore

__all__ = ["FORBIDDEN_FIELDS", "KEEP", "MAX_LIST", "MAX_STRING", "NOTHING", "UNREADABLE", "Ledger", "TurnStatus",
           "ledger"]

logger = get_logger(__name__)
_T = TypeVar("_T")

VERSION = 1  # turns.attempt -1: an early journal did not say
_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY, home TEXT NOT NULL, session TEXT NOT NULL, started_at REAL NOT NULL,
    attempt INTEGER NOT NULL, run INTEGER, root INTEGER, UNIQUE (home, session, started_at, attempt));
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, turn INTEGER NOT NULL, claim TEXT NOT NULL, epoch INTEGER NOT NULL, begun REAL NOT NULL,
    attempt INTEGER, open INTEGER NOT NULL DEFAULT 1, reached INTEGER NOT NULL DEFAULT 0, marker_started REAL);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, turn INTEGER, run INTEGER, event TEXT NOT NULL, via TEXT,
    reason TEXT, until REAL, details TEXT NOT NULL DEFAULT '{}');
CREATE INDEX IF NOT EXISTS decisions_turn ON decisions (turn);
CREATE INDEX IF NOT EXISTS runs_turn ON runs (turn);
CREATE INDEX IF NOT EXISTS runs_open ON runs (open) WHERE open = 1;
"""
#: Decisions kept (the oldest go first, never one of a turn whose run is still open): far more than a day's
#: markers (Hermes keeps 32 a home, for a day at most) need.
KEEP = 20_000
FORBIDDEN_FIELDS = frozenset({"prompt", "text", "note", "excerpt", "prompt_excerpt", "continuation", "message_text"})
_RESERVED = frozenset({"event", "home", "session_key", "started_at", "attempts", "turn_id", "created_at", "version",
                       "session_id", "stream_id"})
MAX_STRING = 500
MAX_LIST = 32  # elements kept of a list-valued setting (extra homes, hermes_command)
#: How long after a marker's ``started_at`` a run's dispatch may be recorded and still have become that marker
#: (Hermes writes it as the continued turn starts, the tray records the dispatch once Hermes answered).
DISPATCH_SLACK = 120.0
#: How much earlier than an interruption's marker the crash of the run that became it may be recorded.
CRASH_SLACK = 5.0
_CLOSING = frozenset({Event.COMPLETED, Event.INTERRUPTED, Event.FAILED, Event.GAVE_UP, Event.REFUSED, Event.CLEARED})
_REACHING = frozenset({Event.DISPATCHED, Event.CONTINUING, Event.DETACHED})
_ASKING = frozenset({Event.NOTIFIED, Event.SKIPPED, Event.COMPLETED, Event.GAVE_UP})


class TurnStatus(NamedTuple):
    """What the ledger knows of one interruption. ``stopped``: your Stop (``interrupted``) or ``gave-up``.
    ``snooze``: ``(until, asked since)``. ``witnessed``: how a witness saw its Hermes die; ``crashed``: the
    failure of our run that left it. ``readable`` False: nothing is known, act on no guess."""

    asked: bool = False
    skipped: bool = False
    finished: bool = False
    stopped: Event | None = None
    snooze: tuple[float, bool] | None = None
    witnessed: Mapping[str, Any] | None = None
    crashed: Mapping[str, Any] | None = None
    readable: bool = True


NOTHING = TurnStatus()
UNREADABLE = TurnStatus(readable=False)


def _clean(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else value[: MAX_STRING - 1] + "…"
    if isinstance(value, (list, tuple)) and name in ("old", "new"):
        return [_clean(name, v) for v in list(value)[:MAX_LIST]]
    raise TypeError(f"decision field {name!r} must be a str, number, bool or None, not {type(value).__name__}")


def _details(fields: Mapping[str, Any], reserved: frozenset[str] = _RESERVED) -> dict[str, Any]:
    """The fields a decision keeps beside its columns: never what could carry prompt text."""
    bad = FORBIDDEN_FIELDS.intersection(fields)
    if bad:
        raise ValueError(f"the ledger never stores prompt text: refusing field(s) {sorted(bad)}")
    taken = reserved.intersection(fields)
    if taken:
        raise ValueError(f"field(s) {sorted(taken)} are set by the ledger itself")
    return {k: _clean(k, v) for k, v in fields.items()}


class _Row(NamedTuple):
    event: Event
    via: str | None
    reason: str | None
    until: float | None
    details: str
    at: float | None


def _decision(event: Event | str, fields: Mapping[str, Any], at: float | None = None) -> _Row:
    kind = Event(event)  # ValueError for a name the ledger does not know
    if kind is Event.CONFIG_CHANGED:
        raise ValueError("configuration changes are recorded with record_config_change()")
    rest = dict(fields)
    rest.pop("attempts", None)  # the interruption's own: its TurnId says it
    via, reason, until = rest.pop("via", None), rest.pop("reason", None), rest.pop("until", None)
    details = _details(rest)
    until = _clean("until", until)
    if until is not None and (isinstance(until, bool) or not isinstance(until, (int, float))):
        raise TypeError("until must be a time")
    return _Row(kind, None if via is None else str(_clean("via", str(via))),
                None if reason is None else str(_clean("reason", str(reason))), until,
                json.dumps(details, ensure_ascii=False, separators=(",", ":")), at)


def _ident(turn: TurnId) -> TurnId:
    validate_session_id(turn.key, what="session key")
    if isinstance(turn.started_at, bool) or not isinstance(turn.started_at, (int, float)):
        raise TypeError("started_at must be a number")
    if isinstance(turn.attempt, bool) or not isinstance(turn.attempt, int):
        raise TypeError("attempt must be an int")
    return turn


class _Run(NamedTuple):
    id: int
    turn_started: float
    root: int
    begun: float
    attempt: int | None
    reached: bool
    marker_started: float | None


def _parent(runs: Iterable[_Run], started_at: float, attempt: int) -> _Run | None:
    """The one rule for which run of ours became the interruption ``(started_at, attempt)``: the run whose own
    marker started then; else the latest that reached Hermes as continuation ``attempt``, its marker unseen,
    dispatched before that marker began (within :data:`DISPATCH_SLACK`)."""
    best: _Run | None = None
    for r in runs:
        if r.turn_started == started_at:
            continue  # it continues this very interruption
        if r.marker_started == started_at:
            return r
        if (r.marker_started is None and r.reached and attempt >= 1 and r.attempt == attempt
                and r.begun <= started_at + DISPATCH_SLACK and (best is None or r.begun > best.begun)):
            best = r
    return best


def _config(conn: sqlite3.Connection, at: float, details: Mapping[str, Any]) -> int:
    return int(conn.execute("INSERT INTO decisions (at, event, details) VALUES (?, ?, ?)",
                            (at, Event.CONFIG_CHANGED.value, json.dumps(details, ensure_ascii=False,
                                                                        separators=(",", ":")))).lastrowid or 0)


def _new_run(conn: sqlite3.Connection, turn_row: int, claim: str, epoch: int, at: float) -> int:
    return int(conn.execute("INSERT INTO runs (turn, claim, epoch, begun) VALUES (?, ?, ?, ?)",
                            (turn_row, claim, epoch, at)).lastrowid or 0)


_RUNS_OF = ("SELECT r.id, t.started_at, coalesce(t.root, t.id), r.begun, r.attempt, r.reached, r.marker_started, "
            "t.session FROM runs r JOIN turns t ON r.turn = t.id WHERE t.home = ? AND t.session IN ({})")
_DECISIONS_OF = ("SELECT t.session, t.started_at, t.attempt, d.event, d.until, d.details, d.at, d.via, d.run, r.open, "
                 "r.reached, d.reason FROM turns t JOIN decisions d ON d.turn = t.id LEFT JOIN runs r ON r.id = d.run "
                 "WHERE t.home = ? AND t.session IN ({}) ORDER BY d.id")
_CHUNK = 400  # session keys per query (SQLite's older limit on variables is 999)


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


class Ledger:
    """The ledger in ``path`` (default: the tray's), on the lease store's connection and lock. Reads of a
    ledger that does not exist yet answer "nothing known" and create nothing. ``journal``: an earlier
    release's to read in."""

    def __init__(self, path: Path | str | None = None, *, journal: Path | None = None) -> None:
        self.path = Path(path) if path is not None else paths.ledger_db()
        self.journal = journal if journal is not None or path is not None else paths.journal_file()
        self._store: LeaseStore | None = None
        self._bounded = False  # this process kept it bounded (its first write)
        self._lock = threading.Lock()

    # -- the file ----------------------------------------------------------------------------------

    def store(self) -> LeaseStore:
        """The store, its tables made (and a journal read in) on first use; a ready ledger is only read here,
        so a first read never waits for another process's write."""
        with self._lock:
            if self._store is None:
                from hermes_tray_core.stores.lease import shared

                store = shared(self.path)
                ready = store.read(lambda c: c.execute("SELECT value FROM meta WHERE key = 'ledger'").fetchone())
                if (ready is None or ready[0] < VERSION or (self.journal is not None and self.journal.exists())) \
                        and store.write(self._prepare) and self.journal is not None:
                    from hermes_tray_core.stores.migrate import set_aside

                    set_aside(self.journal)  # once what it held is committed here
                self._store = store
            return self._store

    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """Make the tables and read a journal in; True when the journal is to be set aside."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'ledger'").fetchone()
        if row is None or row[0] < VERSION:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('ledger', ?)", (VERSION,))
        if self.journal is None or not self.journal.exists():
            return False
        from hermes_tray_core.stores.migrate import read_journal

        # read now; or read by a process that died before it could set it aside
        return read_journal(self, conn, self.journal) if row is None else True

    def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn`` in one write transaction; this process's first also trims the ledger to :data:`KEEP`."""
        store = self.store()

        def txn(conn: sqlite3.Connection) -> _T:
            if not self._bounded:
                self._bounded = True
                conn.execute("DELETE FROM decisions WHERE id <= (SELECT id FROM decisions ORDER BY id DESC LIMIT 1 "
                             "OFFSET ?) AND (turn IS NULL OR turn NOT IN (SELECT turn FROM runs WHERE open = 1))",
                             (KEEP,))
                conn.execute("DELETE FROM runs WHERE open = 0 AND id NOT IN "
                             "(SELECT run FROM decisions WHERE run IS NOT NULL)")
                conn.execute("DELETE FROM turns WHERE id NOT IN (SELECT turn FROM decisions WHERE turn IS NOT NULL) "
                             "AND id NOT IN (SELECT turn FROM runs)")
            return fn(conn)

        return store.write(txn)

    def _exists(self) -> bool:
        return self._store is not None or self.path.exists() or (self.journal is not None and self.journal.exists())

    # -- writing -----------------------------------------------------------------------------------

    def record(self, event: Event | str, turn: TurnId, *, run: int | None = None,
               marker_started: float | None = None, **fields: Any) -> dict[str, Any]:
        """Record one decision about ``turn`` (``marker_started``: run ``run``'s own marker, when known) and
        return it as :meth:`history` lists it. Refuses unknown events, prompt-bearing fields and non-scalars,
        writing nothing."""
        row, turn = _decision(event, fields), _ident(turn)
        return self._write(lambda c: _events(c, " WHERE d.id = ?",
                                             self._insert(c, turn, row, run, marker_started))[0])

    def record_many(self, rows: Sequence[tuple[Event | str, TurnId, Mapping[str, Any]]]) -> None:
        """``(event, turn, fields)`` decisions in one transaction; one refused, none written."""
        now = time.time()  # one moment for the batch
        checked = [(_ident(turn), _decision(event, fields, now)) for event, turn, fields in rows]
        if not checked:
            return

        def txn(conn: sqlite3.Connection) -> None:
            for turn, row in checked:
                self._insert(conn, turn, row, None, None)

        self._write(txn)

    def record_config_change(self, *, home: Path | str | None, key: str, old: Any, new: Any, by: str,
                             **fields: Any) -> dict[str, Any]:
        """A setting changed (``home`` None: the tray's own), ``by`` ``cli`` or ``tray``."""
        if by not in ("cli", "tray"):
            raise ValueError(f"by must be one of cli, tray, not {by!r}")
        if not isinstance(key, str) or not key or len(key) > 100:
            raise ValueError("key must be a short non-empty string")
        details = {"home": home_path(home) if home is not None else None, "key": key, "old": _clean("old", old),
                   "new": _clean("new", new), "by": by,
                   **_details(fields, _RESERVED.union({"key", "old", "new", "by"}))}
        return self._write(lambda c: _events(c, " WHERE d.id = ?", _config(c, time.time(), details))[0])

    def begin_run(self, conn: sqlite3.Connection, turn: TurnId, lease: Lease) -> int:
        """Inside the claim's transaction (``acquire``'s ``then``): a run of ours continues ``turn``; its
        number. The caller made the tables first: :meth:`store` in here would wait for itself."""
        return _new_run(conn, self._turn_row(conn, _ident(turn)), lease.name, lease.epoch, time.time())

    def end_run(self, run: int) -> None:
        """A run whose process died before it recorded anything (its resume was checking) is over."""
        self._write(lambda conn: conn.execute("UPDATE runs SET open = 0 WHERE id = ?", (run,)))

    def _insert(self, conn: sqlite3.Connection, turn: TurnId, row: _Row, run: int | None,
                marker_started: float | None) -> int:
        tid = self._turn_row(conn, turn)
        number = conn.execute(
            "INSERT INTO decisions (at, turn, run, event, via, reason, until, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (row.at if row.at is not None else time.time(), tid, run, row.event.value, row.via, row.reason, row.until,
             row.details)).lastrowid
        if run is not None:
            attempt = json.loads(row.details).get("attempt")
            if row.event in _REACHING:
                conn.execute("UPDATE runs SET reached = 1, attempt = coalesce(?, attempt) WHERE id = ?",
                             (attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None, run))
            if row.event in _CLOSING:
                conn.execute("UPDATE runs SET open = 0 WHERE id = ?", (run,))
            if marker_started is not None:
                self._marker(conn, run, turn, float(marker_started))
        return int(number or 0)

    def _turn_row(self, conn: sqlite3.Connection, turn: TurnId) -> int:
        home = home_path(turn.home)
        key = (home, turn.key, float(turn.started_at), int(turn.attempt))
        found = conn.execute("SELECT id FROM turns WHERE home = ? AND session = ? AND started_at = ? AND attempt = ?",
                             key).fetchone()
        if found is not None:
            return int(found[0])
        runs = [_Run(*r[:7]) for r in conn.execute(_RUNS_OF.format("?"), (home, turn.key))]
        parent = _parent(runs, key[2], key[3])
        if parent is not None and parent.marker_started is None:
            conn.execute("UPDATE runs SET marker_started = ? WHERE id = ?", (key[2], parent.id))
        return int(conn.execute("INSERT INTO turns (home, session, started_at, attempt, run, root) VALUES (?, ?, ?, ?, ?, ?)",
                                (*key, parent.id if parent else None, parent.root if parent else None)).lastrowid or 0)

    def _marker(self, conn: sqlite3.Connection, run: int, turn: TurnId, started: float) -> None:
        """Run ``run`` wrote or saw its own marker, started at ``started``: tie that interruption to it."""
        if started == turn.started_at:
            return
        conn.execute("UPDATE runs SET marker_started = ? WHERE id = ?", (started, run))
        root = conn.execute("SELECT coalesce(t.root, t.id) FROM runs r JOIN turns t ON r.turn = t.id WHERE r.id = ?",
                            (run,)).fetchone()
        conn.execute("UPDATE turns SET run = ?, root = ? WHERE home = ? AND session = ? AND started_at = ? AND run IS NULL",
                     (run, root[0] if root else None, home_path(turn.home), turn.key, started))

    # -- reading -----------------------------------------------------------------------------------

    def _read(self, fn: Callable[[sqlite3.Connection], _T], empty: _T) -> _T:
        return self.store().read(fn) if self._exists() else empty

    def _all(self, order: str) -> list[dict[str, Any]]:
        return self._read(lambda c: _events(c, " ORDER BY d.id" + order), [])

    def status(self, turn: TurnId) -> TurnStatus:
        return self.statuses([turn]).get(turn, NOTHING)

    def statuses(self, turns: Iterable[TurnId]) -> dict[TurnId, TurnStatus]:
        """:meth:`status` of many turns, a few queries per home."""
        by_home: dict[str, dict[str, list[TurnId]]] = {}
        for t in turns:
            by_home.setdefault(home_path(t.home), {}).setdefault(t.key, []).append(t)
        if not by_home or not self._exists():
            return {}

        def read(conn: sqlite3.Connection) -> dict[TurnId, TurnStatus]:
            out: dict[TurnId, TurnStatus] = {}
            for home, sessions in by_home.items():
                rows: dict[tuple[str, float], list[tuple[Any, ...]]] = {}
                runs: dict[str, list[_Run]] = {}
                crashes: dict[int, Mapping[str, Any]] = {}
                for chunk in _chunks(list(sessions)):
                    marks = ",".join("?" * len(chunk))
                    for r in conn.execute(_DECISIONS_OF.format(marks), (home, *chunk)):
                        rows.setdefault((r[0], r[1]), []).append(r)
                        if r[3] in (Event.FAILED, Event.INTERRUPTED) and r[8] is not None:
                            crashes[r[8]] = {**json.loads(r[5]), "event": r[3], "created_at": r[6]}
                    for r in conn.execute(_RUNS_OF.format(marks), (home, *chunk)):
                        runs.setdefault(r[7], []).append(_Run(*r[:7]))
                for key, wanted in sessions.items():
                    for t in wanted:
                        parent = _parent(runs.get(key, ()), float(t.started_at), t.attempt)
                        crash = crashes.get(parent.id) if parent is not None else None
                        crashed = crash if crash is not None and _ended_mid_turn(crash) and \
                            crash["created_at"] >= float(t.started_at) - CRASH_SLACK else None
                        out[t] = _status(rows.get((key, float(t.started_at)), ()), t.attempt, crashed)
            return out

        return self._read(read, {})

    def open_runs(self, home: Path | str) -> list[dict[str, Any]]:
        """The runs of ours in ``home`` whose end is still to be read, oldest first: each its newest decision
        (``event`` None: none), with ``run``, ``claim`` and ``epoch``."""

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            out = []
            for run, claim, epoch, session, started, attempt in conn.execute(
                    "SELECT r.id, r.claim, r.epoch, t.session, t.started_at, t.attempt FROM runs r JOIN turns t "
                    "ON r.turn = t.id WHERE r.open = 1 AND t.home = ? ORDER BY r.id", (home_path(home),)):
                last = _events(conn, " WHERE d.run = ? ORDER BY d.id DESC LIMIT 1", run)
                ev = last[0] if last else {"event": None, "home": home_path(home), "session_key": session,
                                           "started_at": started, "attempts": attempt}
                out.append({**ev, "run": run, "claim": claim, "epoch": epoch})
            return out

        return self._read(read, [])

    def history(self, limit: int = 200, *, home: Path | str | None = None, session_key: str | None = None,
                homes: Sequence[Path | str] | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` decisions and settings changes, newest first, each a flat dict. ``home`` /
        ``session_key``: only theirs; ``homes``: theirs and the tray's own settings changes."""
        keys = None if home is None and homes is None else \
            {home_path(h) for h in [*(homes or ()), home] if h is not None}
        return list(islice((ev for ev in self._all(" DESC") if _shown(ev, keys, tray=home is None)
                            and session_key in (None, ev.get("session_key"))), limit))

    def turns(self, limit: int = 500, *, homes: Sequence[Path | str] | None = None) -> list[dict[str, Any]]:
        """History's rows, newest activity first: one per turn, its continuations folded in (``turn``: its
        first interruption, ``last``: its newest, ``events`` oldest first), one per settings change (``turn``
        None)."""
        keys = {home_path(h) for h in homes} if homes else None
        groups: dict[object, dict[str, Any]] = {}
        for ev in (e for e in self._all("") if _shown(e, keys, tray=True)):
            if ev["event"] == Event.CONFIG_CHANGED:
                groups[("config", ev["decision"])] = {"turn": None, "last": None, "events": [ev]}
                continue
            ident = TurnId(ev["home"], ev["session_key"], ev["started_at"], ev["attempts"] or 0)
            g = groups.pop(ev["root"], None) or {"turn": ident, "last": ident, "events": [], "newest": ev["turn_id"]}
            if ev["turn_id"] == ev["root"]:
                g["turn"] = ident
            if ev["turn_id"] >= g["newest"]:
                g["last"], g["newest"] = ident, ev["turn_id"]
            g["events"].append(ev)
            groups[ev["root"]] = g  # re-inserted: dict order = last activity
        return list(reversed(groups.values()))[:limit]


_HISTORY = ("SELECT d.id, d.at, d.event, d.via, d.reason, d.until, d.details, t.id, t.home, t.session, t.started_at, "
            "t.attempt, coalesce(t.root, t.id), d.run FROM decisions d LEFT JOIN turns t ON d.turn = t.id")


def _event(r: Sequence[Any]) -> dict[str, Any]:
    (number, at, event, via, reason, until, details, tid, home, session, started, attempt, root, run) = r
    try:
        extra = json.loads(details)
    except ValueError:
        extra = {}
    out: dict[str, Any] = {"event": event, "created_at": at, "decision": number}
    if tid is not None:
        out.update(turn_id=tid, root=root, home=home, session_key=session, started_at=started,
                   attempts=attempt if attempt >= 0 else None)
    if run is not None:
        out["run"] = run
    out.update({k: v for k, v in (("via", via), ("reason", reason), ("until", until)) if v is not None})
    out.update(extra if isinstance(extra, dict) else {})
    return out


def _events(conn: sqlite3.Connection, where: str, *args: Any) -> list[dict[str, Any]]:
    return [_event(r) for r in conn.execute(_HISTORY + where, args)]


def _shown(ev: Mapping[str, Any], keys: Collection[str] | None, *, tray: bool) -> bool:
    """In one of ``keys`` (None: any), or (``tray``) a change of the tray's own settings: the only rows
    without a home."""
    return keys is None or ev.get("home") in keys or (tray and ev.get("home") is None)


def _ended_mid_turn(end: Mapping[str, Any]) -> bool:
    """Our run crashed, or the tray's quit stopped it, mid-turn."""
    return end.get("outcome") == "crashed" or (end["event"] == Event.INTERRUPTED and end.get("stopped_by") == "shutdown")


def _status(rows: Iterable[Sequence[Any]], attempt: int, crashed: Mapping[str, Any] | None) -> TurnStatus:
    """:class:`TurnStatus` from one interruption's decision rows, oldest first (every attempt its
    ``started_at`` was seen with): a settling decision counts only for this very attempt (or an early
    journal's without one)."""
    asked = skipped = finished = False
    stopped: Event | None = None
    snooze: tuple[float, bool] | None = None
    witnessed: dict[str, Any] | None = None
    for (_s, _t, got, event, until, details, at, _via, run, run_open, reached, reason) in rows:
        mine = got in (attempt, -1)
        if event == Event.STOPPED:
            witnessed = {**json.loads(details), **({"reason": reason} if reason else {}), "created_at": at}
            continue
        if event == Event.SNOOZED:
            if until is not None:
                snooze = (float(until), False)
            continue
        if event == Event.INTERRUPTED and json.loads(details).get("stopped_by") == "you" and mine:
            stopped = Event.INTERRUPTED
        elif event == Event.GAVE_UP and mine:
            stopped = Event.GAVE_UP
        if run is not None and not run_open and not reached and event in _CLOSING and stopped is None:
            asked = False  # a resume that never reached Hermes is no answer: the turn is asked about again
            continue
        if event in _ASKING or event in _REACHING or event == Event.APPROVED or event == Event.INTERRUPTED \
                or (event == Event.FAILED and (run is None or reached)):
            asked = True
            if snooze is not None:
                snooze = (snooze[0], True)
        skipped = skipped or (event == Event.SKIPPED and mine)
        finished = finished or (event == Event.COMPLETED and mine)
    return TurnStatus(asked, skipped, finished, stopped, snooze, witnessed, crashed)


_LEDGERS: dict[str, Ledger] = {}
_LEDGERS_LOCK = threading.Lock()


def ledger() -> Ledger:
    """The tray's ledger in the current state dir."""
    path = str(paths.ledger_db())
    with _LEDGERS_LOCK:
        found = _LEDGERS.get(path)
        if found is None:
            found = _LEDGERS[path] = Ledger(path, journal=paths.journal_file())
        return found


def _forget_after_fork() -> None:
    global _LEDGERS_LOCK
    _LEDGERS_LOCK = threading.Lock()
    for one in _LEDGERS.values():
        one._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
