"""Durable, private file primitives for every store: files 0600, dirs 0700, symlinks refused, writes by temp
file + fsync + ``os.replace`` + directory fsync, temp files named after their writer (a later writer sweeps a
dead one's), and a *blocking* OS lock (a polling lock sleeps between tries and halves throughput under
contention).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hermes_tray_core.errors import TrayError

__all__ = ["BINARY", "CLOEXEC", "DIR_MODE", "FILE_MODE", "NOFOLLOW", "NONBLOCK", "UnsafePathError",
    "atomic_write_bytes", "ensure_private_dir", "os_error_text", "file_signature", "fsync_dir", "fsync_path",
    "lock_fd", "locked", "open_private_lockfile", "open_regular", "read_regular", "refuse_symlink",
    "set_aside", "too_large_words", "sweep_stale_temps", "try_lock_fd", "unlock_fd", "write_all", "write_temp"]

FILE_MODE = 0o600
DIR_MODE = 0o700
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at a path must not hang whoever opens it
BINARY = getattr(os, "O_BINARY", 0)
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.(?P<nonce>[0-9a-f]{8})\.tmp$")


class UnsafePathError(TrayError, OSError):
    """A path the project would write through is a symlink (or otherwise not a plain file/dir)."""


#: errors whose system words alone do not say what to do about them
_WORDS = {
    errno.EACCES: "permission denied — check its owner and permissions",
    errno.EPERM: "permission denied — check its owner and permissions",
    errno.ENAMETOOLONG: "the path is too long for the file system",
    errno.ELOOP: "too many symbolic links (a link that points back at itself?)",
    errno.EIO: "the disk reported an input/output error (a failing disk, or a network drive that is gone?)",
    errno.ESTALE: "the network drive no longer knows this folder (stale file handle): remount it",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENOTCONN: "the drive it is on is not connected",
    errno.ENODEV: "the drive it is on is not there",
}


def os_error_text(exc: BaseException) -> str:
    """What went wrong with a file, as a person reads it: the system's own words, with what to do where they
    do not say it; never the errno number, the exception's class or the temp file (``str(exc)`` is for the
    log)."""
    if isinstance(exc, OSError):
        if type(exc).__str__ is not OSError.__str__:  # an error class that words itself (MarkerStoreError)
            return str(exc)
        words = _WORDS.get(exc.errno or -1)
        if words:
            return words
        first = exc.args[0] if exc.args else None
        text: str = exc.strerror or (first if isinstance(first, str) else "") or "cannot be used"
        return text[:1].lower() + text[1:] if text[1:2].islower() else text
    if isinstance(exc, UnicodeError):
        return "the path is not valid text on this system"
    if isinstance(exc, ValueError):  # a NUL byte in the path
        return "the path is not valid"
    return "it cannot be read"


def refuse_symlink(path: Path | str) -> None:
    """Raise :class:`UnsafePathError` if ``path`` itself is a symlink (missing is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(errno.ELOOP, "refusing to follow a symlink", str(path))


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) 0700, refusing a symlink there; existing parents keep their mode."""
    path = Path(path)
    refuse_symlink(path)
    if path.is_dir():
        return path
    for d in reversed(list(itertools.takewhile(lambda p: not p.exists(), [path, *path.parents]))):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass
        else:
            with contextlib.suppress(OSError):
                os.chmod(d, DIR_MODE)  # umask may have masked bits off; never add any beyond 0700
            fsync_dir(d.parent)
    refuse_symlink(path)
    return path


def fsync_dir(path: Path | str) -> None:
    """Persist a create or rename (not on Windows, where a directory cannot be opened)."""
    if sys.platform != "win32":
        fsync_path(path)


def fsync_path(path: Path | str) -> None:
    """fsync what is at ``path`` now, best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | CLOEXEC | BINARY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(target: Path | str, data: bytes, *, mode: int = FILE_MODE,
                       before_replace: Callable[[], object] | None = None, durable: bool = True) -> None:
    """Write ``data`` to ``target`` atomically and durably. ``before_replace`` runs right before the rename
    and may raise to abandon the write. ``durable=False`` skips the fsyncs: only for a cache whose loss costs
    a re-read."""
    target = os.fspath(target)  # plain strings: pathlib costs more than the syscalls on this hot path
    refuse_symlink(target)
    directory = os.path.dirname(target)
    tmp = write_temp(target, data, mode=mode, sync=durable)
    try:
        if before_replace is not None:
            before_replace()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(directory or ".")


def write_temp(target: str, data: bytes, *, mode: int = FILE_MODE, sync: bool = True) -> str:
    """A new temp file ``.<name>.<pid>.<nonce>.tmp`` beside ``target``; nothing left on failure."""
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC | BINARY, mode)
    try:
        try:
            if os.name != "nt":
                os.fchmod(fd, mode)  # umask may have masked bits off; by fd: no second path lookup
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def sweep_stale_temps(target: Path, *, min_age: float = 2.0) -> int:
    """Remove the temp files of ``target`` whose writers can no longer be writing them (gone, a zombie, or a
    process that took the pid over after the file was written; never this process); how many."""
    # local: keep fsutil light
    from hermes_tray_core.process.identity import process_liveness, process_start_time
    from hermes_tray_core.vocab import WriterState

    directory, removed, now = Path(target).parent, 0, time.time()
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        m = _TMP_RE.match(name)
        if not m or m.group("name") != Path(target).name or int(m.group("pid")) == os.getpid():
            continue
        pid, path = int(m.group("pid")), directory / name
        try:
            mtime = os.lstat(path).st_mtime
        except OSError:
            continue
        if process_liveness(pid) != WriterState.DEAD:  # alive, or cannot tell
            started = process_start_time(pid)
            if (started is not None and started <= mtime + 1.0) or (started is None and now - mtime < min_age):
                continue  # a process that existed when the temp file was written (or a young file): may be mid-write
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    return removed


def open_regular(path: Path | str, flags: int, what: str = "not a regular file") -> int:
    """A raw fd of ``path`` (created 0600 with ``O_CREAT``): :class:`UnsafePathError` for a symlink or anything
    but a regular file (``what`` says so)."""
    if not NOFOLLOW:
        refuse_symlink(path)  # Windows: no O_NOFOLLOW; creating a symlink there needs privileges
    try:
        fd = os.open(path, flags | NOFOLLOW | CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(errno.ELOOP, "refusing to follow a symlink", os.fspath(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(errno.EINVAL, what, os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_lockfile(path: Path | str) -> int:
    """Open (creating 0600) a lock file, refusing symlinks; a raw fd."""
    return open_regular(path, os.O_RDWR | os.O_CREAT | BINARY, "lock path is not a regular file")


# One platform lock for every file the engine locks: ``flock`` on POSIX (per open file description: separate
# opens exclude each other, threads included), a ``msvcrt`` byte lock at ``offset`` on Windows (mandatory
# there: a file others read locks a byte far past its data).
if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def lock_fd(fd: int, *, offset: int = 0) -> None:
        os.lseek(fd, offset, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # retries for ~10 s, then raises
                return
            except OSError:
                continue

    def unlock_fd(fd: int, *, offset: int = 0) -> None:
        os.lseek(fd, offset, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def try_lock_fd(fd: int, *, offset: int = 0) -> bool:
        os.lseek(fd, offset, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
else:
    import fcntl

    def lock_fd(fd: int, *, offset: int = 0) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def unlock_fd(fd: int, *, offset: int = 0) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def try_lock_fd(fd: int, *, offset: int = 0) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False


@contextlib.contextmanager
def locked(lock_path: Path | str) -> Iterator[int]:
    """Hold an exclusive cross-process lock on a private sidecar lock file (its folder made 0700 if missing)."""
    try:
        fd = open_private_lockfile(lock_path)
    except FileNotFoundError:
        ensure_private_dir(Path(lock_path).parent)
        fd = open_private_lockfile(lock_path)
    try:
        lock_fd(fd)
        try:
            yield fd
        finally:
            unlock_fd(fd)
    finally:
        os.close(fd)


def file_signature(path: Path | str | bytes, *, follow_symlinks: bool = True) -> tuple[int, int, int] | None:
    """(inode, size, mtime_ns) of ``path``, or None if it does not exist: a foreign rewrite changes it."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """All bytes of a regular file, refusing anything else without blocking on it (a FIFO planted there would
    hang the reader): OSError EINVAL, or EFBIG past ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC | BINARY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, too_large_words(limit), os.fspath(path))
        chunks = [os.read(fd, st.st_size + 1)]  # one read of the size fstat gave
        while len(chunks[0]) > st.st_size and (chunk := os.read(fd, 1 << 20)):  # it grew since: read on
            chunks.append(chunk)
            if limit is not None and sum(map(len, chunks)) > limit:
                break
        data = b"".join(chunks)
        if limit is not None and len(data) > limit:
            raise OSError(errno.EFBIG, too_large_words(limit), os.fspath(path))
        return data
    finally:
        os.close(fd)


def too_large_words(limit: int) -> str:
    """"too large to read (over 16 MiB)": a size limit, never "corrupt"."""
    unit, size = ("MiB", 1 << 20) if limit >= 1 << 20 else ("KiB", 1 << 10)
    return f"too large to read (over {limit / size:g} {unit})"


def set_aside(path: Path, suffix: str = "corrupt") -> Path | None:
    """Move a file out of the way, kept (0600) as ``<name>.<suffix>-<UTC time>-<4 hex>``; its new path, or
    None."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = path.with_name(f"{path.name}.{suffix}-{stamp}-{os.urandom(2).hex()}")
    try:
        os.replace(path, dest)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.chmod(dest, FILE_MODE)
    fsync_dir(path.parent)
    return dest
