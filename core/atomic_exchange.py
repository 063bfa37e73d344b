"""Put a new file in place of another and get back, atomically, exactly the file it displaced.

Hermes rewrites its marker file without any cross-process lock: read, change, write a temp file, rename.
A plain ``os.replace`` of ours can therefore destroy a version Hermes renamed in a moment earlier, and we
would never know. An *exchange* swaps the two names in one step, so the file we displaced is still there
under our temp name: we can see whether it is the version we read and, if not, merge and swap again
(:mod:`core.markers`). One implementation per OS behind :func:`swap_in`:

* Linux: ``renameat2(..., RENAME_EXCHANGE)`` (glibc wrapper, or the raw syscall on older C libraries);
* macOS: ``renamex_np(..., RENAME_SWAP)``;
* Windows: ``ReplaceFileW`` with a backup name — the replaced file is moved to the backup name in the same
  call (not one atomic swap on every filesystem, but the displaced file is handed back, never destroyed).

Where the primitive is missing (an old kernel, some filesystems answer EINVAL: FUSE, NFS, overlayfs on old
kernels) :class:`ExchangeUnsupported` is raised; the caller falls back to its compare-and-replace and
:func:`probe` lets ``hermes-tray doctor`` say so.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

# ``ctypes`` and the OS primitive are loaded at the first exchange, not at import: every ``status`` imports
# this module (through core.markers) and never exchanges; ctypes cost it ~4 ms (python -X importtime).

__all__ = ["ExchangeUnsupported", "PutBackIncomplete", "Sig", "mechanism", "probe", "swap_in", "swap_in_verified"]

_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, getattr(errno, "ENOTSUP", -1), getattr(errno, "EOPNOTSUPP", -1),
                getattr(errno, "EXDEV", -1)}


class ExchangeUnsupported(OSError):
    """This OS or filesystem offers no atomic exchange for these paths."""


class PutBackIncomplete(OSError):
    """A version could not be put back (a round failed, or a foreign writer renamed in during every round):
    the file at ``filename`` came out last, may be newer than what stands, and must be kept, never removed."""


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


# ``PyDLL``: the call keeps the GIL. The exchange and the check of what it displaced must follow each other
# within microseconds (our version is visible in between); a call that drops the GIL can wait a whole
# switch interval (5 ms) to get it back while another thread of ours runs Python.
_STATX_WANT = 0x100 | 0x200 | 0x40  # STATX_INO | STATX_SIZE | STATX_MTIME
_AT_SYMLINK_NOFOLLOW = 0x100

Sig = tuple[int, int, int]
"""(inode, size, mtime_ns) of a file, as ``core.markers`` takes it: an exchange or a rename changes none of
them, and a different file that got a freed inode number back almost surely differs in its mtime."""


def _linux_statx(libc: ctypes.CDLL) -> Callable[[bytes], Sig | None] | None:
    import ctypes

    fn = getattr(libc, "statx", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    make = ctypes.create_string_buffer

    def signature(path: bytes) -> Sig | None:
        # struct statx, the same on every arch: stx_ino u64 @32, stx_size u64 @40, stx_mtime {i64 sec,
        # u32 nsec} @112. A buffer per call: threads writing different homes' files must not share one.
        buf = make(256)
        if fn(_AT_FDCWD, path, _AT_SYMLINK_NOFOLLOW, _STATX_WANT, buf) != 0:
            return None
        raw = buf.raw
        order = sys.byteorder
        return (int.from_bytes(raw[32:40], order), int.from_bytes(raw[40:48], order),
                int.from_bytes(raw[112:120], order, signed=True) * 1_000_000_000 + int.from_bytes(raw[120:124], order))

    return signature


def _linux() -> Callable[[str, str], str] | None:
    import ctypes

    libc = ctypes.PyDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int

        def call(a: bytes, b: bytes) -> int:
            return fn(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE)
    else:
        nr = _SYS_RENAMEAT2.get(os.uname().machine)
        syscall = getattr(libc, "syscall", None)
        if nr is None or syscall is None:
            return None
        syscall.restype = ctypes.c_long

        def call(a: bytes, b: bytes) -> int:
            return syscall(ctypes.c_long(nr), ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(a), ctypes.c_int(_AT_FDCWD),
                           ctypes.c_char_p(b), ctypes.c_uint(_RENAME_EXCHANGE))

    def swap(new: str, target: str) -> str:
        if call(os.fsencode(new), os.fsencode(target)) != 0:
            raise _unsupported(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)", target)
        return new

    signature = _linux_statx(libc)
    if signature is not None:
        global _VERIFIED

        def verified(new: str, target: str, read: Sig, ours: Sig) -> tuple[str, bool]:
            a, b = os.fsencode(new), os.fsencode(target)
            if call(a, b) != 0:
                raise _unsupported(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)", target)
            out = signature(a)
            if out == read:
                return new, True

            def again(path: str) -> str:
                if call(a, b) != 0:
                    err = ctypes.get_errno()
                    if err == errno.ENOENT:
                        raise FileNotFoundError(err, os.strerror(err), target)
                    raise OSError(err, os.strerror(err), target)
                return path

            return _put_back(again, lambda path: signature(a), new, out, ours, target), False

        _VERIFIED = verified
    return swap


# ── macOS ─────────────────────────────────────────────────────────────────

_RENAME_SWAP = 0x2


def _macos() -> Callable[[str, str], str] | None:
    import ctypes
    import ctypes.util  # only here: it pulls in subprocess/shutil, ~30 ms of every `status` start elsewhere

    libc = ctypes.PyDLL(ctypes.util.find_library("c"), use_errno=True)  # keeps the GIL, see _linux
    fn = getattr(libc, "renamex_np", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def swap(new: str, target: str) -> str:
        if fn(os.fsencode(new), os.fsencode(target), _RENAME_SWAP) != 0:
            raise _unsupported(ctypes.get_errno(), "renamex_np(RENAME_SWAP)", target)
        return new

    return swap


# ── Windows ───────────────────────────────────────────────────────────────

_REPLACEFILE_WRITE_THROUGH = 0x1
_WIN_UNSUPPORTED = {50, 1}  # ERROR_NOT_SUPPORTED, ERROR_INVALID_FUNCTION
_WIN_MISSING = {2, 3}  # ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND


def _windows() -> Callable[[str, str], str] | None:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    fn = kernel32.ReplaceFileW
    fn.argtypes = [ctypes.c_wchar_p, ctypes.c_wchar_p, ctypes.c_wchar_p, ctypes.c_uint, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def swap(new: str, target: str) -> str:
        backup = new + ".displaced"
        if not fn(target, new, backup, _REPLACEFILE_WRITE_THROUGH, None, None):
            err = ctypes.get_last_error()  # type: ignore[attr-defined]
            if err in _WIN_MISSING and not os.path.exists(target):
                raise FileNotFoundError(errno.ENOENT, "nothing to exchange with", target)
            if err in _WIN_UNSUPPORTED:
                raise ExchangeUnsupported(errno.ENOTSUP, f"ReplaceFileW unsupported here (error {err})", target)
            raise OSError(errno.EIO, f"ReplaceFileW failed (error {err})", target)
        return backup

    return swap


# Put-back rounds before giving up: each round is two syscalls (microseconds); a Hermes write needs its own
# temp file, write and fsync before its rename, so even one extra round is rarely needed.
_PUT_BACK_ROUNDS = 64
_VERIFIED: Callable[[str, str, Sig, Sig], tuple[str, bool]] | None = None


def _load() -> tuple[Callable[[str, str], str] | None, str]:
    try:
        if sys.platform.startswith("linux"):
            return _linux(), "renameat2(RENAME_EXCHANGE)"
        if sys.platform == "darwin":
            return _macos(), "renamex_np(RENAME_SWAP)"
        if os.name == "nt":
            return _windows(), "ReplaceFileW (backup name)"
    except (OSError, AttributeError):
        pass
    return None, "none"


_LOADED: tuple[Callable[[str, str], str] | None, str] | None = None


def _impl() -> tuple[Callable[[str, str], str] | None, str]:
    """(the swap, its name), loaded once on first use (a race loads it twice, harmlessly)."""
    global _LOADED
    if _LOADED is None:
        _LOADED = _load()
    return _LOADED


def mechanism() -> str:
    """The primitive this OS offers (``none`` when there is none)."""
    swap, name = _impl()
    return name if swap is not None else "none"


def swap_in(new: str, target: str) -> str:
    """Atomically put the file ``new`` at ``target`` and return the path that now holds the file it displaced.

    Both must exist in the same directory. Raises :class:`FileNotFoundError` when ``target`` (or ``new``)
    does not exist, :class:`ExchangeUnsupported` when this OS or filesystem cannot exchange.
    """
    swap = _impl()[0]
    if swap is None:
        raise ExchangeUnsupported(errno.ENOSYS, "no atomic exchange on this platform", target)
    return swap(new, target)


def swap_in_verified(new: str, target: str, read: Sig, ours: Sig) -> tuple[str, bool]:
    """:func:`swap_in`, then: if the displaced file is not the one the caller read (signature ``read``), put
    it straight back — and a still newer one that comes out instead of ours (signature ``ours``) — so our
    version was visible for two syscalls only. Returns (the path holding the displaced file or, when put
    back, ours; whether the displaced file was the one read).

    Both steps run without releasing the GIL where the OS allows (Linux), and with this thread's signals
    held back (POSIX main thread): a Ctrl-C or a signal handler that raises can only land before or after
    them, never between the exchange and the put-back, where it would leave ours in place and Hermes'
    version under our temp name. Raises :class:`PutBackIncomplete` when the put-back cannot finish: the
    file at its ``filename`` may be the newest version, and must be kept."""
    _impl()  # sets _VERIFIED where the OS has a verified form
    held = _hold_signals()
    try:
        if _VERIFIED is not None:
            return _VERIFIED(new, target, read, ours)
        back = swap_in(new, target)
        out = _stat_sig(back)
        if out == read:
            return back, True
        return _put_back(lambda path: swap_in(path, target), _stat_sig, back, out, ours, target), False
    finally:
        if held is not None:
            _SIGMASK(signal.SIG_SETMASK, held)  # type: ignore[misc]  # a signal that came meanwhile runs now


try:  # the C functions behind ``signal``: no Signals-enum conversion of the mask (~6 us a write, measured)
    import _signal as _signal_impl
except ImportError:  # pragma: no cover - not CPython
    _signal_impl = signal  # type: ignore[assignment]
_SIGMASK = getattr(_signal_impl, "pthread_sigmask", None)
# The signals a Python handler may be installed for (SIGINT's default one raises KeyboardInterrupt), not
# every valid one: the mask is converted on each call, and all 60-odd cost ~55 us a write, measured.
_HELD = frozenset(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGVTALRM",
                                                 "SIGPROF", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGWINCH", "SIGPIPE",
                                                 "SIGTSTP", "SIGCONT", "SIGXCPU", "SIGXFSZ", "SIGIO", "SIGURG")
                  if hasattr(signal, n))


def _hold_signals() -> object | None:
    """Hold back this thread's signals for a few syscalls; the mask to restore, or None. Python runs
    signal handlers in the main thread only, so only there can one raise in the middle."""
    if _SIGMASK is None or threading.current_thread() is not threading.main_thread():
        return None
    return _SIGMASK(signal.SIG_BLOCK, _HELD)


def _stat_sig(path: str) -> Sig | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _put_back(swap: Callable[[str], str], signature: Callable[[str], Sig | None], path: str, out: Sig | None,
              put_in: Sig, target: str) -> str:
    """Exchange what came out (signature ``out``, at ``path``) back in, until what comes out is what went
    in last round (``put_in``, first ours): then no rename landed in between, and ``target`` holds the
    newest version again. Any other file that comes out was renamed in by a foreign writer after our last
    exchange, so it is newer than what we just put in, and goes back in the next round. Stopping on a
    round count instead (as before) could end one round off and hand the caller the newest Hermes version
    to delete. Returns the path holding the last file out: older than what stands, safe to remove. The
    target vanishing (Hermes removed the file) also settles it: the removal is the newest state.

    Raises :class:`PutBackIncomplete` (its ``filename``: the last file out, which may be the newest) when a
    round fails or a writer renamed in during every round."""
    for _round in range(_PUT_BACK_ROUNDS):
        going_in = out
        try:
            path = swap(path)
        except FileNotFoundError:
            return path
        except OSError as exc:
            raise PutBackIncomplete(exc.errno or errno.EIO, f"putting a version back into {target} failed "
                                    f"({exc.strerror or exc}): the newest version is left at the path given",
                                    path) from exc
        out = signature(path)
        if out == put_in:
            return path
        put_in = going_in  # type: ignore[assignment]
    raise PutBackIncomplete(errno.EBUSY, f"a writer kept renaming over {target} during {_PUT_BACK_ROUNDS} "
                                         "put-back rounds: the newest version is left at the path given", path)


def probe(directory: str) -> tuple[bool, str]:
    """Can files in ``directory`` be exchanged? (True, mechanism) or (False, why). Uses two scratch files."""
    swap, name = _impl()
    if swap is None:
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
            try:
                os.unlink(path)
            except OSError:
                pass
