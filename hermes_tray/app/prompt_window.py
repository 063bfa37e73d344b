"""The prompt window, the primary place to decide on every desktop: the interrupted turns with Resume (Enter),
Skip, Remind me later and Disable auto-continue, Details and a turn's page; running continuations with Stop; a
finished one's answer. Shown by a notification or auto mode it does not take focus from what the user types;
opened by the user it comes to the front.
"""

from __future__ import annotations

import functools

from PySide6.QtCore import QEvent, QPoint, Qt, Signal, SignalInstance
from PySide6.QtGui import QGuiApplication, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from hermes_tray import words
from hermes_tray.app import events
from hermes_tray.app.icons import app_icon
from hermes_tray.app.widgets import button, remind_menu, text
from hermes_tray.format import elapsed_text, elide, safe_text, since_text
from hermes_tray.model.page import where_text
from hermes_tray.model.viewstate import Problem, RecentItem, RunningItem, TurnItem, ViewState
from hermes_tray_core import TurnKey

KEY_ROLE = Qt.ItemDataRole.UserRole + 1
MIN_WIDTH = 560


class _RunningRow(QFrame):
    """A continuation in progress: title, elapsed time and status, a busy bar and Stop."""

    stop = Signal(object)  # turn key

    def __init__(self, item: RunningItem, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = item.key
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QHBoxLayout(self)
        col = QVBoxLayout()
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        bar = QProgressBar()
        bar.setRange(0, 0)  # busy: a stream has no known length
        bar.setTextVisible(False)
        bar.setMaximumHeight(8)
        # Said before pressing it, on screen (not only in a hover tooltip): Stop ends the turn for good.
        self.hint = QLabel(words.STOP_HINT)
        self.hint.setTextFormat(Qt.TextFormat.PlainText)
        self.hint.setWordWrap(True)
        self.hint.setEnabled(False)  # drawn in the palette's quieter colour
        col.addWidget(self.label)
        col.addWidget(self.status)
        col.addWidget(bar)
        col.addWidget(self.hint)
        lay.addLayout(col, 1)
        self.stop_button = button(words.STOP_LABEL, lambda: self.stop.emit(self.key), "Stop this continuation")
        self.stop_button.setToolTip(words.STOP_HINT)
        self.stop_button.setAccessibleDescription(words.STOP_HINT)
        lay.addWidget(self.stop_button)
        self.update_item(item)

    def update_item(self, item: RunningItem) -> None:
        self.label.setText(f"Resuming {elide(item.title, 60)}")
        self.status.setText(f"{elapsed_text(item.elapsed_now())} · {item.status or 'starting…'}")


class ProblemBanner(QFrame):
    """What the tray could not read, with doctor's advice and a way to the folder; hidden when
    nothing is wrong. One banner for every problem (the first one's folder is the button's)."""

    open_folder = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("problemBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#problemBanner { background: #fff4ce; border: 1px solid #d8a600; border-radius: 4px; }"
                           "#problemBanner QLabel { color: #3b2f00; }")
        self.setAccessibleName("Problems")
        lay = QHBoxLayout(self)
        self.text = text(selectable=True)
        lay.addWidget(self.text, 1)
        self._folder = ""
        self.folder_button = button("Open folder", lambda: self.open_folder.emit(self._folder),
                                     "Open the folder of this problem")
        lay.addWidget(self.folder_button, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    def set_problems(self, problems: tuple[Problem, ...]) -> None:
        if not problems:
            self.setVisible(False)
            return
        lines = [f"⚠ {p.text}" for p in problems[:4]]
        if len(problems) > 4:
            lines.append(f"… and {len(problems) - 4} more")
        advice = next((p.advice for p in problems if p.advice), "")
        if advice:
            lines.append(advice)
        self.text.setText("\n".join(lines))
        self._folder = next((p.folder for p in problems if p.folder), "")
        self.folder_button.setVisible(bool(self._folder))
        self.folder_button.setToolTip(self._folder)
        self.setVisible(True)


def _heading(state: ViewState) -> tuple[str, str]:
    """The window's heading and the line under it, for what the state holds."""
    if state.pending:
        return words.count(len(state.pending), "interrupted turn"), \
            "Hermes stopped before these turns finished. " + words.RESUME_HINT
    if state.running:
        return "Resuming…", "Hermes is continuing the interrupted turn."
    if state.held:
        h = len(state.held)
        return (words.count(h, "interrupted turn") + " held", "Hermes auto-continue is off in "
                + ("their homes." if h != 1 else "its home.") + " Turn it back on below to resume, or skip.")
    if not state.homes_found:
        return "No Hermes home found", (state.no_home_text() + ". Turns cut off by a crash or restart show up here "
                                        "once Hermes has run.")
    if state.unreadable_homes:
        return "Interrupted turns cannot all be seen", state.status_line() + ". Nothing else is waiting."
    if state.attention_problems:
        return words.NO_TURNS, "Nothing is waiting. The tray has a problem to show you below."
    return words.NO_TURNS, words.NOTHING_WAITING


def row_text(t: TurnItem, show_prompts: bool) -> str:
    """A waiting turn's row: its name, its prompt (or that prompts are hidden), when, tries, reminder, profile."""
    lines = [t.title]
    if t.excerpt and not t.title.startswith("“"):
        lines.append(f"“{elide(t.excerpt, 110)}”")
    elif not show_prompts:
        lines.append(words.PROMPT_HIDDEN)
    meta = [t.when.capitalize()]  # "Interrupted 3 s ago" only when that moment is known
    if t.attempts:
        meta.append(f"{words.tries(t.attempts)} so far")
    if t.reminder is not None:
        meta.append(t.reminder_text())
    if t.profile and t.profile != "default":
        meta.append(f"{t.profile} profile")
    lines.append(" · ".join(meta))
    return "\n".join(x for x in lines if x)


def row_tip(t: TurnItem) -> str:
    return f"{t.reason_details}\nSession ID: {safe_text(t.session_key)}\nHome: {safe_text(t.home)}"


def _say_recent(item: QListWidgetItem, r: RecentItem) -> None:
    item.setText(recent_text(r))
    if r.details:
        item.setToolTip(r.details_now)


def recent_text(r: RecentItem) -> str:
    """A Recent row: the turn, what happened and since when, why, what can be done."""
    lines = [f"{r.title} — {r.what}" + (f" · {since_text(r.since)}" if r.since else "")]
    if r.why:
        lines.append(r.why)
    if r.can_do:
        lines.append(r.can_do)
    return "\n".join(lines)


class PromptWindow(QDialog):
    resume_requested = Signal(object)  # turn key (opaque)
    skip_requested = Signal(object)
    snooze_requested = Signal(object, str)  # turn key, when ("1h", "tomorrow")
    page_requested = Signal(object)  # turn key: its page (a double-click)
    disable_requested = Signal(object)  # turn key: disable auto-continue in that turn's home
    stop_requested = Signal(object)
    settings_requested = Signal()
    open_folder_requested = Signal(str)
    enable_requested = Signal(str)  # home: turn Hermes auto-continue back on there

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Interrupted turns")  # Qt adds " — Hermes Tray"
        self.setWindowIcon(app_icon())
        self.setModal(False)
        self.resize(MIN_WIDTH, 380)
        self._state = ViewState()
        self._running_rows: dict[TurnKey, _RunningRow] = {}
        self._focus = "list"  # the list whose selection the details and the Delete key follow

        root = self._root = QVBoxLayout(self)
        self.header = text(bold=True, scale=1.25)
        root.addWidget(self.header)
        self.subheader = text()
        root.addWidget(self.subheader)
        self.banner = ProblemBanner(self)
        self.banner.open_folder.connect(self.open_folder_requested.emit)
        root.addWidget(self.banner)

        self.running_box = QVBoxLayout()
        root.addLayout(self.running_box)

        self.list = QListWidget()
        self.list.setAlternatingRowColors(True)
        self.list.setWordWrap(True)
        self.list.setSpacing(3)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.currentItemChanged.connect(lambda *_: self._picked("list"))
        # Enter resumes through the default button (the list passes the key on); a double-click opens the page
        self.list.itemDoubleClicked.connect(lambda i: self.page_requested.emit(i.data(KEY_ROLE)))
        self.list.setAccessibleName("Interrupted turns")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(lambda pos: self._popup(self.list, "list", pos))
        root.addWidget(self.list, 100)

        detail_row = QHBoxLayout()
        self.detail = text(selectable=True)
        detail_row.addWidget(self.detail, 1)
        self.details_button = QToolButton()
        self.details_button.setText("&Details")
        self.details_button.setCheckable(True)
        self.details_button.setAccessibleName("Show the details of the selected turn")
        self.details_button.toggled.connect(lambda _on: self._update_detail())
        detail_row.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        root.addLayout(detail_row)
        self.details = text(selectable=True, name="Details")  # Hermes' facts: session id, home, pids, reasons
        self.details.setVisible(False)
        root.addWidget(self.details)

        self.answer_title = QLabel("Answer")
        self.answer_title.setVisible(False)
        self.answer = QPlainTextEdit()
        self.answer.setReadOnly(True)
        self.answer.setVisible(False)
        self.answer.setMaximumHeight(140)
        root.addWidget(self.answer_title)
        root.addWidget(self.answer)
        self.recent_title = text("Recent", bold=True)
        root.addWidget(self.recent_title)
        self.recent_list = QListWidget()
        self.recent_list.setAccessibleName("Recent: turns not waiting, what happened and why")
        self.recent_list.setWordWrap(True)
        self.recent_list.setAlternatingRowColors(True)
        self.recent_list.setSpacing(2)
        self.recent_list.currentItemChanged.connect(lambda *_: self._picked("recent"))
        self.recent_list.itemDoubleClicked.connect(lambda _i: self._recent_page())
        self.recent_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.recent_list.customContextMenuRequested.connect(lambda pos: self._popup(self.recent_list, "recent", pos))
        root.addWidget(self.recent_list, 60)
        recent_row = QHBoxLayout()
        self.recent_hint = text()
        recent_row.addWidget(self.recent_hint, 1)
        self.recent_button = button("Turn auto-continue &on", lambda: self._recent_action("enable"),  # its "enable"
                                     "Turn Hermes auto-continue back on for this turn's home")
        recent_row.addWidget(self.recent_button)
        self.recent_skip_button = button("S&kip it", lambda: self._recent_action("skip"),  # the row's "skip"
                                          "Skip this turn: it is not resumed")
        recent_row.addWidget(self.recent_skip_button)
        self.recent_box = QWidget()
        self.recent_box.setLayout(recent_row)
        recent_row.setContentsMargins(0, 0, 0, 0)
        root.addWidget(self.recent_box)
        root.addStretch(1)  # takes the spare room when the list is hidden (only a running continuation)

        self.button_row = QWidget()
        buttons = QHBoxLayout(self.button_row)
        buttons.setContentsMargins(0, 0, 0, 0)
        self.disable_button = button("Disable auto-continue", lambda: self._for_selected(self.disable_requested),
                                     tip="Turns Hermes auto-continue off in this turn's home. The menu turns it back on.")
        buttons.addWidget(self.disable_button)
        buttons.addStretch(1)
        self.snooze_button = button(words.REMIND_LATER, None,
                                    "Remind me of this turn later: it is not resumed or skipped")
        self.snooze_button.setMenu(remind_menu(self, lambda when: self._for_selected(self.snooze_requested, when)))
        buttons.addWidget(self.snooze_button)
        self.skip_button = button("&Skip", lambda: self._for_selected(self.skip_requested))
        buttons.addWidget(self.skip_button)
        self.resume_button = QPushButton("&Resume")
        self.resume_button.setDefault(True)
        self.resume_button.clicked.connect(lambda: self._for_selected(self.resume_requested))
        buttons.addWidget(self.resume_button)
        # the buttons act on the list above them; "Recent" (with its own buttons) comes after them
        root.insertWidget(root.indexOf(self.recent_title), self.button_row)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self).activated.connect(self._delete_pressed)
        self.set_state(self._state)

    # --- size -----------------------------------------------------------------------------------
    def event(self, e: QEvent) -> bool:
        done = super().event(e)
        if e.type() == QEvent.Type.LayoutRequest:  # its content changed: rows, Details, Recent, a continuation
            self._fit()
        return done

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._fit()

    def _fit(self) -> None:
        """The window grows with its content: never shorter than what it shows needs at its width. Qt's own
        minimum leaves wrapped text out (height-for-width), so a list, Details, Recent and a running
        continuation open at once had the continuation's lines drawn over each other."""
        self.setMinimumWidth(max(MIN_WIDTH, self._root.totalMinimumSize().width()))
        self.setMinimumHeight(self._root.minimumHeightForWidth(self.width()))

    # --- state --------------------------------------------------------------------------------
    def set_state(self, state: ViewState) -> None:
        """Update in place: the selection follows its turn, rows appear and vanish live."""
        self._state = state
        selected = self.selected_key()
        n = len(state.pending)
        header, subheader = _heading(state)
        self.header.setText(header)
        self.subheader.setText(subheader)
        self._sync_running(state.running)
        self.banner.set_problems(state.problems)
        self._fill_recent(state)

        self.list.blockSignals(True)
        self.list.clear()
        for t in state.pending:
            item = QListWidgetItem()
            item.setData(KEY_ROLE, t.key)
            self._say_row(item, t)
            self.list.addItem(item)
        self.list.blockSignals(False)
        if n:
            keys = [t.key for t in state.pending]
            self.list.setCurrentRow(keys.index(selected) if selected in keys else 0)
        self.list.setVisible(bool(n))
        self.button_row.setVisible(bool(n))
        if not n:
            self._focus = "recent"
        self._update_buttons()

    def refresh_ages(self) -> None:
        """Say every age and elapsed time as of now, in place (selection and focus untouched)."""
        for i in range(self.list.count()):
            item = self.list.item(i)
            turn = next((t for t in self._state.pending if t.key == item.data(KEY_ROLE)), None)
            if turn is not None:
                self._say_row(item, turn)
        for i in range(self.recent_list.count()):
            item = self.recent_list.item(i)
            k = item.data(KEY_ROLE)
            if isinstance(k, int) and k < len(self._state.recent):
                _say_recent(item, self._state.recent[k])
        self._update_detail()
        for r in self._state.running:
            row = self._running_rows.get(r.key)
            if row is not None:
                row.update_item(r)

    def _say_row(self, item: QListWidgetItem, t: TurnItem) -> None:
        item.setText(row_text(t, self._state.show_prompts))
        item.setToolTip(row_tip(t))

    def _fill_recent(self, state: ViewState) -> None:
        selected = self.recent_list.currentItem().data(KEY_ROLE) if self.recent_list.currentItem() else None
        self.recent_list.blockSignals(True)
        self.recent_list.clear()
        for i, r in enumerate(state.recent):
            item = QListWidgetItem()
            item.setData(KEY_ROLE, i)
            _say_recent(item, r)
            self.recent_list.addItem(item)
        self.recent_list.blockSignals(False)
        show = bool(state.recent)
        for w in (self.recent_title, self.recent_list, self.recent_box):
            w.setVisible(show)
        if show:
            self.recent_list.setCurrentRow(selected if isinstance(selected, int) and selected < len(state.recent)
                                           else 0)
        self._update_recent_buttons()

    def selected_recent(self) -> RecentItem | None:
        item = self.recent_list.currentItem()
        if item is None:
            return None
        i = item.data(KEY_ROLE)
        return self._state.recent[i] if isinstance(i, int) and i < len(self._state.recent) else None

    def _update_recent_buttons(self) -> None:
        r = self.selected_recent()
        actions = r.actions if r is not None else ()
        self.recent_button.setVisible("enable" in actions)
        self.recent_skip_button.setVisible("skip" in actions)
        self.recent_hint.setText("")
        self._update_detail()

    def _recent_action(self, action: str, r: RecentItem | None = None) -> None:
        r = r or self.selected_recent()
        if r is None or action not in r.actions:
            return
        if action == "enable":
            self.enable_requested.emit(r.home)
        elif action == "skip":
            self.skip_requested.emit(r.key)

    def _sync_running(self, running: tuple[RunningItem, ...]) -> None:
        keys = {r.key for r in running}
        for key in list(self._running_rows):
            if key not in keys:
                gone = self._running_rows.pop(key)
                self.running_box.removeWidget(gone)
                gone.deleteLater()
        for r in running:
            row = self._running_rows.get(r.key)
            if row is None:
                row = _RunningRow(r, self)
                row.stop.connect(self.stop_requested.emit)
                self._running_rows[r.key] = row
                self.running_box.addWidget(row)
            else:
                row.update_item(r)

    def selected_key(self) -> TurnKey | None:
        item = self.list.currentItem()
        return item.data(KEY_ROLE) if item is not None else None

    def selected_turn(self) -> TurnItem | None:
        key = self.selected_key()
        return next((t for t in self._state.pending if t.key == key), None)

    def _picked(self, which: str) -> None:
        self._focus = which
        if which == "list":
            self._update_buttons()
        else:
            self._update_recent_buttons()

    def _update_buttons(self) -> None:
        turn = self.selected_turn()
        for b in (self.resume_button, self.skip_button, self.disable_button, self.snooze_button):
            b.setEnabled(turn is not None)
        self._update_detail()

    def _update_detail(self) -> None:
        """The short line under the list, and on demand (Details) Hermes' facts: the session id, the home,
        the engine's own sentence with its pids and reasons."""
        turn = self.selected_turn() if self._focus == "list" else None
        recent = self.selected_recent() if self._focus == "recent" else None
        if turn is not None:
            self.detail.setText(where_text(turn.profile, turn.home))  # when it was interrupted: its row says it
            facts = [turn.reason_details, *turn.facts, f"Session ID: {safe_text(turn.session_key)}",
                     f"Home: {safe_text(turn.home)}"]
        elif recent is not None:
            self.detail.setText("")
            facts = [x for x in (recent.details_now, *recent.facts, f"Session ID: {safe_text(recent.session_key)}"
                                 if recent.session_key else "", f"Home: {safe_text(recent.home)}" if recent.home
                                 else "") if x]
        else:
            self.detail.setText("")
            facts = []
        self.details_button.setVisible(bool(facts))
        self.details.setText("\n".join(facts))
        self.details.setVisible(bool(facts) and self.details_button.isChecked())

    def show_answer(self, title: str, text: str) -> None:
        """A finished continuation's answer (clicking the "finished" notification lands here)."""
        self.answer_title.setText(f"Answer — {elide(title, 60)}")
        self.answer.setPlainText(text)
        self.answer_title.setVisible(True)
        self.answer.setVisible(True)
        events.emit("window", name="answer", chars=len(text))  # how much, never what

    # --- actions ------------------------------------------------------------------------------
    def _for_selected(self, signal: SignalInstance, *args: object) -> None:
        """Emit ``signal`` with the selected turn's key (and ``args``), if a turn is selected."""
        key = self.selected_key()
        if key is not None:
            signal.emit(key, *args)

    def _delete_pressed(self) -> None:
        """Delete skips the selected turn: a waiting one, or one under Recent that can be skipped."""
        if not self.list.hasFocus() and (self._focus == "recent" or self.recent_list.hasFocus()):
            self._recent_action("skip")
        else:
            self._for_selected(self.skip_requested)

    def _recent_page(self) -> None:
        r = self.selected_recent()
        if r is not None:
            self.page_requested.emit(r.key)

    def context_menu_for(self, which: str) -> QMenu:
        """The right-click menu of a list's selected row (tests read it without opening it)."""
        menu = QMenu(self)
        if which == "list":
            turn = self.selected_turn()
            if turn is not None:
                menu.addAction("Resume", lambda: self._for_selected(self.resume_requested))
                menu.addAction("Skip", lambda: self._for_selected(self.skip_requested))
                for act in remind_menu(menu, lambda when: self._for_selected(self.snooze_requested, when)).actions():
                    menu.addAction(act)
                menu.addAction("Open its page", lambda: self.page_requested.emit(turn.key))
                menu.addAction("Disable auto-continue", lambda: self._for_selected(self.disable_requested))
                menu.addAction("Copy session ID", functools.partial(_copy, turn.session_key))
        else:
            r = self.selected_recent()
            if r is not None:
                if "enable" in r.actions:
                    menu.addAction("Turn auto-continue on", lambda: self._recent_action("enable", r))
                if "skip" in r.actions:
                    menu.addAction("Skip", lambda: self._recent_action("skip", r))
                if r.session_key:
                    menu.addAction("Copy session ID", functools.partial(_copy, r.session_key))
        return menu

    def _popup(self, view: QListWidget, which: str, pos: QPoint) -> None:
        item = view.itemAt(pos)
        if item is None:
            return
        view.setCurrentItem(item)
        menu = self.context_menu_for(which)
        if menu.actions():
            menu.exec(view.viewport().mapToGlobal(pos))

    def present(self, *, activate: bool) -> None:
        """Show it; take focus only when the user asked for the window (``activate``)."""
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, not activate)
        if self.isMinimized():
            self.showNormal()
        self.show()
        if activate:
            self.raise_()
            self.activateWindow()
            self.list.setFocus()
        events.emit("window", name="prompt", activate=activate)


def _copy(text: str) -> None:
    QGuiApplication.clipboard().setText(text)
