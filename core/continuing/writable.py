"""Can a continuation write where it must? Checked before one starts, so a home Hermes cannot write is refused
in one line up front instead of a continuation that runs for a minute and records nothing.

It writes ``desktop/`` and ``state.db`` (with SQLite's journal files beside it); a read-only file system is
told apart from missing permission (the fix differs).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from hermes_tray_core.markers.file import MARKER_DIR

__all__ = ["unwritable", "write_problem"]


def _why(path: Path) -> str:
    # no statvfs (Windows), or it cannot be asked: permission is the likely cause
    with contextlib.suppress(OSError, AttributeError):
        if os.statvfs(path).f_flag & getattr(os, "ST_RDONLY", 1):
            return "it is on a read-only file system"
    return "you have no permission to write there"


def unwritable(home: Path | str) -> tuple[Path, str] | None:
    """Where in ``home`` a continuation (or a skip) cannot write, and why (plain words), or None."""
    home = Path(home)
    desktop = home / MARKER_DIR
    state_db = home / "state.db"
    for path, need in ((desktop if desktop.is_dir() else home, os.W_OK | os.X_OK), (home, os.W_OK | os.X_OK),
                       (state_db, os.W_OK)):
        if path == state_db and not path.exists():
            continue
        if not os.access(path, need):
            return path, _why(path if path.is_dir() else path.parent)
    return None


def write_problem(home: Path | str) -> str | None:
    """Why Hermes cannot write where a continuation in ``home`` must (one plain sentence), or None."""
    found = unwritable(home)
    return None if found is None else f"Hermes cannot write in {found[0]}: {found[1]}"
