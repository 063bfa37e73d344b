"""Put a new file in place of another and get back, atomically, exactly the file it displaced.

Hermes rewrites its marker file with no cross-process lock, so a plain ``os.replace`` of ours could destroy a
version it renamed in a moment earlier. An exchange swaps the two names in one step: the displaced file is
still there under our temp name, to check and merge (:mod:`core.markers.store`). Linux:
``renameat2(RENAME_EXCHANGE)``; macOS: ``renamex_np(RENAME_SWAP)``; Windows: ``ReplaceFileW`` with a backup
name (not one atomic swap everywhere, but the displaced file is handed back). Where none works (an old kernel;
FUSE, NFS, old overlayfs answer EINVAL) :class:`ExchangeUnsupported` is raised, the caller falls back to
compare-and-replace and :func:`probe` tells ``doctor``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from hermes_tray_core.errors import TrayError
from hermes_tray_core.stores import fsutil

if TYPE_CHECKING:
    import ctypes

# ctypes and the OS primitive load at the first exchange: every ``status`` imports this and never exchanges
# (~4 ms).

__all__ = ["ExchangeUnsupported", "Progress", "PutBackIncomplete", "Sig", "mechanism", "probe", "swap_in", "swap_in_verified"]

_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, getattr(errno, "ENOTSUP", -1), getattr(errno, "EOPNOTSUPP", -1),
                getattr(errno, "EXDEV", -1)}


class ExchangeUnsupported(TrayError, OSError):
    """This OS or filesystem offers no atomic exchange for these paths."""


class PutBackIncomplete(TrayError, OSError):
    """A version could not be put back: the file at ``filename`` may be newer than what stands; keep it."""


def _unsupported(err: int, what: str, path: str) -> OSError:
    if err in _UNSUPPORTED:
        return ExchangeUnsupported(err, f"{what} unsupported here ({os.strerror(err)})", path)
    return OSError(err, os.strerror(err), path)


# ── Linux ─────────────────────────────────────────────────────────────────

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# renameat2's syscall number, for C libraries older than glibc 2.28 that lack the wrapper.
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "i386": 353, "i686": 353, "armv7l": 382,
                  "armv6l": 382, "ppc64le": 357, "ppc64": 357, "s390x": 347}


# ``PyDLL`` keeps the GIL: the exchange and the check of what it displaced must follow within microseconds
# (ours is visible in between); dropping the GIL can cost a whole switch interval (5 ms) to get it back.
_STATX_WANT = 0x100 | 0x200 | 0x40  # STATX_INO | STATX_SIZE | STATX_MTIME
_AT_SYMLINK_NOFOLLOW = 0x100

Sig = tuple[int, int, int]
"""(inode, size, mtime_ns): an exchange or a rename changes none; a file that got a freed inode back differs
in mtime."""
Exchange = Callable[[str, str], "OSError | None"]
"""An exchange that *returns* its failure: an exception out of one is an outside one, and the files are judged
again."""
_Loaded = tuple[Exchange, "Callable[[str], Sig | None] | None"]  # an OS's exchange, and its own signature if any


def _linux_statx(libc: ctypes.CDLL) -> Callable[[str], Sig | None] | None:
    import ctypes

    fn = getattr(libc, "statx", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    make = ctypes.create_string_buffer

    def signature(path: str) -> Sig | None:
        # struct statx, the same on every arch: stx_ino u64 @32, stx_size u64 @40, stx_mtime {i64 sec,
        # u32 nsec} @112. A buffer per call: threads writing different homes' files must not share one.
        buf = make(256)
        if fn(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, _STATX_WANT, buf) != 0:
            if ctypes.get_errno() == errno.ENOENT:
                return None
            return _stat_sig(path)  # statx refused (a seccomp filter, say): ask lstat, which raises if it fails
        raw = buf.raw
        order = sys.byteorder
        return (int.from_bytes(raw[32:40], order), int.from_bytes(raw[40:48], order),
                int.from_bytes(raw[112:120], order, signed=True) * 1_000_000_000 + int.from_bytes(raw[120:124], order))

    return signature


def _linux() -> _Loaded | None:
    import ctypes

    libc = ctypes.PyDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int

        def call(a: bytes, b: bytes) -> int:
            return int(fn(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE))
    else:
        nr = _SYS_RENAMEAT2.get(os.uname().machine)
        syscall = getattr(libc, "syscall", None)
        if nr is None or syscall is None:
            return None
        syscall.restype = ctypes.c_long

        def call(a: bytes, b: bytes) -> int:
            return int(syscall(ctypes.c_long(nr), ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(a), ctypes.c_int(_AT_FDCWD),
                               ctypes.c_char_p(b), ctypes.c_uint(_RENAME_EXCHANGE)))

    def exchange(path: str, target: str) -> OSError | None:
        if call(os.fsencode(path), os.fsencode(target)) == 0:
            return None
        return _unsupported(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)", target)  # ENOENT: FileNotFoundError

    return exchange, _linux_statx(libc)


# ── macOS ─────────────────────────────────────────────────────────────────

_RENAME_SWAP = 0x2


def _macos() -> _Loaded | None:
    import ctypes
    import ctypes.util  # only here: it pulls in subprocess/shutil, ~30 ms of every `status` start elsewhere

    libc = ctypes.PyDLL(ctypes.util.find_library("c"), use_errno=True)  # keeps the GIL, see _linux
    fn = getattr(libc, "renamex_np", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def exchange(path: str, target: str) -> OSError | None:
        if fn(os.fsencode(path), os.fsencode(target), _RENAME_SWAP) == 0:
            return None
        return _unsupported(ctypes.get_errno(), "renamex_np(RENAME_SWAP)", target)

    return exchange, None


# ── Windows ───────────────────────────────────────────────────────────────

_REPLACEFILE_WRITE_THROUGH = 0x1
_WIN_UNSUPPORTED = {50, 1}  # ERROR_NOT_SUPPORTED, ERROR_INVALID_FUNCTION
_WIN_MISSING = {2, 3}  # ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND


def _windows() -> _Loaded | None:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    fn = kernel32.ReplaceFileW
    fn.argtypes = [ctypes.c_wchar_p, ctypes.c_wchar_p, ctypes.c_wchar_p, ctypes.c_uint, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def exchange(path: str, target: str) -> OSError | None:
        if fn(target, path, _next_path(path), _REPLACEFILE_WRITE_THROUGH, None, None):
            return None
        err = ctypes.get_last_error()  # type: ignore[attr-defined]
        if err in _WIN_MISSING and not os.path.exists(target):
            return FileNotFoundError(errno.ENOENT, "nothing to exchange with", target)
        if err in _WIN_UNSUPPORTED:
            return ExchangeUnsupported(errno.ENOTSUP, f"ReplaceFileW unsupported here (error {err})", target)
        return OSError(errno.EIO, f"ReplaceFileW failed (error {err})", target)

    return exchange, None


# Put-back rounds before giving up (a Hermes write takes a temp file and an fsync: one extra round is rare).
_PUT_BACK_ROUNDS = 64


def _unavailable(path: str, target: str) -> OSError:
    return ExchangeUnsupported(errno.ENOSYS, "no atomic exchange on this platform", target)


@functools.cache
def _impl() -> tuple[Exchange, Callable[[str], Sig | None], str]:
    """(the exchange, the signature it is judged by, its name), loaded on first use."""
    loaded, name = None, "none"
    with contextlib.suppress(OSError, AttributeError):
        if sys.platform.startswith("linux"):
            loaded, name = _linux(), "renameat2(RENAME_EXCHANGE)"
        elif sys.platform == "darwin":
            loaded, name = _macos(), "renamex_np(RENAME_SWAP)"
        elif os.name == "nt":
            loaded, name = _windows(), "ReplaceFileW (backup name)"
    if loaded is None:
        return _unavailable, _stat_sig, "none"
    return loaded[0], loaded[1] or _stat_sig, name


def mechanism() -> str:
    """The primitive this OS offers (``none`` when there is none)."""
    return _impl()[2]


def swap_in(new: str, target: str) -> str:
    """Put the file ``new`` at ``target`` (same directory) and return where the displaced file now is."""
    failed = _impl()[0](new, target)
    if failed is not None:
        raise failed
    return _next_path(new)


class Progress:
    """How far a verified exchange got, kept by the caller across an exception (a signal handler's lands at
    the next Python call), so the put-back can be finished. ``settled``: ``path`` holds something older than
    what stands."""

    __slots__ = ("failure", "first", "last_in", "next", "path", "pending", "settled", "was_read")

    def __init__(self, path: str, ours: Sig) -> None:
        self.path = path
        self.first = True  # the exchange of ours has not been seen to happen
        self.last_in = ours  # what went into the target last (a quiet round gives it back)
        self.pending: Sig | None = None  # set right before an exchange call: what was at ``path`` then
        self.next = path  # where the file that comes out will be (Windows: a backup name)
        self.settled = False
        self.was_read = False
        self.failure: OSError | None = None  # what this exchange raised itself (anything else is from outside)


def swap_in_verified(new: str, target: str, read: Sig, ours: Sig, progress: Progress | None = None
                     ) -> tuple[str, bool]:
    """:func:`swap_in`; if the displaced file is not the one read (signature ``read``), put it straight back
    (ours was visible for two syscalls). Returns (the path of the displaced file, or of ours when put back;
    whether it was the one read). An exception from outside between the steps never leaves ours in place and
    Hermes' version under our temp name: the put-back is finished first. :class:`PutBackIncomplete` when it
    cannot finish."""
    exchange, signature, next_path = _verified_parts()
    p = progress if progress is not None else Progress(new, ours)
    try:
        _drive(p, exchange, signature, next_path, read, target)
    except BaseException as exc:
        if exc is not p.failure and not p.settled:  # from outside: finish first
            try:
                _drive(p, exchange, signature, next_path, read, target, resuming=True)
            except BaseException:  # noqa: S110 - a second one: the caller keeps what is left
                pass
        raise
    return p.path, p.was_read


def _verified_parts() -> tuple[Exchange, Callable[[str], Sig | None], Callable[[str], str]]:
    exchange, signature, _name = _impl()
    return exchange, signature, _next_path


_DISPLACED = ".displaced"


def _next_path(path: str) -> str:
    """Where the file an exchange displaced comes out: ``path``, but on Windows the backup name ReplaceFileW
    puts it at (the names alternate, never grow)."""
    if os.name != "nt":
        return path
    return path[: -len(_DISPLACED)] if path.endswith(_DISPLACED) else path + _DISPLACED


def _stat_sig(path: str | bytes) -> Sig | None:
    return fsutil.file_signature(path, follow_symlinks=False)  # the name itself, as statx is asked


def _drive(p: Progress, exchange: Exchange, signature: Callable[[str], Sig | None],
           next_path: Callable[[str], str], read: Sig, target: str, *, resuming: bool = False) -> None:
    """Exchange ours in; while what comes out is not the file read, exchange it back in, until what comes out
    is what went in the round before (first ours): then no rename landed between, and ``target`` holds the
    newest. Any other file that comes out was renamed in since, is newer, and goes back next round. A target
    that vanishes settles it too. Every decision comes from ``p`` and the file at ``p.path``, and ``p``
    changes only between calls, so this runs again (``resuming``) after an exception anywhere: a call under
    way is judged by whether ``p.pending`` is still at ``p.path``."""
    for _round in range(_PUT_BACK_ROUNDS + 2):
        if p.pending is not None:  # an exchange was started: did it happen?
            now = signature(p.path)
            if now is not None and now == p.pending:
                if resuming and p.first:  # ours never went in: nothing to undo
                    p.pending = None
                    p.settled = True
                    return
                # not yet: make it now (below)
            else:
                out = now if p.next == p.path else signature(p.next)  # Windows: it came out at a backup name
                p.path = p.next
                went_in, p.pending = p.pending, None
                if p.first:
                    p.first = False
                    if out is not None and out == read:
                        p.settled = p.was_read = True
                        return
                    # ours went in and a foreign version came out: it goes back
                elif out is not None and out == p.last_in:
                    p.settled = True  # quiet: what went in before came back, the target holds the newest
                    return
                else:
                    p.last_in = went_in  # a newer version came out: it goes in next
                if out is None:
                    return  # nothing came out to put back (it was moved away): the caller keeps what is left
                p.next = next_path(p.path)
                p.pending = out
        elif p.first:
            if resuming:
                return  # ours never started going in
            p.next = next_path(p.path)
            p.pending = p.last_in  # ours, as the caller measured it
        else:  # resumed between two rounds: what is at our name goes back in
            out = signature(p.path)
            if out is None:
                return
            p.next = next_path(p.path)
            p.pending = out
        if _round > _PUT_BACK_ROUNDS:
            break
        failed = exchange(p.path, target)
        if failed is not None:  # it did not run
            p.pending = None
            if p.first:
                p.failure = failed  # the target is gone, or no exchange here: the caller judges that
                raise failed
            if isinstance(failed, FileNotFoundError):
                p.settled = True  # removed since: the removal is the newest state, ours and theirs are older
                return
            p.failure = PutBackIncomplete(failed.errno or errno.EIO, f"putting a version back into {target} "
                                          f"failed ({failed.strerror or failed}): the newest version is left at "
                                          "the path given", p.path)
            raise p.failure
    p.failure = PutBackIncomplete(errno.EBUSY, f"a writer kept renaming over {target} during "
                                  f"{_PUT_BACK_ROUNDS} put-back rounds: the newest version is left at the path "
                                  "given", p.path)
    raise p.failure


def probe(directory: str) -> tuple[bool, str]:
    """Can files in ``directory`` be exchanged? (True, mechanism) or (False, why)."""
    name = _impl()[2]
    if name == "none":
        return False, f"no atomic exchange primitive on {sys.platform}"
    tag = f".hermes-tray-exchange-probe.{os.getpid()}.{os.urandom(4).hex()}"
    a, b = os.path.join(directory, tag + ".a"), os.path.join(directory, tag + ".b")
    made: list[str] = []
    try:
        for path, data in ((a, b"a"), (b, b"b")):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            made.append(path)
            os.write(fd, data)
            os.close(fd)
        back = swap_in(a, b)
        made.append(back)
        with open(b, "rb") as fh:
            ok = fh.read() == b"a"
        return (True, name) if ok else (False, f"{name} did not swap the files")
    except ExchangeUnsupported as exc:
        return False, f"{name}: {exc.strerror}"
    except OSError as exc:
        return False, f"cannot probe {directory}: {exc.strerror or exc}"
    finally:
        for path in set(made):
            with contextlib.suppress(OSError):
                os.unlink(path)
