"""Watch Hermes homes for marker and journal changes with ``QFileSystemWatcher``.

A directory that does not exist yet (a fresh home gets ``desktop/`` only when its first turn
starts) is watched through its nearest existing parent; when the parent changes the plan is
re-applied, so the new directory is picked up without polling.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, Signal


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

    def set_plan(self, dirs: Iterable[Path], files: Iterable[Path] = ()) -> None:
        """Directories (existing or not) and files to follow; replaces the previous plan."""
        self._dirs = sorted({Path(d) for d in dirs})
        self._files = sorted({Path(f) for f in files})
        self._apply()

    def watched_paths(self) -> set[str]:
        return set(self._watcher.directories()) | set(self._watcher.files())

    def _targets(self) -> set[str]:
        wanted: set[str] = set()
        for d in self._dirs:
            probe = d
            while not probe.is_dir():  # nearest existing ancestor stands in for a missing dir
                if probe.parent == probe:
                    break
                probe = probe.parent
            if probe.is_dir():
                wanted.add(str(probe))
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
        if path in self._watcher.files():
            # a file replaced by rename leaves the watcher on the old inode: watch the path afresh
            self._watcher.removePath(path)
        before = self.watched_paths()
        self._apply()
        p = Path(path)
        planned = p in self._dirs or p in self._files
        if planned or self.watched_paths() != before:
            self.changed.emit(path)
