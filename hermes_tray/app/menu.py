"""The tray's context menu, built from a :class:`ViewState`, actions reported as signals. It is never rebuilt while
open (a menu that reshuffles under the pointer makes people click the wrong thing): that waits until it closes.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QActionGroup
from PySide6.QtWidgets import QMenu, QWidget

from hermes_tray import words
from hermes_tray.format import elapsed_text, elide
from hermes_tray.model.viewstate import TurnItem, ViewState

MODES = (("ask", "Ask me"), ("auto", "Resume automatically"), ("list", "Only list them"))
LABEL_CHARS = 64  # a menu entry longer than this is elided (the full text is its tooltip)
MENU_TURNS = 10  # turns listed in the menu; the rest are counted (the turns window lists them all)


class TrayMenu(QMenu):
    resume_requested = Signal(object)  # turn key (opaque)
    skip_requested = Signal(object)
    snooze_requested = Signal(object)  # turn key: remind me in 1 hour
    enable_requested = Signal(str)  # home: turn Hermes auto-continue back on there (a held turn's entry)
    stop_requested = Signal(object)
    resume_all_requested = Signal()
    open_requested = Signal()
    backend_enabled_toggled = Signal(bool)
    mode_selected = Signal(str)
    settings_requested = Signal()
    history_requested = Signal()
    logs_requested = Signal()
    autostart_toggled = Signal(bool)
    about_requested = Signal()
    quit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTitle("Hermes Tray")
        self.setToolTipsVisible(True)
        self._state = ViewState()
        self._loading = False
        self._dirty = False
        self._extra: list[tuple[str, Callable[[], None]]] = []
        self.aboutToHide.connect(self._after_hide)
        self.aboutToShow.connect(self.refresh_ages)  # ages as of the moment it opens
        self.rebuild()

    def add_extra_action(self, label: str, callback: Callable[[], None]) -> None:
        """An entry above Settings (the demo adds "Demo: crash the backend")."""
        self._extra.append((label, callback))
        self.rebuild()

    def set_loading(self, loading: bool) -> None:
        """Before the first scan the menu says so, rather than claiming nothing is interrupted."""
        if loading != self._loading:
            self._loading = loading
            self._changed()

    def set_state(self, state: ViewState) -> None:
        if state != self._state:
            self._state = state
            self._changed()

    def _changed(self) -> None:
        """Rebuild now, or once the menu closes if it is open."""
        if self.isVisible():
            self._dirty = True
        else:
            self.rebuild()

    def _after_hide(self) -> None:
        """The rebuild waits for the event loop's next turn: a menu hides itself BEFORE it activates the chosen
        entry (Return, a click), and rebuilding here would delete that entry under Qt's feet (Quit on an XEmbed
        tray's menu crashed the tray, SIGSEGV in QAction::triggered, while a continuation's elapsed time changed)."""
        if self._dirty:
            QTimer.singleShot(0, self._rebuild_if_dirty)

    def _rebuild_if_dirty(self) -> None:
        if self._dirty and not self.isVisible():
            self._dirty = False
            self.rebuild()

    def refresh_ages(self) -> None:
        """Re-say the ages and elapsed times in the entries, in place (safe while open)."""
        by_key = {t.key: t for t in (*self._state.pending, *self._state.held)}
        runs = {r.key: r for r in self._state.running}
        for act in self.actions():
            key = act.data()
            if key in by_key:
                act.setText(by_key[key].menu_label())
            elif key in runs:
                r = runs[key]
                act.setText(f"Resuming {elide(r.title, 40)} — {elapsed_text(r.elapsed_now())}")

    def _turn_menu(self, item: TurnItem) -> None:
        sub = self.addMenu(item.menu_label())
        # the turn, then what it was doing and why it stopped: one line each
        tip = [item.title, f"“{item.excerpt}”" if item.excerpt else "", item.progress, item.cause]
        sub.menuAction().setToolTip("\n".join(x for x in tip if x))
        sub.menuAction().setData(item.key)
        sub.setToolTipsVisible(True)
        sub.addAction("Resume").triggered.connect(lambda _=False, k=item.key: self.resume_requested.emit(k))
        sub.addAction("Skip").triggered.connect(lambda _=False, k=item.key: self.skip_requested.emit(k))
        if item.reminder is None:
            sub.addAction(words.REMIND_HOUR).triggered.connect(
                lambda _=False, k=item.key: self.snooze_requested.emit(k))
        info_text = words.tries_text(item.attempts)
        if item.reminder is not None:
            info_text += f" · {item.reminder_text()}"
        if item.profile and item.profile != "default":
            info_text += f" · {item.profile} profile"
        sub.addAction(info_text).setEnabled(False)

    def _held_menu(self, item: TurnItem) -> None:
        """A turn held because auto-continue is off in its home: turn it back on there, or skip the turn."""
        sub = self.addMenu(item.menu_label())
        sub.menuAction().setData(item.key)
        sub.addAction("Turn auto-continue on").triggered.connect(
            lambda _=False, h=item.home: self.enable_requested.emit(h))
        sub.addAction("Skip").triggered.connect(lambda _=False, k=item.key: self.skip_requested.emit(k))

    def _more(self, n: int) -> None:
        if n > MENU_TURNS:
            more = self.addAction(f"{words.count(n - MENU_TURNS, 'more turn')} in the turns window…")
            more.triggered.connect(self.open_requested.emit)

    def rebuild(self) -> None:
        self.clear()
        s = self._state
        for r in s.running:
            sub = self.addMenu(f"Resuming {elide(r.title, 40)} — {elapsed_text(r.elapsed_now())}")
            sub.menuAction().setToolTip(r.title)
            sub.menuAction().setData(r.key)
            sub.setToolTipsVisible(True)
            status = sub.addAction(r.status or "starting…")
            status.setEnabled(False)
            stop = sub.addAction(words.STOP_LABEL)
            stop.setToolTip(words.STOP_HINT)
            stop.triggered.connect(lambda _=False, k=r.key: self.stop_requested.emit(k))
        if s.pending:
            head = self.addAction(words.count(len(s.pending), "interrupted turn"))
            head.triggered.connect(self.open_requested.emit)
            for item in s.pending[:MENU_TURNS]:
                self._turn_menu(item)
            self._more(len(s.pending))
            if len(s.pending) > 1:
                self.addAction("Resume all").triggered.connect(self.resume_all_requested.emit)
        if s.held and not s.pending:
            held = self.addAction(s.status_line())
            held.setToolTip("Open the turns window")
            held.triggered.connect(self.open_requested.emit)
            for item in s.held[:MENU_TURNS]:
                self._held_menu(item)
            self._more(len(s.held))
        elif not s.pending and not s.running:
            text = s.status_line(loading=self._loading)
            none = self.addAction(elide(text, LABEL_CHARS))
            none.setToolTip(text)
            none.setEnabled(False)
        self.addAction("Open turns window…").triggered.connect(self.open_requested.emit)
        for problem in s.problems[:3]:
            # a problem opens the turns window, whose banner says what to do and opens the folder
            p = self.addAction(f"⚠ {elide(str(problem), LABEL_CHARS)}")
            p.setToolTip(str(problem))
            p.triggered.connect(self.open_requested.emit)
        if len(s.problems) > 3:
            more = self.addAction(f"⚠ {len(s.problems) - 3} more problems…")
            more.triggered.connect(self.open_requested.emit)
        self.addSeparator()

        backend = self.addAction("Hermes auto-continue")
        backend.setCheckable(True)
        backend.setChecked(s.backend_enabled is not False)
        if s.backend_enabled is None:
            backend.setText("Hermes auto-continue (on in some homes)")
        backend.toggled.connect(self.backend_enabled_toggled.emit)

        modes = self.addMenu("When a turn is interrupted")
        group = QActionGroup(modes)
        for value, label in MODES:
            act = modes.addAction(label)
            act.setCheckable(True)
            act.setChecked(s.mode == value or (value == "list" and s.mode == "off"))  # "off": older name
            group.addAction(act)
            act.triggered.connect(lambda _=False, v=value: self.mode_selected.emit(v))
        self.addSeparator()

        for label, callback in self._extra:
            self.addAction(label).triggered.connect(lambda _=False, cb=callback: cb())
        self.addAction("Settings…").triggered.connect(self.settings_requested.emit)
        self.addAction("History…").triggered.connect(self.history_requested.emit)
        self.addAction("Open log folder").triggered.connect(self.logs_requested.emit)
        login = self.addAction("Start at login")
        login.setCheckable(True)
        login.setChecked(bool(s.autostart))
        login.setEnabled(s.autostart is not None)
        if s.autostart is None and not self._loading:  # greyed out: say why, on the entry itself
            why = words.DEMO_NO_LOGIN if s.demo else words.NO_LOGIN
            login.setText("Start at login — " + ("not in the demo" if s.demo else "not available here"))
            login.setToolTip(why)
        login.toggled.connect(self.autostart_toggled.emit)
        self.addAction("About Hermes Tray").triggered.connect(self.about_requested.emit)
        self.addSeparator()
        self.addAction("Quit").triggered.connect(self.quit_requested.emit)
