"""Ask at most once per interrupted turn: which turns to ask about, re-skip or resume on their own.

The tray (and the headless helper) hands every scan to :class:`AskOnce`; it answers with a
:class:`Review` saying what to do about each waiting turn, by the tray's mode and the decision
journal (``hermes_tray_core.stores.decisions``), which remembers across restarts and processes:

* a turn already asked about, or decided (by this process before a restart, the helper, the CLI)
  is not asked again; in ``auto`` mode it is not resumed either (an unreadable journal counts as
  "asked": never act on a guess);
* a turn journalled as skipped that reappears (a non-locking writer resurrected it) is skipped
  again, silently;
* a turn that leaves the list and comes back is looked at afresh; a *new* interruption of the same
  session (new start or attempt count) replaces the old one and is a new question; but a turn this
  process asked about (same home, session key and ``started_at``) is never asked again while its
  marker only flickers (a writer storm rewriting the file: it leaves and comes back many times a
  second, before its ``notified`` is even journalled);
* a notification that reached nobody leaves its turns unasked: a review after
  :data:`UNSHOWN_RETRY_SECONDS` asks again;
* a turn the user snoozed (``snoozed`` in the journal, :mod:`hermes_tray_core.deciding.snooze`) is not asked
  about before its ``until`` (by the wall clock, ``wall_clock``), then asked exactly once — in ``auto`` mode too:
  a snooze never continues anything. One that is no longer waiting when its time comes (gone stale, say) is
  not asked: the review lists it in ``lapsed``, with its verdict and reason, once per process.

A turn counts as asked once its notification was delivered (:meth:`AskOnce.delivered` journals
``notified``), never before. Qt-free: tested without an event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.turn import TurnKey
from hermes_tray_core.vocab import Mode, TurnSource, Verdict

if TYPE_CHECKING:  # the tray's first phase (its icon) imports turn_key; the scanner comes with the first scan
    from hermes_tray_core.deciding.records import TurnRecord

__all__ = [
    "UNSHOWN_RETRY_SECONDS",
    "AskOnce",
    "Review",
    "TurnIdent",
    "TurnJournal",
    "ident",
    "turn_key",
    "waiting",
]

log = logging.getLogger(__name__)
_A = TypeVar("_A")

UNSHOWN_RETRY_SECONDS = 30.0  # a turn note that reached nobody is tried again after this

TurnIdent = tuple[str, str, float, int]  # (home, session key, started_at, attempts): one interruption
AskedTurn = tuple[str, str, float]  # (home, session key, started_at): a turn asked about once, whatever flickers


class TurnJournal(Protocol):
    """What ask-once needs of the decision journal (``decisions.DecisionJournal`` has it)."""

    def events_for(self, home: Path | str, session_key: str, started_at: float | int | None) -> list[str]: ...

    def was_asked(self, home: Path | str, session_key: str, started_at: float | int | None) -> bool: ...

    def is_tombstoned(self, home: Path | str, session_key: str, started_at: float | int | None,
                      attempts: object) -> bool: ...

    def snooze(self, home: Path | str, session_key: str,
               started_at: float | int | None) -> tuple[float, bool] | None: ...

    def record(self, event: str, *, home: Path | str, session_key: str, started_at: float | int | None = None,
               **fields: object) -> object: ...

    def record_many(self, decisions: Sequence[Mapping[str, object]]) -> object: ...


def turn_key(home: Path | str, session_key: str) -> TurnKey:
    """The key one session's waiting turn goes by in the tray (menus, windows, notifications), for a turn named
    by its home and session from outside a scan (a record has its own: ``record.turn.id``)."""
    return TurnKey.of(home, session_key)


def ident(record: TurnRecord) -> TurnIdent:
    """One interrupted turn: a new interruption of the same session has a new start or attempt count."""
    return (str(record.home), record.session_key, record.started_at, record.attempts)


def waiting(records: Iterable[TurnRecord], *, running: Iterable[TurnKey] = ()) -> dict[TurnKey, TurnRecord]:
    """The turns that wait for an answer: actionable desktop turns the tray is not running now."""
    busy = set(running)
    out: dict[TurnKey, TurnRecord] = {}
    for r in records:
        key = r.turn.id
        if r.verdict == Verdict.ACTIONABLE and r.source == TurnSource.DESKTOP and key not in busy:
            out[key] = r
    return out


@dataclass
class Review:
    """What to do after a scan: each list holds turns that are new to this process's attention."""

    ask: list[TurnRecord] = field(default_factory=list)  # notify and wait for the user
    resume: list[TurnKey] = field(default_factory=list)  # auto mode: continue these now (turn keys)
    declined: list[TurnKey] = field(default_factory=list)  # auto mode: not continued, asked or answered before
    reskip: list[tuple[TurnKey, TurnRecord]] = field(default_factory=list)  # skipped before and back: skip again
    replaced: set[TurnKey] = field(default_factory=set)  # a newer interruption replaced what a note shows
    gone: set[TurnKey] = field(default_factory=set)  # no longer waiting (settled here or elsewhere)
    snoozed: list[TurnRecord] = field(default_factory=list)  # waiting, but the user asked to be reminded later
    # snoozed turns whose time came while they were no longer waiting (stale, exhausted, …): not asked about;
    # the shell lists them with their verdict and reason
    lapsed: list[TurnRecord] = field(default_factory=list)


class AskOnce:
    """Remembers, for one process, which interruptions it has looked at; the journal does across runs."""

    def __init__(
        self,
        journal: Callable[[], TurnJournal] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        retry_seconds: float = UNSHOWN_RETRY_SECONDS,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal = journal or _default_journal
        self.clock = clock
        self.wall_clock = wall_clock  # a snooze's ``until`` is a wall-clock time (it outlives the process)
        self.retry_seconds = retry_seconds
        self._seen: set[TurnIdent] = set()
        self._waiting: dict[TurnKey, TurnIdent] = {}
        self._notified: set[TurnIdent] = set()  # journalled as notified by this process
        self._unshown: set[TurnIdent] = set()  # notes that reached nobody: ask again…
        self._unshown_retry = 0.0  # …from this clock() on
        self._snoozed: dict[TurnIdent, float] = {}  # seen while snoozed: looked at again from ``until`` on
        self._lapsed: set[TurnIdent] = set()  # reported in ``Review.lapsed`` already
        self._asked: set[AskedTurn] = set()  # asked about by this process (or found asked): never again
        self._woken: set[AskedTurn] = set()  # asked again by this process when its snooze ended: never again

    # --- the journal ----------------------------------------------------------------------------
    def asked_before(self, record: TurnRecord, *, unreadable: bool, journal: TurnJournal | None = None) -> bool:
        """Notified or decided already; ``unreadable`` is the answer when the journal cannot be read."""
        return self._read(record, journal, unreadable,
                          lambda j: j.was_asked(record.turn.home, record.session_key, record.started_at))

    def skipped_before(self, record: TurnRecord, journal: TurnJournal | None = None) -> bool:
        """This very turn was skipped — the tombstone's rule (session key + ``started_at`` + ``attempts``, as
        :func:`core.continuing.claim.tombstoned` applies it to raw entries): it reappearing means a writer
        resurrected it. A later attempt of the same run is a new question, not a skip to repeat."""
        return self._read(record, journal, False, lambda j: j.is_tombstoned(
            record.turn.home, record.session_key, record.started_at, record.attempts))

    def snoozed(self, record: TurnRecord, journal: TurnJournal | None = None) -> tuple[float, bool] | None:
        """The turn's latest snooze ``(until, asked since)``, or None (never snoozed, or the journal cannot be
        read: then the other rules decide, and they never continue an asked turn)."""
        return self._read(record, journal, None,
                          lambda j: j.snooze(record.turn.home, record.session_key, record.started_at))

    def _read(self, record: TurnRecord, journal: TurnJournal | None, unreadable: _A,
              ask: Callable[[TurnJournal], _A]) -> _A:
        """``ask`` the journal about ``record``; ``unreadable`` is the answer when it cannot be read."""
        with bookkeeping(log, "cannot read the decision journal for %s", record.session_key):
            return ask(journal or self._journal())
        return unreadable

    def _open(self) -> TurnJournal | None:
        """The journal this review reads (None when it cannot be opened: each rule then has its answer)."""
        with bookkeeping(log, "cannot open the decision journal"):
            return self._journal()
        return None

    # --- a scan ---------------------------------------------------------------------------------
    def review(self, pending: Mapping[TurnKey, TurnRecord], mode: str, *, others: Iterable[TurnRecord] = ()) -> Review:
        """Decide what the tray does about ``pending`` (from :func:`waiting`) in ``mode`` (ask|auto|list).
        ``others``: the scan's other records, for the snoozed turns that stopped waiting (``Review.lapsed``)."""
        out = Review()
        now = self.wall_clock()
        before = self._waiting
        # a turn that left the list and comes back (a non-locking writer resurrected a skipped
        # marker) is looked at afresh: skipped again, or — if it was asked about — not re-asked
        for key in before.keys() - pending.keys():
            self._seen.discard(before[key])
            out.gone.add(key)
        now_idents = {k: ident(r) for k, r in pending.items()}
        out.replaced = {k for k, i in now_idents.items() if k in before and before[k] != i}
        self._waiting = now_idents
        self._notified &= set(now_idents.values())
        if self._unshown and self.clock() >= self._unshown_retry:
            self._seen -= self._unshown
            self._asked -= {_asked(i) for i in self._unshown}
            self._woken -= {_asked(i) for i in self._unshown}
            self._unshown.clear()
        for i, until in list(self._snoozed.items()):  # a snooze whose time came: look at that turn afresh
            if now >= until:
                del self._snoozed[i]
                self._seen.discard(i)
        journal: TurnJournal | None = None  # resolved once a review (naming it asks platformdirs)
        for key, rec in pending.items():
            i = now_idents[key]
            if i in self._seen:
                if i in self._snoozed:
                    out.snoozed.append(rec)
                continue
            self._seen.add(i)
            if journal is None:
                journal = self._open()
            snooze = self.snoozed(rec, journal) if mode != Mode.LIST else None
            if self.skipped_before(rec, journal):
                out.reskip.append((key, rec))
            elif snooze is not None and not snooze[1]:
                if now < snooze[0]:
                    self._snoozed[i] = snooze[0]
                    out.snoozed.append(rec)
                elif _asked(i) not in self._woken:  # its time came: asked exactly once (delivered() journals
                    self._woken.add(_asked(i))  # it), never continued; a flicker before that asks nothing
                    out.ask.append(rec)
            elif mode == Mode.AUTO:
                # never continue a turn someone already asked about, decided, or that ran to an end
                if self.asked_before(rec, unreadable=True, journal=journal):
                    log.info("auto mode: not resuming %s/%s: the journal has it asked or answered",
                             rec.profile, rec.session_key)
                    out.declined.append(key)
                else:
                    out.resume.append(key)
            elif mode == Mode.ASK and _asked(i) not in self._asked:
                self._asked.add(_asked(i))  # asked now, or found asked in the journal: a flicker asks nothing
                if not self.asked_before(rec, unreadable=False, journal=journal):
                    out.ask.append(rec)
        self._lapse(out, pending, others, now, journal)
        return out

    def _lapse(self, out: Review, pending: Mapping[TurnKey, TurnRecord], others: Iterable[TurnRecord], now: float,
               journal: TurnJournal | None) -> None:
        """Snoozed turns whose time came while they were not waiting any more: told once, never asked about."""
        waiting_now = {ident(r) for r in pending.values()}
        for rec in others:
            i = ident(rec)
            if rec.source != TurnSource.DESKTOP or i in waiting_now or i in self._lapsed:
                continue
            if journal is None and (journal := self._open()) is None:
                return
            snooze = self.snoozed(rec, journal)
            if snooze is not None and not snooze[1] and now >= snooze[0]:
                self._lapsed.add(i)
                out.lapsed.append(rec)

    # --- notifications --------------------------------------------------------------------------
    def not_announced(self, turns: Iterable[TurnRecord]) -> None:
        """Announcing failed: never "seen" without having been asked; the next review asks again."""
        idents = {ident(t) for t in turns}
        self._seen -= idents
        self._asked -= {_asked(i) for i in idents}
        self._woken -= {_asked(i) for i in idents}

    def delivered(self, turns: Sequence[TurnRecord], ok: bool) -> list[TurnRecord]:
        """A note about ``turns`` reached the user (``ok``) or went nowhere (ask again after the retry
        delay). Returns the turns to journal as ``notified`` (:meth:`journal_notified`), each once."""
        if not ok:
            self._unshown |= {ident(t) for t in turns} - self._notified
            self._unshown_retry = self.clock() + self.retry_seconds
            return []
        new = [t for t in turns if ident(t) not in self._notified]
        self._notified |= {ident(t) for t in new}
        return new

    def journal(self) -> TurnJournal:
        """The decision journal as configured now (resolve it before handing a write to another thread)."""
        return self._journal()

    def journal_notified(self, turns: Sequence[TurnRecord], *, via: str, journal: TurnJournal | None = None) -> None:
        """Journal ``notified`` in ``journal`` (default: :meth:`journal`), every turn in one write (a storm of
        10,000 is one append and one fsync, not 10,000). A durable append: callers with an event loop run
        it off that thread, passing the journal they resolved when they asked.
        Bookkeeping: a failure is logged; a later restart may then ask once more, nothing worse."""
        target = journal if journal is not None else self._journal()
        rows = [{"event": "notified", "home": t.turn.home, "session_key": t.session_key, "started_at": t.started_at,
                 "profile": t.profile, "attempts": t.attempts, "via": via} for t in turns]
        if not rows:
            return
        # one hostile key never costs the others their record: after a failed batch, one by one
        with bookkeeping(log, "could not journal 'notified' for %d turns at once; one by one", len(rows)):
            target.record_many(rows)
            return
        for t in turns:
            with bookkeeping(log, "could not journal 'notified' for %s", t.session_key):
                target.record("notified", home=t.turn.home, session_key=t.session_key, started_at=t.started_at,
                              profile=t.profile, attempts=t.attempts, via=via)


def _asked(i: TurnIdent) -> AskedTurn:
    return (i[0], i[1], i[2])


def _default_journal() -> TurnJournal:
    from hermes_tray_core.stores import decisions

    return decisions.default_journal()
