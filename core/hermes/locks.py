"""Hermes' own lock files, taken beside the tray's, so that a write of the tray and one of Hermes never
interleave: ``config.yaml.lock`` (newer Hermes waits 10 s for it, then writes unlocked; the tray creates it
when absent) and ``desktop/.interrupted_turns.lock`` (newer marker writers; taken only where it exists).
``flock`` on POSIX, byte 0 by ``msvcrt`` on Windows, as Hermes takes them. The tray waits up to :data:`WAIT`,
then raises :class:`HermesLockBusy` and changes nothing: it never writes past a lock Hermes holds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

from hermes_tray_core.errors import TrayError
from hermes_tray_core.stores import fsutil

__all__ = ["CONFIG_LOCK", "MARKER_LOCK", "WAIT", "HermesLockBusy", "HermesLockUnusable", "hermes_lock"]

CONFIG_LOCK = "config.yaml.lock"
MARKER_LOCK = ".interrupted_turns.lock"
WAIT = 10.0  # Hermes' own wait for its config lock
POLL = 0.02


class HermesLockBusy(TrayError, TimeoutError):
    """Hermes held its lock on a file longer than the tray waits: nothing was changed."""

    def __init__(self, path: Path, waited: float) -> None:
        super().__init__(errno.EBUSY, f"Hermes kept {path.name} locked for more than {waited:g} s "
                                      f"(it is writing {path.name.removesuffix('.lock').lstrip('.')})", str(path))

    def __str__(self) -> str:
        return str(self.strerror)


class HermesLockUnusable(TrayError, OSError):
    """Hermes' lock file cannot be opened or made (a read-only home, a symlink in its place): nothing was changed."""


@contextlib.contextmanager
def hermes_lock(path: Path | str, *, create: bool, wait: float | None = None) -> Iterator[bool]:
    """Hold Hermes' lock file ``path`` (True), or nothing when it is absent and not ``create`` (False)."""
    path = Path(path)
    try:
        fd = fsutil.open_private_lockfile(path) if create else os.open(
            path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        if create:
            raise HermesLockUnusable(errno.ENOENT, f"{path.name} cannot be made: its folder is gone", str(path)) from None
        yield False
        return
    except OSError as exc:
        raise HermesLockUnusable(exc.errno, f"{path.name} cannot be used ({fsutil.os_error_text(exc)})",
                                 str(path)) from exc
    wait = WAIT if wait is None else wait
    try:
        deadline = time.monotonic() + wait
        while not fsutil.try_lock_fd(fd, offset=0):
            if time.monotonic() >= deadline:
                raise HermesLockBusy(path, wait)
            time.sleep(POLL)
        try:
            yield True
        finally:
            fsutil.unlock_fd(fd, offset=0)
    finally:
        os.close(fd)
