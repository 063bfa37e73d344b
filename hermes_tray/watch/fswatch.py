"""Watch Hermes homes for marker and journal changes with ``QFileSystemWatcher``.

A directory that does not exist yet (a fresh home gets ``desktop/`` only when its first turn
starts) is watched through its nearest existing parent; when the parent changes the plan is
re-applied, so the new directory is picked up without polling.

A writer rewriting a marker file continuously (a storm) makes thousands of changes a second. The
first change is reported at once; for :data:`BURST_MS` after it nothing is watched (no change costs
anything), then the plan is applied again (a file replaced by rename is watched afresh, a planned dir
that appeared is picked up) and, if any planned dir or file differs from when the burst began (inode,
mtime, size), one more change is reported and the next burst begins. Handling every change — the
plan re-applied each time, then even only Qt's own handling of each — was most of the helper's CPU
under a storm (``tests/bench/bench_storm.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

BURST_MS = 250


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
        self._planned: set[str] = set()  # the planned dirs and files, as the watcher names them
        self._stand_ins: set[str] = set()  # watched in place of a missing planned dir
        self._burst: dict[str, tuple[int, int, int] | None] | None = None  # the planned paths when it began
        self._burst_watched: set[str] = set()  # what was watched when it began
        self._burst_timer = QTimer(self)
        self._burst_timer.setSingleShot(True)
        self._burst_timer.setInterval(BURST_MS)
        self._burst_timer.timeout.connect(self._end_burst)

    def set_plan(self, dirs: Iterable[Path], files: Iterable[Path] = ()) -> None:
        """Directories (existing or not) and files to follow; replaces the previous plan."""
        self._dirs = sorted({Path(d) for d in dirs})
        self._files = sorted({Path(f) for f in files})
        self._planned = {str(p) for p in (*self._dirs, *self._files)}
        self._apply()

    def stop(self) -> None:
        """No more reports (the detector stops): a burst in progress ends here."""
        self._burst_timer.stop()

    def watched_paths(self) -> set[str]:
        return set(self._watcher.directories()) | set(self._watcher.files())

    def _targets(self) -> set[str]:
        wanted: set[str] = set()
        stand_ins: set[str] = set()
        for d in self._dirs:
            probe = d
            while not probe.is_dir():  # nearest existing ancestor stands in for a missing dir
                if probe.parent == probe:
                    break
                probe = probe.parent
            if probe.is_dir():
                wanted.add(str(probe))
                if probe != d:
                    stand_ins.add(str(probe))
        self._stand_ins = stand_ins
        for f in self._files:
            if f.is_file():
                wanted.add(str(f))
        return wanted

    def _apply(self) -> None:
        wanted = self._targets()
        current = self.watched_paths()
        stale = sorted(current - wanted)
        if stale:
            self._watcher.removePaths(stale)
        fresh = sorted(wanted - current)
        if fresh:
            self._watcher.addPaths(fresh)

    def _on_change(self, path: str) -> None:
        """Report changes in planned dirs/files; a stand-in parent only re-applies the plan.

        A stand-in (the nearest existing parent of a missing planned dir, often the home
        itself, where ``state.db`` churns) reports only when a planned dir appeared under it.
        """
        if path in self._planned and path not in self._stand_ins:
            self._begin_burst(path)
            return
        before = self.watched_paths()
        self._apply()
        if self.watched_paths() != before:
            self._begin_burst(path)

    def _signature(self) -> dict[str, tuple[int, int, int] | None]:
        out: dict[str, tuple[int, int, int] | None] = {}
        for name in self._planned:
            try:
                st = os.stat(name)
            except OSError:
                out[name] = None
            else:
                out[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return out

    def _begin_burst(self, path: str) -> None:
        """Report ``path`` now; watch nothing until the burst ends."""
        self._burst = self._signature()
        self._burst_watched = self.watched_paths()
        if self._burst_watched:
            self._watcher.removePaths(sorted(self._burst_watched))
        self._burst_timer.start()
        self.changed.emit(path)

    def _end_burst(self) -> None:
        """Watch the plan again (a file replaced by rename: its new inode) and report one change when anything
        planned differs from the burst's start."""
        self._apply()
        began, self._burst = self._burst or {}, None
        now = self._signature()
        changed = sorted(name for name in now if now[name] != began.get(name))
        if changed or self.watched_paths() != self._burst_watched:
            # the path is what the detector reads the reason from: "profiles" makes it look for new homes
            self._begin_burst(next((c for c in changed if os.path.basename(c) == "profiles"),
                                   changed[0] if changed else min(self._planned)))
