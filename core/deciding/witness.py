"""A witness at the death of a turn's Hermes: when did it end, and did the kernel end it for lack of memory?

The tray and the helper watch every live marker writer for its exit (``hermes_tray/watch/pidwatch.py``). After
each scan :meth:`ExitWitness.look` notes how to tell later whether the out-of-memory killer ended *that*
process (:mod:`hermes_tray_core.process.oom`); at its exit :meth:`ExitWitness.exited` asks again and records
``stopped``, at that moment, for each turn it left behind (with ``cause: out-of-memory`` and the fact when the
kernel named it). A death nobody watched has no witness: its moment and cause stay unknown, as does a cause
where neither the kernel's log nor a memory group of its own can be read. With no live writer nothing is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.stores.ledger import Ledger, ledger
from hermes_tray_core.turn import TurnId
from hermes_tray_core.vocab import Event, StopCause, TurnSource, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.deciding.records import TurnRecord
    from hermes_tray_core.process.oom import KernelLog, MemoryGroup

__all__ = ["ExitWitness"]

logger = get_logger(__name__)

class _Watched(NamedTuple):
    log_mark: int | None  # how far the kernel's log was read when the process was seen alive
    group: MemoryGroup | None  # its memory group and that group's kill count then
    turns: list[TurnId]


class ExitWitness:
    """What the detector thread saw of each live writer (``kernel_log``, ``memory_group``: seams)."""

    def __init__(self, ledgers: Callable[[], Ledger] = ledger, *,
                 kernel_log: KernelLog | None = None,
                 memory_group: Callable[[int], MemoryGroup | None] | None = None) -> None:
        self._ledger = ledgers
        self._log = kernel_log
        self._group = memory_group
        self._seen: dict[int, _Watched] = {}

    def _facts(self) -> tuple[KernelLog, Callable[[int], MemoryGroup | None]]:
        if self._log is None or self._group is None:
            from hermes_tray_core.process import oom

            self._log = self._log or oom.KernelLog()
            self._group = self._group or oom.memory_group
        return self._log, self._group

    def look(self, records: Iterable[TurnRecord]) -> None:
        """After a scan: the live writers and their turns, each read once, when first seen alive."""
        turns: dict[int, list[TurnId]] = {}
        for r in records:
            pid = r.turn.marker.writer_pid
            if r.writer != WriterState.ALIVE or r.source != TurnSource.DESKTOP or pid is None:
                continue
            turns.setdefault(pid, []).append(r.turn.ident)
        if not turns:
            self._seen.clear()
            return
        log, group = self._facts()
        mark = log.mark() if any(pid not in self._seen for pid in turns) else None
        seen = {}
        for pid, t in turns.items():
            old = self._seen.get(pid)
            seen[pid] = old._replace(turns=t) if old is not None else _Watched(mark, group(pid), t)
        self._seen = seen

    def exited(self, pid: int) -> StopCause | None:
        """The writer ``pid`` exited: record ``stopped`` for each turn it left behind; ``out-of-memory`` when
        the kernel ended that very process, else None."""
        watched = self._seen.pop(pid, None)
        if watched is None:
            return None
        log, _group = self._facts()
        fact = log.killed(pid, watched.log_mark) or (watched.group.fact(pid) if watched.group is not None else None)
        fields: dict[str, Any] = {"pid": pid, **({"cause": str(StopCause.OUT_OF_MEMORY), "fact": fact} if fact else {})}
        rows = [(Event.STOPPED, turn, fields) for turn in watched.turns if _left_behind(turn, pid)]
        if rows:
            with bookkeeping(logger, "could not record the end of pid %s", pid):  # the watch goes on
                self._ledger().record_many(rows)
        return StopCause.OUT_OF_MEMORY if fact and rows else None


def _left_behind(turn: TurnId, pid: int) -> bool:
    """Is the turn's marker still there, written by ``pid``?"""
    from hermes_tray_core.markers.store import MarkerStore

    with bookkeeping(logger, "cannot read the markers of %s", turn.home):
        entry = MarkerStore(turn.home).list().get(turn.key)
        return isinstance(entry, dict) and entry.get("writer_pid") == pid and entry.get("started_at") == turn.started_at
    return False
