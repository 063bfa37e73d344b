"""The headless helper: the tray's watcher and engine with no GUI (``QCoreApplication``).

For desktops without a tray and for unattended ``auto`` mode. Notifications go through
desktop-notifier when a session bus is there (buttons work here too), otherwise to the log.
While a tray runs for the same user the helper does not ask (the tray does); both still agree
on who resumes through the engine's leases.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QObject, QTimer

from hermes_tray.app import events
from hermes_tray.app.single_instance import SingleInstance, instance_running
from hermes_tray.controller import Controller
from hermes_tray.notify import make_notifier
from hermes_tray.watch.detector import Detector, DetectorThread, ScanReport

log = logging.getLogger(__name__)


class HelperApp(QObject):
    def __init__(self, homes: Sequence[str] | None, *, engine=None, notifications: bool = True) -> None:
        super().__init__()
        if engine is None:
            from hermes_tray.engine import CoreEngine

            engine = CoreEngine(homes)
        self.engine = engine
        self.notifier = make_notifier("Hermes Tray", allow_desktop=notifications)
        self.controller = Controller(
            engine, self.notifier, quiet=lambda: instance_running("tray"), role="helper", parent=self
        )
        self.detector = Detector(
            engine.scan, engine.watch_plan, engine.writers, engine.homes(), homes_fn=engine.homes, exited=engine.writer_exited
        )
        self.detector_thread = DetectorThread(self.detector, self)
        self.detector.scanned.connect(self.controller.on_scan)
        self.controller.rescan_requested.connect(self.detector.rescan)
        self.controller.scan_seen.connect(self._on_scan_seen)
        self.controller.present_window.connect(lambda _a: log.info("notification clicked (no window in the helper)"))

    def _on_scan_seen(self, report: ScanReport) -> None:
        events.emit_scan(report, scanned=report.finished, homes_found=report.extra.homes_found)
        self._say_state()

    def _say_state(self) -> None:
        """The helper has no window: what the tray's window would say (no home, a problem) goes to
        its output and log, once per change, instead of saying nothing."""
        state = self.controller.state
        lines = []
        if not state.homes_found:
            lines.append(state.no_home_text() + ".")
        lines += [f"problem: {p.text} — run `hermes-tray doctor`" for p in state.attention_problems]
        said = getattr(self, "_said", None)
        if lines != said:
            self._said = lines
            for line in lines:
                log.warning("%s", line)
                print(f"hermes-tray helper: {line}", flush=True)

    def start(self) -> None:
        self.detector_thread.start()

    def shutdown(self) -> None:
        self.controller.shutdown()
        self.detector_thread.stop()
        self.notifier.shutdown()


def run_helper(homes: Sequence[str] | None = None, *, notifications: bool = True) -> int:
    from hermes_tray.app.logging_setup import setup_logging
    from hermes_tray.app.memory import limit_arenas, trim
    from hermes_tray.app.signals import install_quit_on_signals

    limit_arenas()

    setup_logging("hermes-tray-helper", verbose=bool(os.environ.get("HERMES_TRAY_VERBOSE")))
    app = QCoreApplication.instance() or QCoreApplication(["hermes-tray-helper"])
    app.setApplicationName("hermes-tray")
    app.setOrganizationName("Hermes Agent")
    instance = SingleInstance("helper")
    if not instance.acquire():
        print("hermes-tray helper: already running for this user", flush=True)
        return 1
    helper = HelperApp(homes, notifications=notifications)
    install_quit_on_signals(helper, lambda _sig: app.quit())
    QTimer.singleShot(0, helper.start)
    QTimer.singleShot(5000, trim)  # after start-up and the first scan
    events.emit("started", pid=os.getpid(), role="helper")
    log.info("helper started")
    try:
        code = app.exec()
    finally:
        helper.shutdown()
        instance.release()
        events.emit("stopped")
    return int(code)
