"""Wake up the moment a marker's writer process exits, without polling: on Linux a ``pidfd`` under a
``QSocketNotifier`` (under 1 ms from SIGKILL to wake-up); elsewhere one cancellable waiting thread per process in
the OS's own exit wait (``kqueue`` ``NOTE_EXIT``; ``WaitForMultipleObjects`` on Windows; a slow poll only where
neither exists). Both report through ``exited`` in the thread that owns the watcher.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from hermes_tray_core import process_liveness

log = logging.getLogger(__name__)


class PidWatcher(QObject):
    """Watch processes for exit. ``exited(pid)`` fires once per watched process."""

    exited = Signal(int)

    def watch(self, pid: int, start_time: float | None = None) -> bool:
        """Start watching; False if the process is already gone (or is not the one meant)."""
        raise NotImplementedError

    def unwatch(self, pid: int) -> None:
        raise NotImplementedError

    def watched(self) -> set[int]:
        raise NotImplementedError

    def clear(self) -> None:
        for pid in list(self.watched()):
            self.unwatch(pid)


def _same_process(pid: int, start_time: float | None) -> bool:
    """The pid still names the writer (not a recycled pid) and is not a zombie; ``unknown`` counts as the same:
    keep watching rather than declare it dead."""
    return process_liveness(pid, start_time) != "dead"


class PidfdWatcher(PidWatcher):
    """Linux ≥ 5.3: the kernel makes the pidfd readable on exit; Qt wakes us through the notifier."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watches: dict[int, tuple[int, QSocketNotifier]] = {}
        self._retired: list[tuple[int, QSocketNotifier]] = []
        self._reaper = QTimer(self)
        self._reaper.setSingleShot(True)
        self._reaper.setInterval(0)
        self._reaper.timeout.connect(self._reap)

    def watch(self, pid: int, start_time: float | None = None) -> bool:
        if pid in self._watches:
            return True
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return False
        except OSError as exc:
            log.debug("pidfd_open(%s) failed: %s", pid, exc)
            return False
        # opened first, checked second: a pid recycled after this check cannot fool the fd
        if not _same_process(pid, start_time):
            os.close(fd)
            return False
        notifier = QSocketNotifier(fd, QSocketNotifier.Type.Read, self)
        notifier.activated.connect(lambda *_a, p=pid: self._on_exit(p))
        self._watches[pid] = (fd, notifier)
        return True

    def _on_exit(self, pid: int) -> None:
        self.unwatch(pid)
        self.exited.emit(pid)

    def unwatch(self, pid: int) -> None:
        entry = self._watches.pop(pid, None)
        if entry is None:
            return
        fd, notifier = entry
        notifier.setEnabled(False)
        # never destroy a notifier from inside its own activation: retire it, free it later
        self._retired.append((fd, notifier))
        if not self._reaper.isActive():
            self._reaper.start()

    def _reap(self) -> None:
        retired, self._retired = self._retired, []
        for fd, notifier in retired:
            notifier.setParent(None)  # the Python wrapper now owns it and frees it here
            os.close(fd)

    def watched(self) -> set[int]:
        return set(self._watches)


class ExitWaiter:
    """Blocks one thread until one process exits (``wait`` True) or :meth:`cancel` (False, from any thread). Used
    once: ``arm`` (the OS handle first, the identity second: a pid recycled after the check cannot fool the
    handle) → ``wait`` (in its thread) → ``close``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def arm(self, start_time: float | None) -> bool:
        raise NotImplementedError

    def wait(self) -> bool:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the handles (called by the waiting thread when ``wait`` returned)."""


class _PipeCancel:
    """A self-pipe: ``cancel`` makes ``rfd`` readable; safe against a concurrent ``close``."""

    def __init__(self) -> None:
        self.rfd, self.wfd = os.pipe()
        self._lock = threading.Lock()
        self._closed = False

    def cancel(self) -> None:
        with self._lock:
            if not self._closed:
                with contextlib.suppress(OSError):
                    os.write(self.wfd, b"x")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self.rfd)
                os.close(self.wfd)


class _PipeWaiter(ExitWaiter):
    """A waiter cancelled through a :class:`_PipeCancel`."""

    _cancel: _PipeCancel | None = None

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()

    def close(self) -> None:
        if self._cancel is not None:
            self._cancel.close()


class PidfdWaiter(_PipeWaiter):
    """Linux ≥ 5.3: ``select`` on the pidfd and a cancel pipe."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self._fd: int | None = None

    def arm(self, start_time: float | None) -> bool:
        try:
            self._fd = os.pidfd_open(self.pid)
        except OSError:
            return False
        if not _same_process(self.pid, start_time):
            return False
        self._cancel = _PipeCancel()
        return True

    def wait(self) -> bool:
        assert self._fd is not None and self._cancel is not None
        ready, _w, _x = select.select([self._fd, self._cancel.rfd], [], [])
        return self._fd in ready

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


class KqueueWaiter(_PipeWaiter):
    """macOS / BSD: ``kqueue`` with ``EVFILT_PROC``/``NOTE_EXIT`` on the pid and a cancel pipe."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self._kq: Any = None

    def arm(self, start_time: float | None) -> bool:
        kq = select.kqueue()  # type: ignore[attr-defined]
        try:
            kq.control([select.kevent(self.pid, filter=select.KQ_FILTER_PROC,  # type: ignore[attr-defined]
                                      flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,  # type: ignore[attr-defined]
                                      fflags=select.KQ_NOTE_EXIT)], 0, 0)  # type: ignore[attr-defined]
        except OSError:  # ESRCH: already gone
            kq.close()
            return False
        self._kq = kq
        if not _same_process(self.pid, start_time):
            return False
        self._cancel = _PipeCancel()
        kq.control([select.kevent(self._cancel.rfd, filter=select.KQ_FILTER_READ,  # type: ignore[attr-defined]
                                  flags=select.KQ_EV_ADD)], 0, 0)  # type: ignore[attr-defined]
        return True

    def wait(self) -> bool:
        assert self._kq is not None
        while True:
            events = self._kq.control(None, 1, None)
            if events:  # the process's exit, or the cancel pipe
                ev = events[0]
                return bool(ev.filter == select.KQ_FILTER_PROC and ev.ident == self.pid)  # type: ignore[attr-defined]

    def close(self) -> None:
        if self._kq is not None:
            self._kq.close()
            self._kq = None
        super().close()


class WindowsWaiter(ExitWaiter):
    """Windows: ``WaitForMultipleObjects`` on ``OpenProcess(SYNCHRONIZE)`` and a cancel event."""

    SYNCHRONIZE = 0x00100000
    PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
    INFINITE = 0xFFFFFFFF
    WAIT_OBJECT_0 = 0

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self._k32: Any = None
        self._proc = None
        self._event = None
        self._lock = threading.Lock()

    @staticmethod
    def _kernel32() -> Any:
        import ctypes
        from ctypes import wintypes

        k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        k32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
        k32.OpenProcess.restype = wintypes.HANDLE
        k32.CreateEventW.argtypes = (wintypes.LPVOID, wintypes.BOOL, wintypes.BOOL, wintypes.LPCWSTR)
        k32.CreateEventW.restype = wintypes.HANDLE
        k32.SetEvent.argtypes = (wintypes.HANDLE,)
        k32.SetEvent.restype = wintypes.BOOL
        k32.CloseHandle.argtypes = (wintypes.HANDLE,)
        k32.CloseHandle.restype = wintypes.BOOL
        k32.WaitForMultipleObjects.argtypes = (wintypes.DWORD, ctypes.POINTER(wintypes.HANDLE),
                                               wintypes.BOOL, wintypes.DWORD)
        k32.WaitForMultipleObjects.restype = wintypes.DWORD
        return k32

    def arm(self, start_time: float | None) -> bool:
        self._k32 = k32 = self._kernel32()
        self._proc = k32.OpenProcess(self.SYNCHRONIZE | self.PROCESS_QUERY_LIMITED_INFORMATION, False, self.pid)
        if not self._proc:
            return False
        if not _same_process(self.pid, start_time):
            return False
        self._event = k32.CreateEventW(None, True, False, None)
        return bool(self._event)

    def wait(self) -> bool:
        from ctypes import wintypes

        handles = (wintypes.HANDLE * 2)(self._proc, self._event)
        got = self._k32.WaitForMultipleObjects(2, handles, False, self.INFINITE)
        return got == self.WAIT_OBJECT_0  # index 0: the process; 1: cancelled; WAIT_FAILED: give up

    def cancel(self) -> None:
        with self._lock:
            if self._event:
                self._k32.SetEvent(self._event)

    def close(self) -> None:
        with self._lock:
            for h in (self._proc, self._event):
                if h:
                    self._k32.CloseHandle(h)
            self._proc = self._event = None


class PollWaiter(ExitWaiter):
    """Last resort: ask ``core.process.identity`` every ``interval`` seconds (slow on purpose)."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        super().__init__(pid)
        self.interval = interval
        self._start: float | None = None
        self._cancelled = threading.Event()

    def arm(self, start_time: float | None) -> bool:
        self._start = start_time
        return _same_process(self.pid, start_time)

    def wait(self) -> bool:
        while not self._cancelled.wait(self.interval):
            if not _same_process(self.pid, self._start):
                return True
        return False

    def cancel(self) -> None:
        self._cancelled.set()


WaiterFactory = Callable[[int], ExitWaiter]


def _has_pidfd(platform: str) -> bool:
    """Linux ≥ 5.3 (the call exists and the kernel answers it)."""
    if not (platform.startswith("linux") and hasattr(os, "pidfd_open")):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def waiter_factory(platform: str | None = None) -> WaiterFactory:
    """The best way this OS offers to block until a process exits."""
    platform = sys.platform if platform is None else platform
    if _has_pidfd(platform):
        return PidfdWaiter
    if (platform == "darwin" or "bsd" in platform) and hasattr(select, "kqueue"):
        return KqueueWaiter
    if platform == "win32":
        return WindowsWaiter
    return PollWaiter


class ThreadPidWatcher(PidWatcher):
    """Portable: one waiting thread per watched process, blocked in the OS's own exit wait
    (:func:`waiter_factory`). ``unwatch`` cancels it and its thread ends at once, so watching,
    unwatching and re-watching never piles up threads."""

    _exited_internal = Signal(int, object)

    def __init__(self, parent: QObject | None = None, *, waiter: WaiterFactory | None = None) -> None:
        super().__init__(parent)
        self._factory = waiter or waiter_factory()
        self._watches: dict[int, ExitWaiter] = {}
        self._exited_internal.connect(self._on_exit)  # queued into this object's thread

    def watch(self, pid: int, start_time: float | None = None) -> bool:
        if pid in self._watches:
            return True
        waiter = self._factory(pid)
        try:
            armed = waiter.arm(start_time)
        except Exception:  # boundary: a pid the OS will not let us wait on is watched by the scans instead
            log.debug("cannot wait for %s", pid, exc_info=True)
            armed = False
        if not armed:
            waiter.close()
            return False
        self._watches[pid] = waiter

        def run() -> None:
            try:
                exited = waiter.wait()
            except Exception:  # boundary: the waiter thread's top
                log.debug("waiting for %s failed", pid, exc_info=True)
                exited = False
            finally:
                waiter.close()
            if exited:
                self._exited_internal.emit(pid, waiter)

        threading.Thread(target=run, name=f"pidwait-{pid}", daemon=True).start()
        return True

    def _on_exit(self, pid: int, waiter: object) -> None:
        if self._watches.get(pid) is waiter:  # not a waiter replaced by an unwatch + re-watch
            del self._watches[pid]
            self.exited.emit(pid)

    def unwatch(self, pid: int) -> None:
        waiter = self._watches.pop(pid, None)
        if waiter is not None:
            waiter.cancel()  # its thread returns now and reports nothing

    def watched(self) -> set[int]:
        return set(self._watches)


def make_pid_watcher(parent: QObject | None = None) -> PidWatcher:
    """The best watcher for this OS (pidfd on Linux when the kernel has it)."""
    return PidfdWatcher(parent) if _has_pidfd(sys.platform) else ThreadPidWatcher(parent)
