"""Watch Hermes homes for marker and journal changes with ``QFileSystemWatcher``.

A directory that does not exist yet (a fresh home gets ``desktop/`` only when its first turn
starts) is watched through its nearest existing parent; when the parent changes the plan is
re-applied, so the new directory is picked up without polling.

One home's trouble stays in that home: a path that cannot be looked at (no permission, a name too long,
a broken drive) is simply not watched, and a change re-examines only the planned paths it concerns, so
a change in one home never touches another home's (possibly hanging) drive.
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
        self._target: dict[Path, str | None] = {}  # planned path -> the path watched for it (None: nothing)

    def set_plan(self, dirs: Iterable[Path], files: Iterable[Path] = ()) -> None:
        """Directories (existing or not) and files to follow; replaces the previous plan."""
        self._dirs = sorted({Path(d) for d in dirs})
        self._files = sorted({Path(f) for f in files})
        self._target = {}
        self._apply()

    def watched_paths(self) -> set[str]:
        return set(self._watcher.directories()) | set(self._watcher.files())

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
        watch what stands for it."""
        for planned, is_file in [(d, False) for d in self._dirs] + [(f, True) for f in self._files]:
            if near is None or planned not in self._target or _concerns(near, planned, self._target[planned]):
                self._target[planned] = self._target_of(planned, is_file)
        wanted = {t for t in self._target.values() if t is not None}
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
        self._apply(near=path)
        p = Path(path)
        planned = p in self._dirs or p in self._files
        if planned or self.watched_paths() != before:
            self.changed.emit(path)


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
