"""Detection off the GUI thread, in its own ``QThread``: watchers wake a scan (the engine's), its records go to
the controller; a scan that raises is reported as a problem and never stops the thread.

Wake-ups: a directory changed (``QFileSystemWatcher``, 15 ms settle so a temp-file + rename write is read once),
a marker writer exited (pidfd: scanned at once, the latency that matters; ``exited`` hears of it first, so the
engine's witness reads the facts of that moment), or the 30 s safety re-scan. Nothing polls in between.
Under a storm (a writer rewriting the files continuously) a change within :data:`STORM_GAP_S` of the last
change-woken scan, or within ten times that scan's duration, waits until then: a few % of a core
(``tests/bench/bench_storm.py``). The homes are asked again before every scan but a writer-exit one (a new
profile, a home added in the settings), and the watches re-applied when they differ.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QMetaObject, QObject, Qt, QThread, QTimer, Signal, Slot

from hermes_tray.contract import ScanReport, ScanSummary

__all__ = ["Detector", "DetectorThread", "ScanReport"]
from hermes_tray.watch.fswatch import HomeWatcher
from hermes_tray.watch.pidwatch import PidWatcher, make_pid_watcher

log = logging.getLogger(__name__)

SAFETY_RESCAN_MS = 30_000
SETTLE_MS = 15
STORM_GAP_S = 1.0  # at least this long between two scans woken by file changes
STORM_COST_FACTOR = 10  # … and at least this many times the last one's duration


ScanFn = Callable[[Sequence[Any]], tuple[Sequence[Any], Sequence[str], ScanSummary]]
PlanFn = Callable[[Sequence[Any]], tuple[list[Path], list[Path]]]
WritersFn = Callable[[Sequence[Any], Sequence[Any]], list[tuple[int, float | None]]]
HomesFn = Callable[[], Sequence[Any]]

# scans that do not look for new homes first: a writer exit must be read at once, and the
# tray's own actions do not add homes
_KEEP_HOMES = ("writer-exit", "writer-gone", "skip", "resume-finished", "backend-config")


def _home_paths(homes: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(getattr(h, "path", h)) for h in homes)


class Detector(QObject):
    """Watches homes and scans them; all methods run in the detector thread (use the signals)."""

    scanned = Signal(object)  # ScanReport
    _rescan = Signal(str)

    def __init__(
        self,
        scan: ScanFn,
        plan: PlanFn,
        writers: WritersFn,
        homes: Sequence[Any] = (),
        *,
        homes_fn: HomesFn | None = None,
        exited: Callable[[int], object] | None = None,
    ) -> None:
        super().__init__()
        self._exited_fn = exited
        self._scan_fn = scan
        self._plan_fn = plan
        self._writers_fn = writers
        self._homes_fn = homes_fn
        self._homes: tuple[Any, ...] = tuple(homes)
        self._fs: HomeWatcher | None = None
        self._pids: PidWatcher | None = None
        self._settle: QTimer | None = None
        self._safety: QTimer | None = None
        self._pending_reason = ""
        self._pending_since = 0.0
        self._next_change_scan = 0.0  # time.monotonic() before which a change waits (a storm's pace)
        self._gone_seen: set[int] = set()
        self._rescan.connect(self._on_rescan)

    # --- called from any thread -----------------------------------------------------------------
    def rescan(self, reason: str = "request") -> None:
        self._rescan.emit(reason)

    # --- detector thread ----------------------------------------------------------------------
    @Slot()
    def start(self) -> None:
        self._fs = HomeWatcher(self)
        self._fs.changed.connect(self._on_fs_change)
        self._pids = make_pid_watcher(self)
        self._pids.exited.connect(self._on_writer_exit)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(SETTLE_MS)
        self._settle.timeout.connect(lambda: self._scan(self._pending_reason or "change", self._pending_since))
        self._safety = QTimer(self)
        self._safety.setInterval(SAFETY_RESCAN_MS)
        self._safety.timeout.connect(lambda: self._scan("safety", time.time()))
        self._safety.start()
        self._apply_plan()
        self._scan("start", time.time())

    @Slot()
    def stop(self) -> None:
        """Runs in the detector thread: stop timers and watches, then hand the object back to the
        main thread so nothing of it is destroyed from a thread that no longer runs."""
        for t in (self._settle, self._safety):
            if t is not None:
                t.stop()
        if self._fs is not None:
            self._fs.stop()
        if self._pids is not None:
            self._pids.clear()
        app = QCoreApplication.instance()
        if app is not None:
            self.moveToThread(app.thread())

    def _refresh_homes(self) -> bool:
        """Ask the provider for the homes again; re-apply the watches if they changed."""
        if self._homes_fn is None:
            return False
        try:
            homes = tuple(self._homes_fn())
        except Exception:  # boundary: a call into the engine from the detector thread
            log.exception("could not list the homes; keeping the ones watched")
            return False
        if _home_paths(homes) == _home_paths(self._homes):
            return False
        log.info("homes changed: %s", ", ".join(_home_paths(homes)))
        self._homes = homes
        self._apply_plan()
        return True

    def _on_rescan(self, reason: str) -> None:
        self._scan(reason, time.time())

    def _apply_plan(self) -> None:
        if self._fs is None:
            return
        try:
            dirs, files = self._plan_fn(self._homes)
        except Exception:  # boundary: a call into the engine from the detector thread
            log.exception("could not work out what to watch")
            return
        self._fs.set_plan(dirs, files)

    def _on_fs_change(self, path: str) -> None:
        if not self._pending_reason:
            self._pending_since = time.time()
        if self._pending_reason != "profiles":
            self._pending_reason = "profiles" if os.path.basename(path) == "profiles" else "change"
        assert self._settle is not None
        if not self._settle.isActive():
            wait = self._next_change_scan - time.monotonic()
            self._settle.start(max(SETTLE_MS, int(wait * 1000)))

    def _on_writer_exit(self, pid: int) -> None:
        if self._exited_fn is not None:
            try:
                self._exited_fn(pid)  # the engine's witness, at the moment of the death
            except Exception:  # boundary: a call into the engine from the detector thread
                log.exception("the exit of writer %s could not be witnessed", pid)
        self._scan(f"writer-exit:{pid}", time.time())

    def _scan(self, reason: str, woke: float) -> None:
        self._pending_reason = ""
        if self._settle is not None:
            self._settle.stop()
        if self._safety is not None:
            self._safety.start()  # any scan restarts the 30 s safety clock
        rehomed = False
        if not reason.startswith(_KEEP_HOMES):
            rehomed = self._refresh_homes()
        began = time.monotonic()
        try:
            records, problems, extra = self._scan_fn(self._homes)
        except Exception:  # boundary: the engine promises not to raise; the tray never trusts that
            log.exception("scan failed")
            records, problems, extra = (), ("The tray could not look for interrupted turns. The log folder has the "
                                            "details.",), ScanSummary()
        if reason in ("change", "profiles"):
            took = time.monotonic() - began
            self._next_change_scan = began + max(STORM_GAP_S, STORM_COST_FACTOR * took)
        self._watch_writers(records)
        if reason in ("profiles", "safety") and not rehomed:
            self._apply_plan()  # the safety clock also picks up a home that answers again (or stopped answering)
        self.scanned.emit(
            ScanReport(tuple(records), tuple(problems), reason, woke, time.time(), self._homes, extra)
        )

    def _watch_writers(self, records: Sequence[Any]) -> None:
        if self._pids is None:
            return
        try:
            wanted = self._writers_fn(self._homes, records)
        except Exception:  # boundary: a call into the engine from the detector thread
            log.exception("could not list marker writers")
            return
        wanted_pids = {pid for pid, _ in wanted}
        for pid in self._pids.watched() - wanted_pids:
            self._pids.unwatch(pid)
        gone = set()
        for pid, start in wanted:
            try:
                watching = self._pids.watch(pid, start)
            # boundary: one writer that cannot be watched (a pid the OS refuses) never stops the others
            except Exception:
                log.warning("cannot watch process %r for exit; the 30 s re-scan covers it", pid, exc_info=True)
                continue
            if not watching:
                gone.add(pid)  # died between the scan and the watch: look again, once per pid
        fresh = gone - self._gone_seen
        self._gone_seen = gone
        if fresh:
            QTimer.singleShot(0, lambda: self._scan("writer-gone", time.time()))


class DetectorThread(QObject):
    """Owns the thread the detector runs in; start/stop from the GUI thread."""

    def __init__(self, detector: Detector, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.detector = detector
        self.qthread = QThread()
        self.qthread.setObjectName("hermes-tray-detector")
        detector.moveToThread(self.qthread)
        self.qthread.started.connect(detector.start)

    def start(self) -> None:
        self.qthread.start()

    def stop(self, timeout_ms: int = 3000) -> None:
        if self.qthread.isRunning():
            QMetaObject.invokeMethod(self.detector, "stop", Qt.ConnectionType.BlockingQueuedConnection)
            self.qthread.quit()
            self.qthread.wait(timeout_ms)
