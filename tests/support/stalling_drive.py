"""A network drive that stops answering, as sshfs, rclone or gvfs do when their server goes away mid-session.

A real FUSE file system served by a real daemon (fusepy over libfuse2, in a child process): it answers every
call from a backing directory until :meth:`StallingDrive.stall`; from then on every call it reads is never
answered. A program that looks inside then sleeps in the kernel on a request the daemon has taken: no signal
ends that wait, not even SIGKILL, and a process with a thread stuck there cannot end (its open files, standard
output included, stay open). :meth:`StallingDrive.stop` kills the daemon, which aborts the connection: every
waiting call fails at once and the mount is detached.

(``tests/support/dead_mount.py`` is the other kind: a drive that never answered at all, whose callers wait before
any request is sent, a wait SIGKILL ends.)

Needs root (to mount), ``/dev/fuse``, libfuse2 and fusepy (``tests/run`` installs both); :func:`available` says
what is missing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_MNT_DETACH = 2

#: The daemon: argv = backing dir, mount point, stall flag file. Read-only passthrough of the backing dir.
DAEMON = r"""
import errno, os, sys, threading
from fuse import FUSE, FuseOSError, Operations

backing, mount, flag = sys.argv[1], sys.argv[2], sys.argv[3]
never = threading.Event()


class Drive(Operations):
    def __call__(self, op, *args):
        if os.path.exists(flag):  # stopped answering: this call is never answered
            never.wait()
        return super().__call__(op, *args)

    def _real(self, path):
        return os.path.join(backing, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._real(path))
        except OSError as exc:
            raise FuseOSError(exc.errno or errno.EIO)
        return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime",
                                            "st_mtime", "st_ctime")}

    def access(self, path, mode):
        if not os.access(self._real(path), mode):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._real(path))]

    def readlink(self, path):
        return os.readlink(self._real(path))

    def open(self, path, flags):
        return os.open(self._real(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)

    def statfs(self, path):
        st = os.statvfs(self._real(path))
        return {k: getattr(st, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                                            "f_ffree", "f_favail", "f_flag", "f_namemax")}


print("mounting", flush=True)
FUSE(Drive(), mount, foreground=True, ro=True, allow_other=True, attr_timeout=0, entry_timeout=0,
     negative_timeout=0)
"""


def available() -> str | None:
    """None when a stalling drive can run here, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to mount"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if ctypes.util.find_library("fuse") is None:
        return "no libfuse2 (tests/run installs it)"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"fusepy does not load ({exc})"
    return None


class StallingDrive:
    """``backing`` served at ``mount`` until :meth:`stall`; :meth:`stop` (or leaving the ``with``) ends it."""

    def __init__(self, backing: Path, mount: Path) -> None:
        self.backing, self.mount = Path(backing), Path(mount)
        self.flag = self.mount.parent / f".{self.mount.name}-stalled"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StallingDrive:
        self.mount.mkdir(parents=True, exist_ok=True)
        self.flag.unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-c", DAEMON, str(self.backing), str(self.mount), str(self.flag)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        end = time.monotonic() + 20
        while not os.path.ismount(self.mount):
            if self.proc.poll() is not None or time.monotonic() > end:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
                self.stop()
                raise RuntimeError(f"the FUSE drive did not mount: {err[-1000:]}")
            time.sleep(0.05)
        return self

    def stall(self) -> None:
        """From now on the drive answers nothing (the flag lives outside the drive: touching it asks nothing of it)."""
        self.flag.touch()

    def stop(self) -> None:
        """Kill the daemon (the connection aborts: every waiting call fails) and detach the mount."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.umount2(os.fsencode(self.mount), _MNT_DETACH)
        self.flag.unlink(missing_ok=True)

    def __enter__(self) -> StallingDrive:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
