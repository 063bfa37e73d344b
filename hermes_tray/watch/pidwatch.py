"""Wake up the moment a marker's writer process exits, without polling.

One small interface, one implementation per OS: on Linux a ``pidfd`` (readable when the process
exits) under a ``QSocketNotifier`` — under 1 ms from SIGKILL to wake-up; elsewhere one waiting
thread per watched process (``psutil.Process.wait``). Both run in the thread that owns the
watcher and report through the ``exited`` signal.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import psutil
from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from core.procid import process_liveness

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
    """The pid still names the writer (not a recycled pid) and is not a zombie.

    ``unknown`` counts as the same: keep watching rather than declare it dead.
    """
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


class ThreadPidWatcher(PidWatcher):
    """Portable: a daemon thread blocks in ``psutil.Process.wait`` per watched process."""

    _exited_internal = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watches: dict[int, threading.Event] = {}
        self._exited_internal.connect(self._on_exit)  # queued into this object's thread

    def watch(self, pid: int, start_time: float | None = None) -> bool:
        if pid in self._watches:
            return True
        if not _same_process(pid, start_time):
            return False
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return False
        cancel = threading.Event()
        self._watches[pid] = cancel

        def wait() -> None:
            while not cancel.is_set():
                try:
                    proc.wait(timeout=3600)
                except psutil.TimeoutExpired:
                    continue
                except Exception:
                    pass
                break
            if not cancel.is_set():
                self._exited_internal.emit(pid)

        threading.Thread(target=wait, name=f"pidwait-{pid}", daemon=True).start()
        return True

    def _on_exit(self, pid: int) -> None:
        if self._watches.pop(pid, None) is not None:
            self.exited.emit(pid)

    def unwatch(self, pid: int) -> None:
        cancel = self._watches.pop(pid, None)
        if cancel is not None:
            cancel.set()  # the thread ends at its process's exit; it reports nothing

    def watched(self) -> set[int]:
        return set(self._watches)


def make_pid_watcher(parent: QObject | None = None) -> PidWatcher:
    """The best watcher for this OS (pidfd on Linux when the kernel has it)."""
    if sys.platform.startswith("linux") and hasattr(os, "pidfd_open"):
        try:
            os.close(os.pidfd_open(os.getpid()))
            return PidfdWatcher(parent)
        except OSError:
            pass
    return ThreadPidWatcher(parent)
