"""Start-up of the tray. Order matters: the instance lock before anything visible (a second launch hands over and
exits without an icon); the icon only once a tray host is there; detection at once, so no turn found
meanwhile is lost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from hermes_tray.app import events
from hermes_tray.app.icons import app_icon
from hermes_tray.app.memory import trim
from hermes_tray.app.menu import TrayMenu
from hermes_tray.app.single_instance import SingleInstance
from hermes_tray.app.tray_icon import WAIT_FOR_TRAY_SECONDS, TrayPresence

# Everything below the icon is imported when first needed: the icon shows first.
if TYPE_CHECKING:
    from hermes_tray.app.prompt_window import PromptWindow
    from hermes_tray.app.status_window import StatusWindow
    from hermes_tray.controller import Controller
    from hermes_tray.model.viewstate import ViewState
    from hermes_tray.watch.detector import DetectorThread, ScanReport
    from hermes_tray_core import TurnId, TurnKey

log = logging.getLogger(__name__)

APP_NAME = "hermes-tray"
APP_DISPLAY_NAME = "Hermes Tray"
ORG_NAME = "Hermes Agent"
ORG_DOMAIN = "hermes-agent.org"
DESKTOP_FILE = "hermes-tray"
VISIBLE_TICK_MS = 1000  # ages on screen move each second while a window shows them
IDLE_TICK_MS = 15000  # only the tooltip otherwise
ICON_FIRST_MS = 1000  # the engine waits at most this long for the own tray item's registration


@dataclass
class TrayOptions:
    """How to start the tray. The demo passes its homes and its "crash the backend" entry."""

    homes: Sequence[str] | None = None
    extra_actions: Sequence[tuple[str, Callable[[], None]]] = field(default_factory=tuple)
    wait_for_tray: float = WAIT_FOR_TRAY_SECONDS
    role: str = "tray"
    engine: Any = None  # an Engine; default CoreEngine(homes)
    autostart: Any = "default"  # an AutoStart, None (unavailable) or "default"
    # Stops what the caller started for the tray (the demo's simulated backend) when the tray fails to start.
    on_start_failed: Callable[[], Any] | None = None
    demo: bool = False  # the demo's simulated Hermes: no app to finish a turn in, no start at login


def configure_application(app: QApplication) -> None:
    app.setApplicationName(APP_NAME)
    app.setApplicationDisplayName(APP_DISPLAY_NAME)
    app.setOrganizationName(ORG_NAME)
    app.setOrganizationDomain(ORG_DOMAIN)
    app.setDesktopFileName(DESKTOP_FILE)
    app.setQuitOnLastWindowClosed(False)
    app.setWindowIcon(app_icon())


def default_autostart() -> Any:
    try:
        from hermes_tray.autostart import get_autostart

        return get_autostart()
    except Exception:  # boundary: the platform's start-at-login back end, whatever it raises
        log.info("start at login is not available here", exc_info=True)
        return None


class TrayApp(QObject):
    """Everything the running tray owns (made once the lock is ours), in two phases: the icon and its menu first
    (what the user waits for), then the engine, the notifier, the controller and the detector thread."""

    def __init__(self, app: QApplication, options: TrayOptions, instance: SingleInstance | None = None) -> None:
        super().__init__()
        self.app = app
        self.options = options
        self.instance = instance
        self.menu = TrayMenu()
        self.menu.set_loading(True)
        for label, callback in options.extra_actions:
            self.menu.add_extra_action(label, callback)
        self.presence = TrayPresence(self.menu, self, wait_seconds=options.wait_for_tray)
        self.presence.shown.connect(self._on_icon_shown)
        self.presence.unavailable.connect(self._show_status_window)
        # what works without the engine (and must, if it fails to start)
        self.menu.logs_requested.connect(self.open_logs)
        self.menu.about_requested.connect(self.show_about)
        self.menu.quit_requested.connect(lambda: self.quit())
        self.start_error: str | None = None
        self._failed_state: ViewState | None = None
        self.status_window: StatusWindow | None = None
        self._window: PromptWindow | None = None
        self._dialogs: dict[str, Any] = {}
        self._messages = 0
        self._trimmed = False
        self._engine_started = False
        # one clock for every age on screen: each second while a window is open, slower otherwise
        self._clock = QTimer(self)
        self._clock.setInterval(IDLE_TICK_MS)
        self._clock.timeout.connect(self._tick)
        self.controller: Controller | None = None
        self.detector_thread: DetectorThread | None = None
        self.notifier: Any = None

    @property
    def window(self) -> PromptWindow:
        """Built on first use: most sessions never open it, and it is the biggest widget tree."""
        if self._window is None:
            from hermes_tray.app.prompt_window import PromptWindow

            self._window = PromptWindow()
            if self.controller is not None:
                self._wire_window()
        return self._window

    def _wire_window(self) -> None:
        w, c = self._window, self.controller
        assert w is not None and c is not None
        w.set_state(c.state)
        w.resume_requested.connect(lambda k: c.resume(k, origin="window"))
        w.skip_requested.connect(lambda k: c.skip(k, origin="window"))
        w.snooze_requested.connect(lambda k, when: c.snooze(k, when, origin="window"))
        w.page_requested.connect(lambda k: self.show_turn_page(key=k, origin="window"))
        w.disable_requested.connect(c.disable_for)
        w.stop_requested.connect(c.stop)
        w.open_folder_requested.connect(self.open_folder)
        w.enable_requested.connect(lambda home: c.set_backend_enabled(True, [home]))

    def _start_engine(self) -> None:
        """Phase two, once, whichever trigger comes first. A failure must not leave the icon "looking for
        interrupted turns" forever: the menu, tooltip and status window say the tray could not start, and why."""
        if self._engine_started:
            return
        self._engine_started = True
        try:
            self._start_engine_unguarded()
        except Exception as exc:  # boundary: the engine's start: said in the tray, never a dead tray
            log.exception("could not start watching for interrupted turns")
            from hermes_tray.words import error_text

            self._start_failed(error_text(exc))

    def _start_failed(self, why: str) -> None:
        from hermes_tray.model.viewstate import Problem, ViewState
        from hermes_tray_core import log_dir

        self.start_error = why
        text = f"Hermes Tray could not start: {why[:200]}. See the log folder."
        state = self._failed_state = ViewState(problems=(Problem(text, folder=str(log_dir())),))
        self.menu.set_loading(False)
        self.menu.set_state(state)
        self.presence.set_state(state)
        if self.presence.icon is not None:
            self.presence.icon.setToolTip(f"Hermes Tray\n{text}")
        if self.status_window is not None:
            self.status_window.set_state(state)
        events.emit("start-failed", error=why[:200])

    def _start_engine_unguarded(self) -> None:
        from hermes_tray.controller import Controller
        from hermes_tray.engine import CoreEngine
        from hermes_tray.notify import make_notifier
        from hermes_tray.watch.detector import Detector, DetectorThread

        options = self.options
        self.engine = options.engine if options.engine is not None else CoreEngine(options.homes)
        autostart = default_autostart() if options.autostart == "default" else options.autostart
        self.notifier = make_notifier(APP_DISPLAY_NAME)
        self.controller = Controller(self.engine, self.notifier, autostart=autostart, demo=options.demo, parent=self)
        self.detector = Detector(
            self.engine.scan, self.engine.watch_plan, self.engine.writers, self.engine.homes(), homes_fn=self.engine.homes,
            exited=self.engine.writer_exited,
        )
        self.detector_thread = DetectorThread(self.detector, self)
        self._wire()
        self.detector_thread.start()

    def _wire(self) -> None:
        c, m = self.controller, self.menu
        assert c is not None
        self.detector.scanned.connect(c.on_scan)
        c.rescan_requested.connect(self.detector.rescan)
        c.state_changed.connect(self._on_state)
        c.present_window.connect(lambda activate: self._present_window(activate))
        c.answer_ready.connect(lambda title, text: self.window.show_answer(title, text))
        c.message.connect(self._on_message)
        c.scan_seen.connect(self._on_scan_seen)

        m.resume_requested.connect(lambda k: c.resume(k, origin="menu"))
        m.skip_requested.connect(lambda k: c.skip(k, origin="menu"))
        m.snooze_requested.connect(lambda k: c.snooze(k, "1h", origin="menu"))
        m.enable_requested.connect(lambda home: c.set_backend_enabled(True, [home]))
        m.stop_requested.connect(c.stop)
        m.resume_all_requested.connect(lambda: c.resume_all(origin="menu"))
        m.open_requested.connect(lambda: self._present_window(True))
        m.backend_enabled_toggled.connect(lambda on: c.set_backend_enabled(on))
        m.mode_selected.connect(c.set_mode)
        m.settings_requested.connect(self.show_settings)
        m.history_requested.connect(self.show_history)
        m.autostart_toggled.connect(c.set_autostart)

        self.presence.clicked.connect(lambda: self._present_window(True))
        self.notifier.ready.connect(
            lambda: events.emit("notifier", backend=self.notifier.name, available=self.notifier.available,
                                actions=self.notifier.supports_actions)
        )
        if self.instance is not None:
            self.instance.handler = self._on_instance_message
        if self._window is not None:  # opened before the engine was up
            self._wire_window()

    # --- lifecycle ----------------------------------------------------------------------------
    def _tick(self) -> None:
        """Ages and elapsed times move: every view re-says them as of now."""
        visible = False
        if self._window is not None and self._window.isVisible():
            self._window.refresh_ages()
            visible = True
        if self.status_window is not None and self.status_window.isVisible():
            self.status_window.refresh()
            visible = True
        if self.menu.isVisible():
            self.menu.refresh_ages()
            visible = True
        self.presence.refresh_tooltip()
        self._clock.setInterval(VISIBLE_TICK_MS if visible else IDLE_TICK_MS)

    def start(self) -> None:
        self._clock.start()
        self.presence.start()
        if self.presence.registering:
            # our own StatusNotifierItem: the panel reads its icon and menu from this thread once the
            # watcher answers, so the engine waits for that (the icon first; at most ICON_FIRST_MS)
            self.presence.shown.connect(lambda: QTimer.singleShot(0, self._start_engine))
            QTimer.singleShot(ICON_FIRST_MS, self._start_engine)
        else:
            QTimer.singleShot(0, self._start_engine)

    def quit(self) -> None:
        self.app.quit()

    def visible(self) -> bool:
        """Has the tray shown the user anything: its icon, the status window or the turns window?"""
        return (self.presence.icon is not None or (self.status_window is not None and self.status_window.isVisible())
                or (self._window is not None and self._window.isVisible()))

    def _became_visible(self) -> None:
        """Only a tray the user can see answers a second launch (which then shows its window here)."""
        if self.instance is not None:
            self.instance.listen()

    def stop_after_failure(self) -> None:
        """Start-up failed: stop what the tray and its caller started (detector, notifier, the demo backend).
        The one-tray lock is kept until the process exits: a second launch meanwhile is told this one did
        not answer, rather than starting over beside it."""
        try:
            self.shutdown(release=False)
        finally:
            if self.options.on_start_failed is not None:
                self.options.on_start_failed()

    def shutdown(self, *, release: bool = True) -> None:
        self.presence.hide()
        if self.controller is not None:
            self.controller.shutdown()
        if self.detector_thread is not None:
            self.detector_thread.stop()
        if self.notifier is not None:
            self.notifier.shutdown()
        if self.instance is not None and release:
            self.instance.release()

    # --- reactions ----------------------------------------------------------------------------
    def _on_state(self, state: ViewState) -> None:
        self.menu.set_loading(False)
        self.menu.set_state(state)
        self.presence.set_state(state)
        if self._window is not None:
            self._window.set_state(state)
        if not self._trimmed:
            self._trimmed = True
            QTimer.singleShot(2000, trim)  # after the first scan: hand start-up garbage back
        if self.status_window is not None:
            self.status_window.set_state(state)

    def _on_scan_seen(self, report: ScanReport) -> None:
        if events.enabled() and self.controller is not None:
            events.emit_scan(report, pending=len(self.controller.state.pending))

    def _on_icon_shown(self) -> None:
        self._became_visible()
        if self.status_window is not None and self.status_window.isVisible():
            self.status_window.hide()  # a tray host appeared after all: the icon takes over
            events.emit("status-window-hidden")
        icon = self.presence.icon
        g = icon.geometry() if icon is not None else None
        events.emit("tray-shown", geometry=[g.x(), g.y(), g.width(), g.height()] if g else None,
                    backend=self.presence.backend)
        log.info("tray icon shown")
        if events.enabled() and icon is not None:
            def placed() -> None:  # where the tray host put it, once embedded (tests click there)
                r = icon.geometry()
                events.emit("tray-geometry", geometry=[r.x(), r.y(), r.width(), r.height()])

            QTimer.singleShot(600, placed)

    def _show_status_window(self) -> None:
        from hermes_tray.app.status_window import StatusWindow

        self.status_window = StatusWindow(self.menu)  # the icon's menu: History, About, the mode, the log folder…
        sw = self.status_window
        sw.open_requested.connect(lambda: self.window.present(activate=True))
        sw.quit_requested.connect(self.quit)
        if self.controller is not None:
            sw.set_state(self.controller.state)
        elif self._failed_state is not None:
            sw.set_state(self._failed_state)
        sw.show()
        self._became_visible()
        events.emit("status-window")

    def _present_window(self, activate: bool) -> None:
        self.window.present(activate=activate)
        self._clock.start(VISIBLE_TICK_MS)  # ages tick each second from the moment it shows

    def _on_instance_message(self, message: str) -> bool:
        """A later launch's request; True once it is done (the launch is then told so)."""
        if message == "show":
            self.window.present(activate=True)
            return self.window.isVisible()
        if message == "settings":
            self.show_settings()
        elif message == "history":
            self.show_history()
        elif message == "quit":
            self.quit()
        else:
            return False
        return True

    def _on_message(self, text: str) -> None:
        from hermes_tray.notify.note import Note

        self._messages += 1
        self.notifier.show(Note(f"message-{self._messages}", "Hermes Tray", text, log_line="message"))

    def show_settings(self) -> None:
        if self.controller is None:
            return
        from hermes_tray.app.settings_dialog import SettingsDialog

        dlg = self._dialogs.get("settings")
        if dlg is None or not dlg.isVisible():
            dlg = SettingsDialog(self.controller)
        self._bring_up("settings", dlg, event="settings")

    def show_history(self) -> None:
        if self.controller is None:
            return
        from hermes_tray.app.history_window import HistoryWindow

        dlg = self._dialogs.get("history")
        if dlg is None:
            dlg = HistoryWindow(lambda: self.engine.history(500), title_for=self._title_for,
                                pending=lambda ident: self._pending_key(ident) is not None,
                                hermes_titles=lambda turns: self.engine.session_titles(turns, prompts=self._prompts()),
                                watch=self.engine.history_files())
            dlg.resume_requested.connect(self._resume_from_history)
            dlg.page_requested.connect(lambda ident, title: self.show_turn_page(ident=ident, title=title,
                                                                                 origin="history"))
            self.controller.state_changed.connect(lambda _s, d=dlg: d.pending_changed())
        else:
            dlg.reload()
        self._bring_up("history", dlg)

    def _pending_key(self, ident: TurnId) -> TurnKey | None:
        """The turn key of this interruption while it waits (History's row: its newest interruption)."""
        if self.controller is None:
            return None
        return next((item.key for item in self.controller.state.pending
                     if item.record is not None and item.record.turn.ident == ident), None)

    def _prompts(self) -> bool:
        """The ``show_prompts`` setting, as the views last rendered it."""
        return self.controller is None or bool(self.controller.state.show_prompts)

    def _title_for(self, home: str, session_key: str) -> str | None:
        from hermes_tray.format import repeats
        from hermes_tray.model.page import named_turn

        key = named_turn(home, session_key) if self.controller is not None else None
        if key is None or self.controller is None:
            return None
        state = self.controller.state
        for item in (*state.pending, *state.others):
            if item.key == key:
                said = not item.excerpt or item.title.startswith("“") or repeats(item.title, item.excerpt)
                return item.title + ("" if said else f" — “{item.excerpt}”")  # never the same text twice
        return None

    def _resume_from_history(self, ident: TurnId) -> None:
        key = self._pending_key(ident)
        if key is not None and self.controller is not None:
            self.controller.resume(key, origin="history")

    def show_turn_page(self, *, key: TurnKey | None = None, ident: TurnId | None = None, title: str = "",
                       origin: str = "window") -> None:
        """A turn's page (a double-click in the turns window or History): its facts, its decisions, its buttons."""
        if self.controller is None:
            return
        from hermes_tray.app.turn_page import TurnPageDialog
        from hermes_tray.model.page import page_for

        c = self.controller
        try:
            entries = self.engine.history(500)
        except Exception:  # boundary: the page shows what else it knows; the log has why
            log.exception("a turn's page could not read the ledger")
            entries = []
        page = page_for(c.state, entries, key=key, ident=ident, title=title)
        if page is None:
            return
        dlg = TurnPageDialog(page)
        dlg.resume_requested.connect(lambda k: c.resume(k, origin=origin))
        dlg.skip_requested.connect(lambda k: c.skip(k, origin=origin))
        dlg.snooze_requested.connect(lambda k, when: c.snooze(k, when, origin=origin))
        self._bring_up("page", dlg, event="turn-page")

    def open_folder(self, path: str) -> None:
        """A problem's folder (the banner's "Open folder"), in the desktop's file manager, else its path."""
        from hermes_tray.app.reveal import open_or_show

        if path:
            self._dialogs["path"] = open_or_show("Folder", path)

    def open_logs(self) -> None:
        from hermes_tray.app.reveal import open_or_show
        from hermes_tray_core import ensure_private_dir, log_dir

        path = ensure_private_dir(log_dir())
        self._dialogs["path"] = open_or_show("Log folder", str(path))

    def show_about(self) -> None:
        from hermes_tray.app.about import AboutDialog

        homes = [str(getattr(h, "path", h)) for h in (self.controller.report.homes if self.controller else ())]
        command = None
        if self.controller is not None and self.controller.settings.hermes_command:
            command = list(self.controller.settings.hermes_command)
        self._bring_up("about", AboutDialog(homes, command), event="about")

    def _bring_up(self, name: str, dlg: QWidget, *, event: str = "") -> None:
        """Keep ``dlg`` (the one ``name`` window of its kind) and show it in front, focused: the user asked for it."""
        self._dialogs[name] = dlg
        dlg.show()
        dlg.raise_()
        dlg.activateWindow()
        if event:
            events.emit("window", name=event)


def run_tray(options: TrayOptions | None = None, argv: list[str] | None = None) -> int:
    """Run the tray until Quit/SIGTERM. Returns the exit code (0 also for a handed-over second launch)."""
    from hermes_tray.app.logging_setup import setup_logging
    from hermes_tray.app.memory import limit_arenas
    from hermes_tray.app.signals import install_quit_on_signals

    options = options or TrayOptions()
    limit_arenas()
    setup_logging("hermes-tray", verbose=bool(os.environ.get("HERMES_TRAY_VERBOSE")))
    app = QApplication.instance() or QApplication(argv or ["hermes-tray"])
    configure_application(app)  # type: ignore[arg-type]
    instance = SingleInstance(options.role)
    if not instance.acquire(listen=False):
        return hand_over(instance)
    tray = TrayApp(app, options, instance)  # type: ignore[arg-type]
    install_quit_on_signals(tray, lambda _sig: app.quit())
    from hermes_tray.app.startup_guard import StartupGuard

    def log_path() -> str:
        from hermes_tray_core import log_dir

        return str(log_dir())

    guard = StartupGuard(visible=tray.visible, stop=tray.stop_after_failure, exit_loop=app.exit,
                         log_path=log_path).install()
    QTimer.singleShot(0, tray.start)
    events.emit("started", pid=os.getpid())
    try:
        code = app.exec()
    finally:
        guard.remove()
        tray.shutdown()
        if guard.failed is not None and options.on_start_failed is not None:
            options.on_start_failed()
        events.emit("stopped", start_failed=guard.failed)
    return int(code)


def hand_over(instance: SingleInstance) -> int:
    """A tray already runs: ask it to show its window. Success only when it said it did."""
    import sys

    delivered = instance.send_to_primary("show")
    events.emit("handed-over", delivered=delivered)
    if delivered:
        log.info("another hermes-tray is running; it showed its window")
        print("hermes-tray is already running: its window is open.", file=sys.stderr)
        return 0
    log.warning("another hermes-tray holds the lock but did not answer")
    print("Another hermes-tray is running but did not answer. It may still be starting, or it is stuck: "
          "quit it (or end its process) and start hermes-tray again.", file=sys.stderr)
    return 1
