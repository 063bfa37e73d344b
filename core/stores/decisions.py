"""The tray's own decision journal: what it saw, asked, and did about each interrupted turn.

A thin layer over :mod:`core.stores.turn_journal` (one file, ``<decision_journal_dir>/_turn_journal/decisions.jsonl``,
same crash-safe append). Every event names the turn it is about by ``(home, session_key,
started_at)``; that triple maps to a deterministic journal ``turn_id``, so all events about one
interrupted turn group together across restarts and processes. That is what lets a restarted
tray ask at most once per interrupted turn (:meth:`DecisionJournal.was_asked`).

Configuration changes are recorded in the same journal as first-class ``config-changed`` events
(:meth:`DecisionJournal.record_config_change`): which home (None for the tray's own settings),
which key, the old and the new value, and who made it (``by``: ``cli`` or ``tray``). They concern
no turn (no ``session_key``), each is its own journal turn, and :meth:`DecisionJournal.history`
returns them interleaved in time order with the turn decisions.

Two events say something about a turn without deciding it: ``snoozed`` (the user asked to be reminded
``until`` a time: the turn is not announced before then, and nothing is continued) and ``stopped`` (a witness
saw why its Hermes process died: ``cause``, with the fact behind it).

Never prompt text: fields that could carry it are refused, other strings are capped.
The file is bounded: past ``max_bytes`` the oldest *finished* turns (and the oldest configuration
changes) are dropped whole; the events of a turn still in progress are never dropped.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_tray_core.digest import sha256_hex
from hermes_tray_core.keys import HomePath, home_path, validate_session_id
from hermes_tray_core.numbers import json_number
from hermes_tray_core.stores import paths
from hermes_tray_core.stores import turn_journal as journal

__all__ = ["ANSWERED", "OPEN_RUN", "CONFIG_BY", "CONFIG_CHANGED", "DecisionJournal", "DEFAULT_MAX_BYTES", "EVENTS",
    "FORBIDDEN_FIELDS", "JOURNAL_ID", "MAX_LIST", "MAX_STRING", "RESERVED_FIELDS", "TERMINAL",
    "decision_turn_id", "default_journal", "has_answered", "history",
    "record", "record_config_change", "turn_roots", "turn_status", "was_asked"]

JOURNAL_ID = "decisions"
EVENTS = (
    "detected", "notified", "approved", "skipped", "dispatched",
    "completed", "interrupted", "failed", "gave-up", "refused",
    "cleared",  # the marker went away without the tray (Hermes resumed or pruned it elsewhere)
    "continuing",  # the tray is about to submit its continuation note: how state.db will show it answered
    "detached",  # the tray stopped following a continuation that goes on in Hermes (it quit, or a window has it)
    "config-changed",  # a setting changed (record_config_change); about no turn
    "snoozed",  # remind me later: not announced before ``until`` (epoch seconds); continues nothing
    "stopped",  # a witness saw why the turn's Hermes process died (``cause``, ``fact``): core.deciding.witness
)
CONFIG_CHANGED = "config-changed"
#: Who changes configuration.
CONFIG_BY = ("cli", "tray")
#: The tray is done with the turn: compaction may drop these turns (oldest first).
TERMINAL = frozenset({"skipped", "completed", "interrupted", "failed", "gave-up", "refused", "cleared",
                      CONFIG_CHANGED})
#: Someone decided (the user, or the tray in auto mode): the turn must not be offered again.
ANSWERED = frozenset({"approved", "skipped", "dispatched", "completed", "interrupted", "failed", "gave-up",
                      "detached"})
#: A run of ours that was started and not concluded yet: if its process is gone, its end is read from Hermes
#: (``core.continuing.orphans``).
OPEN_RUN = frozenset({"approved", "dispatched", "detached"})
FORBIDDEN_FIELDS = frozenset({"prompt", "text", "note", "excerpt", "prompt_excerpt", "continuation", "message_text"})
RESERVED_FIELDS = frozenset({"version", "session_id", "turn_id", "created_at", "event", "home", "session_key",
                             "started_at", "stream_id"})
MAX_STRING = 500
MAX_LIST = 32  # elements kept of a list-valued setting (extra homes, hermes_command)
DEFAULT_MAX_BYTES = 1 << 20


def _started_repr(started_at: float | int | None) -> str:
    return "none" if started_at is None else repr(float(started_at))


def decision_turn_id(home: Path | str, session_key: str, started_at: float | int | None) -> str:
    """Deterministic ``YYYYmmddTHHMMSSZ-<12 hex>`` for one interrupted turn."""
    return _turn_id(home_path(home), session_key, started_at)


def _turn_id(canonical_home: str, session_key: str, started_at: float | int | None) -> str:
    digest = sha256_hex(f"{canonical_home}\0{session_key}\0{_started_repr(started_at)}".encode())[:12]
    try:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(float(started_at or 0)))
    except (OverflowError, OSError, ValueError):
        stamp = "19700101T000000Z"
    return f"{stamp}-{digest}"


def _attempts_key(value: object) -> int | None:
    """``attempts`` as a tombstone compares it: an integral number (Hermes' field), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return int(value) if float(value).is_integer() else None
    except (OverflowError, ValueError):
        return None


def _clean_setting(name: str, value: Any) -> Any:
    """A setting's value: a scalar (as :func:`_clean`), or a list of them (at most :data:`MAX_LIST`)."""
    if isinstance(value, (list, tuple)):
        return [_clean(name, v) for v in list(value)[:MAX_LIST]]
    return _clean(name, value)


def _clean(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else value[: MAX_STRING - 1] + "…"
    raise TypeError(f"decision field {name!r} must be a str, number, bool or None, not {type(value).__name__}")


def _refuse_fields(fields: Mapping[str, Any], reserved: frozenset[str]) -> None:
    """Refuse a field that could carry prompt text, or one the journal sets itself (``ValueError``)."""
    bad = FORBIDDEN_FIELDS.intersection(fields)
    if bad:
        raise ValueError(f"decision journal never stores prompt text: refusing field(s) {sorted(bad)}")
    taken = reserved.intersection(fields)
    if taken:
        raise ValueError(f"field(s) {sorted(taken)} are set by the journal itself")


def _turn_payload(event: str, home: Any, session_key: Any, started_at: Any, fields: Mapping[str, Any]) -> dict[str, Any]:
    """One turn decision as the journal stores it, after every refusal (see :meth:`DecisionJournal.record`)."""
    if event not in EVENTS:
        raise ValueError(f"unknown decision event {event!r}; expected one of {', '.join(EVENTS)}")
    if event == CONFIG_CHANGED:
        raise ValueError("configuration changes are recorded with record_config_change()")
    validate_session_id(session_key, what="session key")
    if started_at is not None and (isinstance(started_at, bool) or not isinstance(started_at, (int, float))):
        raise TypeError("started_at must be a number or None")
    _refuse_fields(fields, RESERVED_FIELDS)
    hk = home_path(home)
    payload: dict[str, Any] = {
        "event": event,
        "turn_id": _turn_id(hk, session_key, started_at),
        "home": hk,
        "session_key": session_key,
        "started_at": None if started_at is None else float(started_at),
    }
    payload.update({k: _clean(k, v) for k, v in fields.items()})
    return payload


class _Cache:
    """What has been read of the journal so far (a plain class: ``status`` reads it, and importing
    ``dataclasses`` cost its start-up ~10 ms; tests/bench/bench_status.py)."""

    __slots__ = ("signature", "offset", "events", "by_turn", "skips", "finished", "snoozes", "stops", "crashes",
                 "stopped", "open_runs")

    def __init__(self, signature: tuple[int, int] | None = None) -> None:
        self.signature = signature
        self.offset = 0
        self.events: list[dict[str, Any]] = []
        self.by_turn: dict[str, list[str]] = {}
        self.skips: dict[str, list[object]] = {}  # turn_id -> attempts of each ``skipped``
        self.finished: dict[str, list[object]] = {}  # turn_id -> attempts of each ``completed``
        self.snoozes: dict[str, float] = {}  # turn_id -> ``until`` of its latest ``snoozed``
        self.stops: dict[str, dict[str, Any]] = {}  # turn_id -> its latest ``stopped``
        self.crashes: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (home, session) -> crashed continuations
        self.stopped: dict[str, list[tuple[object, str]]] = {}  # turn_id -> (attempts, event) of a Stop or give-up
        self.open_runs: dict[str, dict[str, Any]] = {}  # turn_id -> its newest event, while that is an open one


class DecisionJournal:
    """The decision journal in ``directory`` (default: ``core.stores.paths.decision_journal_dir()``).

    Reads are incremental (only bytes appended since the last read are parsed), so asking
    :meth:`was_asked` for every marker on every scan stays cheap.
    """

    def __init__(self, directory: Path | str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory) if directory is not None else paths.decision_journal_dir()
        self.max_bytes = max_bytes
        self._cache = _Cache()
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return journal.journal_path(JOURNAL_ID, session_dir=self.directory)

    # -- writing -------------------------------------------------------------------------------

    def record(
        self, event: str, *, home: Path | str, session_key: str, started_at: float | int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Append one decision and return it as written. Refuses unknown events, prompt-bearing
        fields and non-scalar values (``ValueError`` / ``TypeError``), writing nothing."""
        payload = _turn_payload(event, home, session_key, started_at, fields)
        written = journal.append_turn_journal_event(JOURNAL_ID, payload, session_dir=self.directory)
        self._bound()
        return written

    def record_many(self, decisions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Append several decisions in one journal write (one fsync): a crash storm of N turns is one write,
        not N. Each item holds ``event``, ``home``, ``session_key``, ``started_at`` and its fields, as
        :meth:`record` takes them; one refused item writes none."""
        payloads = []
        keys: dict[str, HomePath] = {}  # each home resolved once for the whole batch
        for d in decisions:
            fields = {k: v for k, v in d.items() if k not in ("event", "home", "session_key", "started_at")}
            home = os.fspath(d.get("home", ""))
            if home not in keys:
                keys[home] = home_path(home)
            payloads.append(_turn_payload(str(d.get("event")), keys[home], d.get("session_key"),
                                          d.get("started_at"), fields))
        written = journal.append_turn_journal_events(JOURNAL_ID, payloads, session_dir=self.directory)
        self._bound()
        return written

    def record_config_change(
        self, *, home: Path | str | None, key: str, old: Any, new: Any, by: str, **fields: Any,
    ) -> dict[str, Any]:
        """Append a ``config-changed`` event and return it as written.

        ``home``: the Hermes home whose ``config.yaml`` changed, or None for the tray's own settings;
        ``key``: the setting; ``old`` / ``new``: its values (scalars, or lists of scalars); ``by``:
        ``cli`` or ``tray``. Same refusals as :meth:`record` for prompt-bearing or reserved fields.
        """
        if by not in CONFIG_BY:
            raise ValueError(f"by must be one of {', '.join(CONFIG_BY)}, not {by!r}")
        if not isinstance(key, str) or not key or len(key) > 100:
            raise ValueError("key must be a short non-empty string")
        _refuse_fields(fields, RESERVED_FIELDS.union({"key", "old", "new", "by"}))
        payload: dict[str, Any] = {
            "event": CONFIG_CHANGED,
            "home": home_path(home) if home is not None else None,
            "key": key,
            "old": _clean_setting("old", old),
            "new": _clean_setting("new", new),
            "by": by,
        }
        payload.update({k: _clean(k, v) for k, v in fields.items()})
        # no turn_id given: the journal makes a fresh one, so each change is its own (finished) "turn"
        written = journal.append_turn_journal_event(JOURNAL_ID, payload, session_dir=self.directory)
        self._bound()
        return written

    def _bound(self) -> None:
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return
        if size > self.max_bytes:
            journal.compact_turn_journal(
                JOURNAL_ID, session_dir=self.directory, max_bytes=self.max_bytes,
                is_terminal=lambda e: str(e.get("event")) in TERMINAL,
            )

    # -- reading -------------------------------------------------------------------------------

    def _load(self) -> _Cache:
        # One reader at a time: the tray's detector thread (tombstones, ask-once) and its GUI / write threads
        # (History, records) share this object; two reading the same new bytes would list each event twice.
        with self._lock:
            return self._load_locked()

    def _load_locked(self) -> _Cache:
        cache = self._cache
        try:
            st = os.stat(self.path)
        except OSError:
            self._cache = _Cache()
            return self._cache
        if cache.signature is None or cache.signature[0] != st.st_ino or st.st_size < cache.offset:
            cache = self._cache = _Cache(signature=(st.st_ino, 0))
        if st.st_size == cache.offset:
            return cache
        try:
            with open(self.path, "rb") as fh:
                fh.seek(cache.offset)
                data = fh.read(st.st_size - cache.offset)
        except OSError:
            return cache
        end = data.rfind(b"\n") + 1  # a torn (or still-being-written) tail waits for the next read
        for raw in data[:end].split(b"\n"):
            if not raw.strip():
                continue
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if type(ev) is not dict:
                continue
            cache.events.append(ev)
            cache.by_turn.setdefault(str(ev.get("turn_id") or ""), []).append(str(ev.get("event") or ""))
            name, tid = ev.get("event"), str(ev.get("turn_id") or "")
            if name == "skipped":
                cache.skips.setdefault(tid, []).append(_attempts_key(ev.get("attempts")))
            elif name == "completed":
                cache.finished.setdefault(tid, []).append(_attempts_key(ev.get("attempts")))
            elif name == "snoozed":
                until = json_number(ev.get("until"))
                if until is not None:
                    cache.snoozes[tid] = until
            elif name == "stopped":
                cache.stops[tid] = ev
            elif (name == "failed" and ev.get("outcome") == "crashed") or (
                    name == "interrupted" and ev.get("stopped_by") == "shutdown"):  # a run of ours that ended mid-turn
                cache.crashes.setdefault((str(ev.get("home")), str(ev.get("session_key"))), []).append(ev)
            if (name == "interrupted" and ev.get("stopped_by") == "you") or name == "gave-up":
                cache.stopped.setdefault(tid, []).append((_attempts_key(ev.get("attempts")), str(name)))
            if name in OPEN_RUN:
                cache.open_runs[tid] = ev
            elif name in TERMINAL:
                cache.open_runs.pop(tid, None)
        cache.offset += end
        cache.signature = (st.st_ino, cache.offset)
        return cache

    def events_for(self, home: Path | str, session_key: str, started_at: float | int | None) -> list[str]:
        """Event names recorded for one turn, in append order."""
        return list(self._load().by_turn.get(decision_turn_id(home, session_key, started_at), ()))

    def turn_status(self, home: Path | str, session_key: str, started_at: float | int | None) -> str | None:
        """The latest event recorded for the turn, or None if the tray never saw it."""
        names = self.events_for(home, session_key, started_at)
        return names[-1] if names else None

    def has_answered(self, home: Path | str, session_key: str, started_at: float | int | None) -> bool:
        """True once anyone decided about this turn (approved/skipped, or the tray acted on it)."""
        return any(n in ANSWERED for n in self.events_for(home, session_key, started_at))

    def is_tombstoned(self, home: Path | str, session_key: str, started_at: float | int | None,
                      attempts: object) -> bool:
        """True when this exact turn — session key + ``started_at`` + ``attempts`` — was skipped: a skip is a
        durable tombstone, so the entry, should a stale Hermes write bring it back, is removed again and
        never offered. A ``skipped`` event that recorded no attempts tombstones the run (``started_at``)."""
        return self._matches(self._load().skips, home, session_key, started_at, attempts)

    def is_retired(self, home: Path | str, session_key: str, started_at: float | int | None,
                   attempts: object) -> bool:
        """True when this exact turn (the same identity as :meth:`is_tombstoned`) was continued and finished
        (``completed``): a marker for it that comes back is a stale write's copy of a finished turn, retired
        like a skipped one so neither the tray nor Hermes continues it again. A ``completed`` event that
        recorded no attempts (older journals) retires the run."""
        return self._matches(self._load().finished, home, session_key, started_at, attempts)

    def stopped_how(self, home: Path | str, session_key: str, started_at: float | int | None,
                    attempts: object) -> str | None:
        """``interrupted`` (you stopped it) or ``gave-up`` (the tray gave up on it) when the journal records that for
        this exact turn (the identity :meth:`is_tombstoned` uses): a Stop is final, so a marker for it that is
        still there (Hermes' file could not be changed, or a stale write brought it back) is never offered or
        resumed again. None otherwise."""
        if started_at is None:
            return None
        index = self._load().stopped
        if not index:
            return None
        want = _attempts_key(attempts)
        for got, how in index.get(decision_turn_id(home, session_key, started_at), ()):
            if got is None or got == want:
                return how
        return None

    def open_runs(self, home: Path | str) -> list[dict[str, Any]]:
        """The runs in ``home`` whose newest event is an open one (:data:`OPEN_RUN`), oldest first: started, not
        concluded in the journal. Cheap: an index kept as the journal is read."""
        runs = self._load().open_runs
        if not runs:
            return []
        key = home_path(home)
        return [dict(ev) for ev in runs.values() if ev.get("home") == key]

    def _matches(self, index: dict[str, list[object]], home: Path | str, session_key: str,
                 started_at: float | int | None, attempts: object) -> bool:
        if started_at is None:
            return False  # no identity to pin: a tombstone must never hit another turn
        if not index:
            return False  # nothing recorded: no need to name the turn (a path resolve and a digest)
        want = _attempts_key(attempts)
        for got in index.get(decision_turn_id(home, session_key, started_at), ()):
            if got is None or got == want:
                return True
        return False

    def snooze(self, home: Path | str, session_key: str, started_at: float | int | None) -> tuple[float, bool] | None:
        """The turn's latest snooze: ``(until, asked_since)`` — ``asked_since`` once it was announced or
        decided after that snooze — or None when it was never snoozed."""
        cache = self._load()
        if started_at is None or not cache.snoozes:
            return None
        tid = decision_turn_id(home, session_key, started_at)
        until = cache.snoozes.get(tid)
        if until is None:
            return None
        names = cache.by_turn.get(tid, [])
        last = len(names) - 1 - names[::-1].index("snoozed")
        return until, any(n in ANSWERED or n == "notified" for n in names[last + 1:])

    def knows_stops(self) -> bool:
        """Whether the journal holds any ``stopped`` or crashed continuation at all (one look per scan, so that
        a journal with none costs the turns nothing)."""
        cache = self._load()
        return bool(cache.stops or cache.crashes)

    def stop_facts(self, home: Path | str, session_key: str, started_at: float | int | None,
                   attempts: object) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """What the journal knows of how this run of a turn stopped: ``(stopped, crashed)`` — the latest
        ``stopped`` a witness recorded for it, and the end of the tray's own continuation that left it mid-turn:
        a ``failed`` (``outcome: crashed``) of attempt ``attempts``, or an ``interrupted`` the tray's quit caused
        (``stopped_by: shutdown``; the quit gives the attempt back, so the marker counts either), journalled after
        the run began (a continuation's marker counts its attempt and is written when it starts). Each None when
        there is none."""
        cache = self._load()
        if started_at is None or (not cache.stops and not cache.crashes):
            return None, None
        stopped = cache.stops.get(decision_turn_id(home, session_key, started_at)) if cache.stops else None
        crashed = None
        want = _attempts_key(attempts)
        for ev in cache.crashes.get((home_path(home), session_key), ()) if want is not None else ():
            at = json_number(ev.get("created_at"))
            counts = {_attempts_key(ev.get("attempt"))}
            if ev.get("event") == "interrupted":
                counts.add(_attempts_key(ev.get("attempts")))
            if want in counts and at is not None and at >= float(started_at) - CRASH_SLACK:
                crashed = ev
        return stopped, crashed

    def was_asked(self, home: Path | str, session_key: str, started_at: float | int | None) -> bool:
        """True once the user was notified or a decision was taken: a restart must not ask again."""
        return any(n in ANSWERED or n == "notified" for n in self.events_for(home, session_key, started_at))

    def history(self, limit: int = 200, *, home: Path | str | None = None, session_key: str | None = None,
                homes: Sequence[Path | str] | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` decisions and configuration changes, newest first — one journal, so
        both kinds come interleaved in the order they happened (optionally for one home and one session;
        a session filter leaves configuration changes out, a home filter keeps that home's). ``homes``: only
        what concerns any of these homes, and the tray's own settings changes (they concern no home)."""
        events = self._load().events
        wanted = [*([home] if home is not None else []), *(homes or ())]
        keys = {home_path(h) for h in wanted} if home is not None or homes is not None else None
        tray = home is None and homes is not None  # the tray's own settings pass a ``homes`` filter
        out: list[dict[str, Any]] = []
        for ev in reversed(events):
            if keys is not None and ev.get("home") not in keys and not (
                    tray and ev.get("home") is None and ev.get("event") == CONFIG_CHANGED):
                continue
            if session_key is not None and ev.get("session_key") != session_key:
                continue
            out.append({k: v for k, v in ev.items() if k not in ("version", "session_id")})
            if len(out) >= limit:
                break
        return out

    def turns(self, limit: int = 100) -> list[dict[str, Any]]:
        """Decisions grouped per interrupted turn (:func:`turn_roots`: a turn's continuations are in its
        group), most recently active first: ``{"turn_id", "home", "session_key", "started_at", "status",
        "events": [...]}``. Configuration changes concern no turn and are left out (see :meth:`history`)."""
        events = [ev for ev in self._load().events if ev.get("event") != CONFIG_CHANGED]
        roots = turn_roots(events)
        grouped: dict[str, dict[str, Any]] = {}
        for ev in events:
            tid = roots.get(str(ev.get("turn_id") or ""), str(ev.get("turn_id") or ""))
            g = grouped.pop(tid, None) or {
                "turn_id": tid, "home": ev.get("home"), "session_key": ev.get("session_key"),
                "started_at": ev.get("started_at"), "events": [],
            }
            g["events"].append({k: v for k, v in ev.items() if k not in ("version", "session_id")})
            g["status"] = ev.get("event")
            grouped[tid] = g  # re-inserted: dict order = last activity
        return list(reversed(grouped.values()))[:limit]


#: How long after a continuation's dispatch Hermes may still be writing that continuation's marker (its
#: ``started_at``): Hermes writes it when the continued turn starts, the tray journals ``dispatched`` once Hermes
#: has answered — either may come first.
DISPATCH_SLACK = 120.0
#: How much earlier than a continuation's marker its crash may be journalled and still be its own (clocks of two
#: processes read at about the same moment).
CRASH_SLACK = 5.0


def turn_roots(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The one rule for which interrupted turn an event belongs to: ``{turn_id: the turn_id of its turn}``.

    A journal ``turn_id`` names one *run* (home + session + the marker's ``started_at``); every continuation
    Hermes or the tray starts writes a new ``started_at``. A person thinks of the turn, across its
    continuations (attempt 1, 2, …), so a run belongs to the turn it continues:

    * a ``continuing`` event (the tray is about to submit its note; the marker it keeps for that run) is
      recorded under the continuation's new ``started_at`` and names the run it continues
      (``original_started_at``);
    * a run whose marker counts ``attempts`` = *n* ≥ 1 with no such link (Hermes continued the turn itself, as
      a backend with auto-continue does) continues the run of the same session whose continuation *n* the
      tray started (``dispatched`` with ``attempt`` *n*) last before it began.

    Runs with neither are turns of their own (a first interruption, a configuration change). Chains are
    followed to their first run; a cycle (a hand-edited journal) stops where it would repeat."""
    runs: dict[str, dict[str, Any]] = {}
    parent: dict[str, str] = {}
    for ev in events:
        tid = str(ev.get("turn_id") or "")
        if not tid or ev.get("event") == CONFIG_CHANGED:
            continue
        run = runs.setdefault(tid, {"home": ev.get("home"), "key": ev.get("session_key"),
                                    "started": ev.get("started_at"), "attempts": None, "dispatched": []})
        attempts = _attempts_key(ev.get("attempts"))
        if attempts is not None and ev.get("event") != "continuing":
            run["attempts"] = attempts
        if ev.get("event") == "dispatched":
            n, at = _attempts_key(ev.get("attempt")), json_number(ev.get("created_at"))
            if n is not None and at is not None:
                run["dispatched"].append((n, at))
        original = json_number(ev.get("original_started_at"))
        if ev.get("event") == "continuing" and original is not None:
            home, key = ev.get("home"), ev.get("session_key")
            if isinstance(home, str) and isinstance(key, str):
                up = _turn_id(home, key, original)
                if up != tid:
                    parent[tid] = up
    by_session: dict[tuple[Any, Any], list[str]] = {}
    for tid, run in runs.items():
        by_session.setdefault((run["home"], run["key"]), []).append(tid)
    for tid, run in runs.items():
        n, started = run["attempts"], run["started"]
        if tid in parent or not n or not isinstance(started, (int, float)) or isinstance(started, bool):
            continue
        best: tuple[float, str] | None = None
        for other in by_session[(run["home"], run["key"])]:
            if other == tid:
                continue
            for attempt, at in runs[other]["dispatched"]:
                if attempt == n and at <= started + DISPATCH_SLACK and (best is None or at > best[0]):
                    best = (at, other)
        if best is not None:
            parent[tid] = best[1]
    roots: dict[str, str] = {}
    for tid in runs:
        seen = [tid]
        step = parent.get(tid)
        while step is not None and step not in seen:
            seen.append(step)
            step = parent.get(step)
        roots[tid] = seen[-1]
    return roots


def default_journal() -> DecisionJournal:
    """The journal in the current ``decision_journal_dir()`` (re-resolved, so env overrides apply)."""
    global _DEFAULT
    directory = paths.decision_journal_dir()
    if _DEFAULT is None or _DEFAULT.directory != directory:
        _DEFAULT = DecisionJournal(directory)
    return _DEFAULT


_DEFAULT: DecisionJournal | None = None


def record(event: str, *, home: Path | str, session_key: str, **fields: Any) -> dict[str, Any]:
    """Record a decision in the default journal (see :meth:`DecisionJournal.record`)."""
    return default_journal().record(event, home=home, session_key=session_key, **fields)


def record_config_change(*, home: Path | str | None, key: str, old: Any, new: Any, by: str, **fields: Any) -> dict[str, Any]:
    """Record a configuration change in the default journal (see :meth:`DecisionJournal.record_config_change`)."""
    return default_journal().record_config_change(home=home, key=key, old=old, new=new, by=by, **fields)


def history(limit: int = 200, **filters: Any) -> list[dict[str, Any]]:
    return default_journal().history(limit, **filters)


def has_answered(home: Path | str, session_key: str, started_at: float | int | None) -> bool:
    return default_journal().has_answered(home, session_key, started_at)


def was_asked(home: Path | str, session_key: str, started_at: float | int | None) -> bool:
    return default_journal().was_asked(home, session_key, started_at)


def turn_status(home: Path | str, session_key: str, started_at: float | int | None) -> str | None:
    return default_journal().turn_status(home, session_key, started_at)
