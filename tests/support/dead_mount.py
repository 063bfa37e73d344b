"""A mount that never answers: what a network drive whose server has gone away looks like to a program.

A FUSE file system whose daemon never replies: the kernel mounts it, and every look inside it (a ``stat``,
a directory listing) waits for an answer that never comes — the process sleeps in the kernel, and no
signal but SIGKILL ends the wait, as with a hard NFS mount whose server is gone. Closing the ``/dev/fuse``
descriptor aborts the connection: every waiting call then fails (ENOTCONN) and the mount can be detached.

Needs root (or CAP_SYS_ADMIN) and ``/dev/fuse``; :func:`available` says whether this machine has them.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def available() -> str | None:
    """None when a dead mount can be made here, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to mount"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    return None


@contextlib.contextmanager
def dead_mount(where: Path, *, give_up_after: float = 90.0) -> Iterator[Path]:
    """Mount a never-answering file system on ``where`` (a directory); yields ``where``. Everything under it
    hangs until the context ends — or, at the latest, ``give_up_after`` seconds: then the connection is
    aborted from another thread, so code that wrongly waits on the drive makes its test fail instead of
    hanging the test run for ever (a process stuck there ignores every signal but SIGKILL)."""
    where.mkdir(parents=True, exist_ok=True)
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    libc = _libc()
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"hermes-tray-dead", os.fsencode(where), b"fuse", _MS_NOSUID | _MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, f"cannot mount a test FUSE file system: {os.strerror(err)}", str(where))
    lock = threading.Lock()
    open_fds = [fd]

    def abort() -> None:  # closing the device aborts the connection: every call waiting inside fails now
        with lock:
            while open_fds:
                os.close(open_fds.pop())

    watchdog = threading.Timer(give_up_after, abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield where
    finally:
        watchdog.cancel()
        abort()
        libc.umount2(os.fsencode(where), _MNT_DETACH)
