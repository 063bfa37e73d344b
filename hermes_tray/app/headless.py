"""The headless helper: the tray's watcher and engine with no GUI (``QCoreApplication``), for desktops without a
tray and unattended ``auto`` mode. While a tray runs for the same user it does not ask (the tray does).

In a terminal it says in two lines what it watches, then one line per interrupted turn it notices; started by
systemd or an autostart entry it prints only what needs the user (no home found, a problem), once per change.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QObject, QTimer

from hermes_tray import words
from hermes_tray.app import events
from hermes_tray.app.single_instance import SingleInstance, instance_running
from hermes_tray.contract import key_of
from hermes_tray.controller import Controller
from hermes_tray.format import safe_text
from hermes_tray.notify import make_notifier
from hermes_tray.watch.detector import Detector, DetectorThread, ScanReport
from hermes_tray_core import ReasonCode, TurnRecord, Verdict

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
        self._terminal = _on_terminal()
        # what the terminal was last told of each turn: said again only when that changes
        self._told: dict[tuple[str, str, float], tuple[object, ...]] | None = None

    def _on_scan_seen(self, report: ScanReport) -> None:
        events.emit_scan(report, scanned=report.finished, homes_found=report.extra.homes_found)
        if self._terminal:
            self._say_turns(report)
        self._say_state()

    def _say(self, line: str) -> None:
        print(f"hermes-tray helper: {safe_text(line)}", flush=True)

    def _say_turns(self, report: ScanReport) -> None:
        """On a terminal: first what is watched (two lines), then one line per interrupted turn it sees — waiting
        for you, being resumed, or left alone and why — named as its notes and the tray's menu name it."""
        state = self.controller.state
        if self._told is None:
            self._told = {}
            homes = report.extra.watching or tuple(str(getattr(h, "path", h)) for h in report.homes)
            self._say(f"watching {words.count(len(homes), 'Hermes home')}: {', '.join(homes)}")
            self._say(f"mode {state.mode}: {_MODE_WORDS.get(str(state.mode), 'see the tray settings')}; "
                      "one line here per interrupted turn (Ctrl-C stops the helper)")
        model = self.controller.model
        for rec in report.records:
            if rec.verdict == Verdict.SKIPPED or rec.code in _RUNS or model.run_of(key_of(rec)) is not None:
                continue  # it runs (in Hermes, or continued by us: "resuming" was said): nothing to say of it
            ident = (str(rec.home), rec.session_key, float(rec.started_at or 0.0))
            reminder, auto = model.reminder_of(rec), model.auto_choice(rec)
            said = (rec.verdict, rec.code, reminder, auto, str(state.mode))
            if self._told.get(ident) == said:
                continue
            self._told[ident] = said
            self._say(turn_line(rec, model.label(rec), mode=str(state.mode), reminder=reminder, auto=auto))

    def _say_state(self) -> None:
        """The helper has no window: what the tray's window would say (no home, a problem) goes to
        its output and log, once per change, instead of saying nothing."""
        state = self.controller.state
        lines = []
        if not state.homes_found:
            lines.append(state.no_home_text() + ".")
        lines += [f"problem: {p.text} — run hermes-tray doctor" for p in state.attention_problems]
        said = getattr(self, "_said", None)
        if lines != said:
            self._said = lines
            for line in lines:
                # on a terminal the line below says it: a warning would repeat it there (logging_setup)
                log.log(logging.INFO if self._terminal else logging.WARNING, "%s", line)
                self._say(line)  # a problem is said even to systemd's journal: once per change

    def start(self) -> None:
        self.detector_thread.start()

    def shutdown(self) -> None:
        self.controller.shutdown()
        self.detector_thread.stop()
        self.notifier.shutdown()


def turn_line(rec: TurnRecord, name: str, *, mode: str, reminder: float | None = None,
              auto: str | None = None) -> str:
    """One interrupted turn as the helper says it on a terminal: what happens to it, which turn (its name, its
    profile), when it stopped, and why it waits or is left alone — the tray's words, never the engine's."""
    import time

    where = "" if rec.profile == "default" else f" ({rec.profile} profile)"
    when = words.when_text(*rec.moment)
    about = f"{name}{where}, {when}"
    if rec.verdict != Verdict.ACTIONABLE or rec.source != "desktop":
        h = words.held(rec.verdict, rec.code, attempts=rec.attempts, source=str(rec.source))
        why = " ".join(x for x in (h.why, h.can_do) if x)
        return f"not resumed: {about}. {h.what}." + (f" {why}" if why else "")
    if reminder is not None:
        return f"waiting: {about}. {words.reminder_text(reminder, time.time())}."
    if auto == "resumed":
        return f"resuming: {about}."
    if mode == "auto" and auto == "declined":
        return f"not resumed automatically: {about}. {words.AUTO_ASKED_BEFORE} hermes-tray resume {rec.session_key}"
    return f"waiting for you: {about}. To resume it: hermes-tray resume {rec.session_key}"


#: a turn running in Hermes (its process, its turn lease, a WebUI worker): not interrupted, nothing to say of it
_RUNS = frozenset({ReasonCode.WRITER_ALIVE, ReasonCode.LEASE_LIVE, ReasonCode.WEBUI_WORKER_ALIVE})

_MODE_WORDS = {"ask": "each interrupted turn is notified and waits for you",
               "auto": "each interrupted turn is resumed at once, then notified",
               "list": "interrupted turns are only listed"}


def _on_terminal() -> bool:
    """Is the helper's output a terminal a person reads (not systemd's journal, not an autostart's /dev/null)?"""
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except (OSError, ValueError):
        return False


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
