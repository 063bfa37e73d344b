"""The settle window after a tray write to Hermes' marker file: put back what a stale Hermes write undoes.

Hermes writes read → change → temp file → rename, unlocked: a write that read before ours and renames after it
brings back a skipped entry, or (after a merge, :class:`Leaks`) a value our momentary first version had wrong.
We watch the file for as long as such a write can land and re-apply our change (locked, by exchange) when one
does. Hermes' read → rename, measured with the reference writer (two writers a home, 2 shared cores, 3 CPU
burners; ``tests/bench/bench_markers.py`` prints it): p50 1.6, p99 34, p99.9 64, max 96 ms;
:data:`SETTLE_SECS` is about 3x that, and each re-apply starts it again. One daemon thread a process;
``hermes-tray skip`` waits (:func:`wait`); a process that exits sooner leaves the skip's tombstone, which the
next reader honours.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from hermes_tray_core.markers import file as marker_file
from hermes_tray_core.markers.file import Entries

__all__ = ["POLL_SECS", "SETTLE_SECS", "Leaks", "guard", "reapplied", "wait"]

logger = logging.getLogger(__name__)

SETTLE_SECS = 0.25
POLL_SECS = 0.002


@dataclass
class _Guard:
    key: str
    undone: Any  # the entry value that means "our change was undone" (what we removed / replaced)
    redo: Any  # what to put instead: marker_file.ABSENT to remove, or our entry


@dataclass
class _Watch:
    store: Any
    until: float
    guards: list[_Guard] = field(default_factory=list)
    leaks: list[Leaks] = field(default_factory=list)
    last: bytes | None = None


_cond = threading.Condition()
_watches: dict[str, _Watch] = {}
_thread: threading.Thread | None = None
_reapplied = 0


def reapplied() -> int:
    """How many changes this process re-applied after a stale write (tests and benches)."""
    return _reapplied


def _watch(store: Any) -> _Watch:
    global _thread
    w = _watches.get(store._p)
    if w is None:
        w = _watches[store._p] = _Watch(store, 0.0)
    w.until = time.monotonic() + SETTLE_SECS
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_run, name="marker-settle", daemon=True)
        _thread.start()
    _cond.notify_all()
    return w


def guard(store: Any, key: str, undone: dict[str, Any], redo: Any = marker_file.ABSENT) -> None:
    """For :data:`SETTLE_SECS`: if ``key`` reads ``undone`` again, put ``redo`` back (remove by default)."""
    with _cond:
        w = _watch(store)
        w.guards = [g for g in w.guards if g.key != key] + [_Guard(key, dict(undone), redo)]


class Leaks:
    """Entries our momentarily visible version (``transient``) got wrong: ``stale`` key -> (ours, the true
    value).

    A Hermes rename between our last check and our exchange leaves ours in place until we put Hermes' back
    (two syscalls, but we can be descheduled between); a Hermes write that read it copies our stale view of
    the entries Hermes had just changed. A stale *present* value is a copy of an entry Hermes cleared (its
    records carry a fresh ``started_at``): always removed again. A stale *absence* looks like Hermes clearing
    it: restored only when the file is our transient with exactly one other entry changed (one Hermes write on
    top), never otherwise."""

    __slots__ = ("stale", "transient", "until")

    def __init__(self, transient: Entries) -> None:
        self.stale: dict[str, tuple[Any, Any]] = {}
        self.transient = transient
        self.until = 0.0

    def note(self, placed: Entries, true: Entries, exclude: frozenset[str] | set[str] = frozenset()) -> None:
        for key in placed.keys() | true.keys():
            if key in exclude:
                continue
            mine, real = placed.get(key, marker_file.ABSENT), true.get(key, marker_file.ABSENT)
            if not marker_file.same_entry(mine, real):
                self.stale.setdefault(key, (mine, real))

    def _derived(self, theirs: Entries) -> bool:
        """One Hermes write on top of our transient version: one entry differs."""
        absent = marker_file.ABSENT
        differ = (k for k in theirs.keys() | self.transient.keys()
                  if not marker_file.same_entry(theirs.get(k, absent), self.transient.get(k, absent)))
        return next(differ, None) is not None and next(differ, None) is None

    def correct(self, theirs: Entries, *, in_merge: bool = False) -> Entries:
        """``theirs`` with copied stale values put right (a new dict when changed)."""
        out = None
        derived: bool | None = True if in_merge else None
        for key, (mine, true) in self.stale.items():
            if not marker_file.same_entry(theirs.get(key, marker_file.ABSENT), mine):
                continue
            if mine is marker_file.ABSENT:
                if derived is None:
                    derived = self._derived(theirs)
                if not derived:
                    continue
            out = dict(theirs) if out is None else out
            if true is marker_file.ABSENT:
                out.pop(key, None)
            else:
                out[key] = true
        return theirs if out is None else out

    def register(self, store: Any) -> None:
        """For :data:`SETTLE_SECS` (its own window: a re-apply does not extend it), correct what ``stale``
        says."""
        if self.stale:
            with _cond:
                self.until = time.monotonic() + SETTLE_SECS
                _watch(store).leaks.append(self)


def wait(timeout: float = 5.0) -> bool:
    """Block until every settle window of this process is over. False on timeout."""
    deadline = time.monotonic() + timeout
    with _cond:
        while _watches:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _cond.wait(left)
    return True


def _fix(w: _Watch, entries: marker_file.Entries) -> marker_file.Entries | None:
    """``entries`` with undone guards re-applied and copied stale values corrected, or None."""
    out = entries
    now = time.monotonic()
    w.leaks = [leaks for leaks in w.leaks if leaks.until > now]
    for leaks in w.leaks:
        out = leaks.correct(out)
    for g in w.guards:
        if out.get(g.key) == g.undone:  # the same test as the compare-and-remove that made the change
            out = dict(out)
            if g.redo is marker_file.ABSENT:
                out.pop(g.key, None)
            else:
                out[g.key] = g.redo
    return None if out is entries else out


def _check(w: _Watch) -> bool:
    """Re-read the file; re-apply under the store's lock if a stale write undid something."""
    global _reapplied
    try:
        data, _sig = marker_file.read_file(w.store._p)
    except OSError:
        return False
    if data == w.last:
        return False
    w.last = data
    try:
        seen = marker_file.decode(data) if data is not None else {}
    except marker_file.Corrupt:
        return False
    if _fix(w, seen) is None:
        return False

    def mutate(entries: marker_file.Entries) -> tuple[marker_file.Entries | None, bool]:
        new = _fix(w, entries)
        return new, new is not None

    try:
        done = bool(w.store._modify(mutate, "re-apply"))
    except OSError:
        logger.warning("could not re-apply a change to %s undone by a stale write", w.store.path, exc_info=True)
        return False
    if done:
        _reapplied += 1
        logger.info("a stale write to %s undid a change of ours; re-applied", w.store.path)
    return done


def _run() -> None:
    while True:
        with _cond:
            while not _watches:
                _cond.wait()
            now = time.monotonic()
            for path in [p for p, w in _watches.items() if w.until <= now]:
                del _watches[path]
            if not _watches:
                _cond.notify_all()
                continue
            todo = list(_watches.values())
        for w in todo:
            try:
                redone = _check(w)
            except Exception:  # boundary: a thread's top: this window ends, the tombstone remains
                logger.warning("settle window on %s failed", w.store.path, exc_info=True)
                with _cond:
                    w.until = 0.0
                continue
            if redone:
                with _cond:
                    w.until = time.monotonic() + SETTLE_SECS  # our re-apply can itself be undone: watch again
        time.sleep(POLL_SECS)
