"""Watch Hermes homes for marker and journal changes with ``QFileSystemWatcher``.

A directory that does not exist yet (``desktop/`` appears with a home's first turn) is watched through its
nearest existing parent, and picked up when that changes. A path that cannot be looked at is not watched, and a
change re-examines only the planned paths it concerns: one home's (possibly hanging) drive never touches another.

Under a storm (thousands of changes a second) the first change is reported at once; for :data:`BURST_MS` after it
the paths it concerns are not watched, then watched again, and one more change is reported if any of them differs
(inode, mtime, size). Handling every change was most of the helper's CPU under a storm (``tests/bench/bench_storm.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

BURST_MS = 250

_Signature = dict[Path, "tuple[int, int, int] | None"]


@dataclass
class _Burst:
    """The planned paths one reported change concerns, unwatched until :data:`BURST_MS` is over."""

    concerned: list[Path]
    began: _Signature
    targets: dict[Path, str | None]
    paused: set[str]
    number: int  # which burst: a timer of an earlier one that ended meanwhile does nothing


class HomeWatcher(QObject):
    """Emits ``changed(path)`` for any change under the planned directories (and files)."""

    changed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(self._on_change)
        self._watcher.fileChanged.connect(self._on_change)
        self._dirs: list[Path] = []
        self._files: list[Path] = []
        self._target: dict[Path, str | None] = {}  # planned path -> the path watched for it (None: nothing)
        self._bursts: dict[str, _Burst] = {}  # by the path whose change began it
        self._burst_count = 0

    def set_plan(self, dirs: Iterable[Path], files: Iterable[Path] = ()) -> None:
        """Directories (existing or not) and files to follow; replaces the previous plan."""
        self._dirs = sorted({Path(d) for d in dirs})
        self._files = sorted({Path(f) for f in files})
        self._target = {}
        self._apply()

    def stop(self) -> None:
        """No more reports (the detector stops): bursts in progress end here."""
        self._bursts.clear()

    def watched_paths(self) -> set[str]:
        return set(self._watcher.directories()) | set(self._watcher.files())

    def _planned(self) -> list[tuple[Path, bool]]:
        return [(d, False) for d in self._dirs] + [(f, True) for f in self._files]

    def _target_of(self, planned: Path, is_file: bool) -> str | None:
        """What stands for a planned path: itself when it is there, else (a dir) its nearest existing parent."""
        if is_file:
            return str(planned) if _is(planned, file=True) else None
        probe = planned
        while not _is(probe):  # nearest existing ancestor stands in for a missing dir
            if probe.parent == probe:
                return None
            probe = probe.parent
        return str(probe)

    def _apply(self, near: str | None = None) -> None:
        """Re-examine the plan (with ``near``: only the planned paths a change at ``near`` concerns) and
        watch what stands for it, but for what a burst holds unwatched."""
        for planned, is_file in self._planned():
            if near is None or planned not in self._target or _concerns(near, planned, self._target[planned]):
                self._target[planned] = self._target_of(planned, is_file)
        paused = set().union(*(b.paused for b in self._bursts.values())) if self._bursts else set()
        wanted = {t for t in self._target.values() if t is not None} - paused
        current = self.watched_paths()
        stale = sorted(current - wanted - paused)
        if stale:
            self._watcher.removePaths(stale)
        fresh = sorted(wanted - current)
        if fresh:
            self._watcher.addPaths(fresh)

    def _on_change(self, path: str) -> None:
        """Report changes in planned dirs/files; a stand-in parent only re-applies the plan. A stand-in (the
        nearest existing parent of a missing planned dir, often the home itself, where ``state.db`` churns)
        reports only when a planned dir appeared under it."""
        p = Path(path)
        stand_in = any(t == path and planned != p for planned, t in self._target.items())
        if (p in self._target) and not stand_in:
            self._begin_burst(path)
            return
        before = self.watched_paths()
        self._apply(near=path)
        if self.watched_paths() != before:
            self._begin_burst(path)

    def _begin_burst(self, path: str) -> None:
        """Report ``path`` now; what it concerns is not watched until the burst ends."""
        concerned = [planned for planned, t in self._target.items() if _concerns(path, planned, t)]
        targets = {planned: self._target.get(planned) for planned in concerned}
        paused = {t for t in targets.values() if t is not None} & self.watched_paths()
        if paused:
            self._watcher.removePaths(sorted(paused))
        self._burst_count += 1
        number = self._burst_count
        self._bursts[path] = _Burst(concerned, _signature(concerned), targets, paused, number)
        QTimer.singleShot(BURST_MS, self, lambda: self._end_burst(path, number))
        self.changed.emit(path)

    def _end_burst(self, path: str, number: int) -> None:
        """Watch its paths again (a file replaced by rename: its new inode) and report one change when any of
        them differs from the burst's start."""
        burst = self._bursts.get(path)
        if burst is None or burst.number != number:
            return
        del self._bursts[path]
        self._apply(near=path)
        now = _signature(burst.concerned)
        changed = sorted(str(p) for p in burst.concerned if now.get(p) != burst.began.get(p))
        moved = any(self._target.get(p) != t for p, t in burst.targets.items())
        if changed or moved:
            # the path is what the detector reads the reason from: "profiles" makes it look for new homes
            self._begin_burst(next((c for c in changed if os.path.basename(c) == "profiles"),
                                   changed[0] if changed else path))


def _signature(paths: Iterable[Path]) -> _Signature:
    out: _Signature = {}
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            out[p] = None
        else:
            out[p] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def _is(path: Path, *, file: bool = False) -> bool:
    """``is_dir`` / ``is_file`` that answers False for a path that cannot be looked at (no permission, a name
    too long, a broken drive) instead of raising: such a path is not watched."""
    try:
        return path.is_file() if file else path.is_dir()
    except (OSError, ValueError):
        return False


def _concerns(near: str, planned: Path, target: str | None) -> bool:
    """Does a change at ``near`` concern ``planned`` (watched through ``target``)? Itself, its stand-in, or a
    path on the way between them (a directory created or removed there)."""
    if target == near or str(planned) == near:
        return True
    p = Path(near)
    return planned.is_relative_to(p) or (target is not None and p.is_relative_to(target) and planned.is_relative_to(target))
