"""The per-process cache of open journal fds: one append-mode fd per journal, reused by this process's
next append, closed only once no thread is appending through it.

Split from :mod:`core.stores.turn_journal`, which owns the format, the lock and the append itself: this module only
opens journal files safely (0600, no symlinks, regular files only) and keeps their fds. A forked child
forgets the parent's fds (they share its ``flock`` locks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from hermes_tray_core.stores.fsutil import FILE_MODE, UnsafePathError, ensure_private_dir, refuse_symlink

__all__ = ["Handle", "STRIPES", "acquire", "drop", "open_append", "release"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)

_VERIFIED_DIRS: set[str] = set()


def _ensure_dir(directory: Path) -> None:
    """Create/verify the journal directory once per process (0700, not a symlink)."""
    key = os.fspath(directory)
    if key not in _VERIFIED_DIRS:
        ensure_private_dir(directory)
        _VERIFIED_DIRS.add(key)


def open_append(name: str) -> tuple[int, bool]:
    """Open (creating 0600) a journal for appending, refusing symlinks and non-regular files."""
    parent = os.path.dirname(name)
    if parent not in _VERIFIED_DIRS:
        _ensure_dir(Path(parent))
    if not _NOFOLLOW:
        refuse_symlink(Path(name))
    flags = os.O_RDWR | os.O_APPEND | _NOFOLLOW | _CLOEXEC | _BINARY
    while True:
        created = False
        try:
            fd = os.open(name, flags)
        except FileNotFoundError:
            _VERIFIED_DIRS.discard(parent)
            _ensure_dir(Path(parent))
            try:
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
                created = True
            except FileExistsError:
                continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(errno.ELOOP, "refusing to follow a symlink", name) from None
            raise
        try:
            if created and os.name != "nt":
                os.fchmod(fd, FILE_MODE)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePathError(errno.EINVAL, "journal path is not a regular file", name)
        except BaseException:
            os.close(fd)
            raise
        return fd, created


class Handle:
    """An open, append-mode journal fd this process reuses; ``end`` is where our last write ended.

    ``refs`` counts the appends using it right now; a handle dropped from the cache while in use
    (``retired``) is closed by the last of them, never under their feet (guarded by ``_handles_lock``).
    """

    __slots__ = ("fd", "ino", "end", "refs", "retired")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ino = -1
        self.end = -1
        self.refs = 0
        self.retired = False


_MAX_HANDLES = 16
_handles: OrderedDict[str, Handle] = OrderedDict()
_handles_lock = threading.Lock()
# flock excludes *open file descriptions*, and this process shares one per cached fd between its
# threads: these stripes keep two threads of ours from appending through the same fd at once.
STRIPES = tuple(threading.Lock() for _ in range(32))


def _retire(h: Handle) -> None:
    """Out of the cache: close it now if nobody is appending through it, else when the last one is
    done (:func:`release`). Call with ``_handles_lock`` held."""
    h.retired = True
    if h.refs == 0 and h.fd >= 0:
        with contextlib.suppress(OSError):
            os.close(h.fd)
        h.fd = -1


def release(h: Handle) -> None:
    with _handles_lock:
        h.refs -= 1
        if h.retired:
            _retire(h)


def drop(name: str, h: Handle) -> None:
    """``h`` (cached for ``name``) points at a replaced file: forget it; closed once unused."""
    with _handles_lock:
        if _handles.get(name) is h:
            del _handles[name]
        _retire(h)


def _forget_inherited_handles() -> None:
    """In a forked child: the parent's fds share its open file descriptions, hence its flock
    locks, so they must never be used here. Runs in the child right after ``fork()``."""
    global _handles_lock
    _handles_lock = threading.Lock()  # may have been held by another parent thread at fork time
    for h in _handles.values():
        with contextlib.suppress(OSError):
            os.close(h.fd)
    _handles.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_handles)


def acquire(name: str) -> tuple[Handle, bool]:
    """The cached fd for ``name`` (opened, or created 0600, on first use), referenced for the caller:
    pair with :func:`release`. ``(handle, created)``. Evicting the least recently used entry
    (more than ``_MAX_HANDLES`` names) never closes a fd another thread is appending through."""
    with _handles_lock:
        h = _handles.get(name)
        if h is not None:
            _handles.move_to_end(name)
            h.refs += 1
            return h, False
    fd, created = open_append(name)
    h = Handle(fd)
    h.refs = 1
    with _handles_lock:
        old = _handles.pop(name, None)
        if old is not None:
            _retire(old)
        _handles[name] = h
        while len(_handles) > _MAX_HANDLES:
            _old, evicted = _handles.popitem(last=False)
            _retire(evicted)
    return h, created
