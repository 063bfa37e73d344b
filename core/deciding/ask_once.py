"""Ask at most once per interrupted turn: which turns to ask about, skip again or resume on their own.

Every scan goes to :class:`AskOnce`, which answers with a :class:`Review` by the tray's mode and what the
ledger knows (docs/architecture.md, step 4). An unreadable ledger counts as asked: never act on a guess. A
skipped turn that reappears is skipped again, silently; a turn whose marker only flickers is never asked twice
by this process; a note that reached nobody is asked again after :data:`UNSHOWN_RETRY_SECONDS`; a snooze that
lapsed while the turn stopped waiting is reported in ``lapsed``, once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.stores.ledger import NOTHING, UNREADABLE, Ledger, TurnStatus
from hermes_tray_core.stores.ledger import ledger as default_ledger
from hermes_tray_core.turn import TurnId, TurnKey
from hermes_tray_core.vocab import Event, Mode, TurnSource, Verdict

if TYPE_CHECKING:  # the tray's first phase (its icon) imports turn_key; the scanner comes with the first scan
    from hermes_tray_core.deciding.records import TurnRecord

__all__ = ["UNSHOWN_RETRY_SECONDS", "AskOnce", "Review", "record_notified", "snoozed_until", "turn_key", "waiting"]

log = logging.getLogger(__name__)

UNSHOWN_RETRY_SECONDS = 30.0  # a turn note that reached nobody is tried again after this


def turn_key(home: Path | str, session_key: str) -> TurnKey:
    """The key a session's waiting turn goes by, named from outside a scan."""
    return TurnKey.of(home, session_key)


def waiting(records: Iterable[TurnRecord], *, running: Iterable[TurnKey] = ()) -> dict[TurnKey, TurnRecord]:
    """The turns that wait for an answer: actionable desktop turns the tray is not running now."""
    busy = set(running)
    return {r.turn.id: r for r in records
            if r.verdict == Verdict.ACTIONABLE and r.source == TurnSource.DESKTOP and r.turn.id not in busy}


def snoozed_until(known: TurnStatus) -> float | None:
    """When a turn's snooze ends, while it holds (nobody was asked since it was set)."""
    snooze = known.snooze
    return snooze[0] if snooze is not None and not snooze[1] else None


def _run(i: TurnId) -> TurnId:
    """The interruption whatever its attempt count reads (a flicker may rewrite it)."""
    return i._replace(attempt=0)


@dataclass
class Review:
    """What to do after a scan, about turns new to this process's attention."""

    ask: list[TurnRecord] = field(default_factory=list)  # notify and wait for the user
    remind: list[TurnRecord] = field(default_factory=list)  # their snooze ended: asked again, once, as a reminder
    resume: list[TurnKey] = field(default_factory=list)  # auto mode: continue these now (turn keys)
    declined: list[TurnKey] = field(default_factory=list)  # auto mode: not continued, asked or answered before
    reskip: list[tuple[TurnKey, TurnRecord]] = field(default_factory=list)  # skipped before and back: skip again
    replaced: set[TurnKey] = field(default_factory=set)  # a newer interruption replaced what a note shows
    gone: set[TurnKey] = field(default_factory=set)  # no longer waiting (settled here or elsewhere)
    snoozed: dict[TurnKey, float] = field(default_factory=dict)  # waiting, snoozed: until when (wall clock)
    # snoozed turns whose time came while they were no longer waiting (stale, exhausted, …): not asked about;
    # the shell lists them with their verdict and reason
    lapsed: list[TurnRecord] = field(default_factory=list)


class AskOnce:
    """Remembers, for one process, which interruptions it has looked at; the ledger does across runs."""

    def __init__(self, ledger: Callable[[], Ledger] | None = None, *,
                 clock: Callable[[], float] = time.monotonic, retry_seconds: float = UNSHOWN_RETRY_SECONDS,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self._ledger = ledger or default_ledger
        self.clock = clock
        self.wall_clock = wall_clock  # a snooze's ``until`` is a wall-clock time (it outlives the process)
        self.retry_seconds = retry_seconds
        self._seen: set[TurnId] = set()
        self._waiting: dict[TurnKey, TurnId] = {}
        self._notified: set[TurnId] = set()  # recorded as notified by this process
        self._unshown: set[TurnId] = set()  # notes that reached nobody: ask again…
        self._unshown_retry = 0.0  # …from this clock() on
        self._asked: set[TurnId] = set()  # asked about by this process (or found asked), by _run: never again
        self._woken: set[TurnId] = set()  # reminded by this process when its snooze ended, by _run: never again
        self._snoozed: set[TurnId] = set()  # waiting and snoozed: read again at every review until its time
        self._lapsed: set[TurnId] = set()  # reported in ``Review.lapsed`` already

    # --- a scan ---------------------------------------------------------------------------------
    def review(self, pending: Mapping[TurnKey, TurnRecord], mode: str, *, others: Iterable[TurnRecord] = ()) -> Review:
        """What the tray does about ``pending`` in ``mode``; ``others``: the scan's other records."""
        out = Review()
        now = self.wall_clock()
        before = self._waiting
        # a turn that left the list and comes back is looked at afresh (skipped again, or not re-asked)
        for key in before.keys() - pending.keys():
            self._seen.discard(before[key])
            out.gone.add(key)
        now_idents = {k: r.turn.ident for k, r in pending.items()}
        out.replaced = {k for k, i in now_idents.items() if k in before and before[k] != i}
        self._waiting = now_idents
        self._notified &= set(now_idents.values())
        self._snoozed &= set(now_idents.values())
        if self._unshown and self.clock() >= self._unshown_retry:
            self._seen -= self._unshown
            self._asked -= {_run(i) for i in self._unshown}
            self._woken -= {_run(i) for i in self._unshown}
            self._unshown.clear()
        looking = {k: i for k, i in now_idents.items() if i not in self._seen or i in self._snoozed}
        lapsing = [r for r in others if r.source == TurnSource.DESKTOP and r.turn.ident not in self._lapsed
                   and r.turn.ident not in self._waiting.values()]
        known = self._statuses([*looking.values(), *(r.turn.ident for r in lapsing)])
        for key, i in looking.items():
            st = known.get(i, NOTHING) if known is not None else UNREADABLE
            self._seen.add(i)
            if not self._snooze(key, pending[key], st, mode, now, out):
                self._answer(key, pending[key], st, mode, out)
        for rec in lapsing:  # snoozed turns whose time came while they were not waiting any more: told once
            until = snoozed_until(known.get(rec.turn.ident, NOTHING)) if known is not None else None
            if until is not None and now >= until:
                self._lapsed.add(rec.turn.ident)
                out.lapsed.append(rec)
        return out

    def _snooze(self, key: TurnKey, rec: TurnRecord, st: TurnStatus, mode: str, now: float, out: Review) -> bool:
        """A snoozed turn: held until its time, then reminded of once, never continued (False: none)."""
        i = rec.turn.ident
        until = snoozed_until(st) if mode != Mode.LIST and not st.skipped else None
        if until is None:
            self._snoozed.discard(i)
            return False
        self._snoozed.add(i)
        if now < until:
            out.snoozed[key] = until
            return True
        self._snoozed.discard(i)
        if _run(i) not in self._woken:
            self._woken.add(_run(i))
            self._notified.discard(i)
            out.remind.append(rec)
        return True

    def _answer(self, key: TurnKey, rec: TurnRecord, st: TurnStatus, mode: str, out: Review) -> None:
        i = rec.turn.ident
        if st.skipped:
            out.reskip.append((key, rec))
        elif mode == Mode.AUTO:
            if st.asked or not st.readable:
                log.info("auto mode: not resuming %s/%s: the ledger has it asked or answered", rec.profile,
                         rec.session_key)
                out.declined.append(key)
            else:
                out.resume.append(key)
        elif mode == Mode.ASK and _run(i) not in self._asked:
            self._asked.add(_run(i))  # asked now, or found asked: a flicker asks nothing
            if not st.asked:
                out.ask.append(rec)

    def _statuses(self, turns: list[TurnId]) -> dict[TurnId, TurnStatus] | None:
        """What the ledger knows of ``turns``; None when it cannot be read."""
        if not turns:
            return {}
        with bookkeeping(log, "cannot read the tray's ledger"):
            return self._ledger().statuses(turns)
        return None

    # --- notifications --------------------------------------------------------------------------
    def not_announced(self, turns: Iterable[TurnRecord]) -> None:
        """Announcing failed: never "seen" without having been asked; the next review asks again."""
        idents = {t.turn.ident for t in turns}
        self._seen -= idents
        self._asked -= {_run(i) for i in idents}
        self._woken -= {_run(i) for i in idents}

    def delivered(self, turns: Sequence[TurnRecord], ok: bool) -> list[TurnRecord]:
        """A note about ``turns`` reached the user (``ok``) or nobody; those to record as ``notified``."""
        if not ok:
            self._unshown |= {t.turn.ident for t in turns} - self._notified
            self._unshown_retry = self.clock() + self.retry_seconds
            return []
        new = [t for t in turns if t.turn.ident not in self._notified]
        self._notified |= {t.turn.ident for t in new}
        return new

    def ledger(self) -> Ledger:
        """The ledger as configured now (resolve it before handing a write to another thread)."""
        return self._ledger()


def record_notified(turns: Sequence[TurnRecord], *, via: str, ledger: Ledger | None = None) -> None:
    """Record ``notified`` for every turn in one transaction (a storm of 10,000 is one write): off an event
    loop's thread, with the ledger resolved when asked. A failure costs at most one more question after a
    restart."""
    target = ledger or default_ledger()
    rows = [(Event.NOTIFIED, t.turn.ident, {"profile": t.profile, "via": via}) for t in turns]
    if not rows:
        return
    # one hostile key never costs the others their record: after a failed batch, one by one
    with bookkeeping(log, "could not record 'notified' for %d turns at once; one by one", len(rows)):
        target.record_many(rows)
        return
    for event, turn, fields in rows:
        with bookkeeping(log, "could not record 'notified' for %s", turn.key):
            target.record(event, turn, **fields)
