"""A witness at the death of a turn's Hermes: was the kernel's out-of-memory killer at work just then?

The tray and the helper watch every live marker writer for its exit (``hermes_tray/watch/pidwatch.py``: a
pidfd on Linux, woken within a millisecond). After each scan :meth:`ExitWitness.look` keeps, for each writer
that runs a turn, the kernel's OOM-kill count as read then (:func:`hermes_tray_core.process.machine.oom_kills`);
at its exit :meth:`ExitWitness.exited` reads it again. A count that moved in between means the OOM killer
ran in that window (the time since the last scan, at most the detector's 30 s safety re-scan): the fact is
recorded in the ledger as ``stopped`` (``cause: out-of-memory``, the window and both counts) for each turn that
process ran, where ``status``, the tray and the helper read it (:mod:`hermes_tray_core.deciding.causes`).

What this does not know: which process the OOM killer chose (vmstat counts kills, it names no one); a death
nobody watched (no tray or helper running) has no witness, and its cause stays unknown. With no live writer
nothing is read: an idle tray costs nothing more.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.turn import TurnId
from hermes_tray_core.vocab import Event, StopCause, TurnSource, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.deciding.records import TurnRecord
    from hermes_tray_core.stores.ledger import Ledger

__all__ = ["ExitWitness"]

logger = get_logger(__name__)


def _default_ledger() -> Ledger:
    from hermes_tray_core.stores.ledger import ledger

    return ledger()


class ExitWitness:
    """Per process (the tray's or the helper's detector thread): the OOM-kill count last seen for each live
    writer. ``oom_kills`` and ``clock`` (monotonic) are seams for tests; ``ledger`` resolves the ledger."""

    def __init__(self, ledger: Callable[[], Ledger] | None = None, *,
                 oom_kills: Callable[[], int | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ledger = ledger or _default_ledger
        self._oom_kills = oom_kills
        self.clock = clock
        self._seen: dict[int, tuple[int | None, float, list[TurnId]]] = {}  # pid -> (count, when, its turns)

    def _count(self) -> int | None:
        if self._oom_kills is not None:
            return self._oom_kills()
        from hermes_tray_core.process.machine import oom_kills

        return oom_kills()

    def look(self, records: Iterable[TurnRecord]) -> None:
        """After a scan: the live writers and their turns, and the OOM-kill count now (read only when some
        writer lives)."""
        turns: dict[int, list[TurnId]] = {}
        for r in records:
            pid = r.turn.marker.writer_pid
            if r.writer != WriterState.ALIVE or r.source != TurnSource.DESKTOP or pid is None:
                continue
            turns.setdefault(pid, []).append(r.turn.ident)
        if not turns:
            self._seen.clear()
            return
        count, now = self._count(), self.clock()
        self._seen = {pid: (count, now, t) for pid, t in turns.items()}

    def exited(self, pid: int) -> StopCause | None:
        """The writer ``pid`` exited: ``out-of-memory`` (recorded for its turns) when the OOM-kill count
        moved since the last look at it, else None. Bookkeeping: a ledger failure is logged, never raised."""
        seen = self._seen.pop(pid, None)
        if seen is None:
            return None
        before, since, turns = seen
        after = self._count()
        if before is None or after is None or after <= before:
            return None
        window = max(1, math.ceil(self.clock() - since))
        fact = (f"the kernel's out-of-memory killer ran within {window} s of its Hermes process (pid {pid}) "
                f"ending: {after - before} kill(s), seen by hermes-tray")
        fields: dict[str, Any] = {"cause": str(StopCause.OUT_OF_MEMORY), "fact": fact, "pid": pid,
                                  "oom_kills_before": before, "oom_kills_after": after, "window_s": window}
        with bookkeeping(logger, "could not record the out-of-memory death of pid %s", pid):  # the watch goes on
            self._ledger().record_many([(Event.STOPPED, turn, fields) for turn in turns])
        return StopCause.OUT_OF_MEMORY
