"""History: one row per interrupted turn (what, when, what happened, where it ran) and per configuration change,
with the trail on expand, the page on a double-click, a filter by home, "Resume again" and "Copy session ID".
Live: the ledger's files are watched and each change (any process's) is read a moment later, keeping the
selected row and the open trails.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

from PySide6.QtCore import QFileSystemWatcher, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hermes_tray import words
from hermes_tray.app.icons import app_icon
from hermes_tray.app.widgets import button
from hermes_tray.format import safe_text, short_path, since_text, stamp
from hermes_tray.model.history import (
    TurnHistory,
    event_detail,
    event_text,
    group_turns,
    homes_in,
    profile_of,
    same_home,
    when_of,
)
from hermes_tray_core import TurnId

COLUMNS = ("Turn", "Profile", "When", "What happened", "Where it ran")
TURN_ROLE = Qt.ItemDataRole.UserRole + 1
MAX_COLUMN_PX = 420
DEFAULT_SIZE = (860, 460)  # at least; wider when the columns need it (up to the screen), so none is cut
LIVE_DELAY_MS = 150  # a burst of ledger writes (one resume writes three or four decisions) is read once
READ_ERROR = "The history could not be read. The log folder has the details."

log = logging.getLogger(__name__)


class HistoryWindow(QDialog):
    resume_requested = Signal(object)  # the row's newest interruption (TurnId)
    page_requested = Signal(object, str)  # the row's newest interruption, the name History shows: the turn's page
    titles_arrived = Signal(object, object)  # what was asked, {(home, session key): title} from state.db (off-thread)

    def __init__(
        self,
        load: Callable[[], Iterable[Any]],
        parent: QWidget | None = None,
        *,
        title_for: Callable[[str, str], str | None] = lambda _h, _k: None,
        pending: Callable[[TurnId], bool] = lambda _i: False,
        hermes_titles: Callable[[list[tuple[str, str]]], dict[tuple[str, str], str]] | None = None,
        watch: Iterable[Path] = (),
    ) -> None:
        """``title_for``: what the tray shows for a turn it still lists (title and excerpt); for the others
        (their marker is gone) ``hermes_titles`` asks Hermes' ``state.db`` — blocking, so off the GUI thread,
        and the rows are re-titled when it answers. ``pending``: whether this interruption waits now. ``watch``: the
        ledger's files; History reads it again whenever one changes."""
        super().__init__(parent)
        self._load = load
        self._title_for = title_for
        self._hermes_titles = hermes_titles
        self._titles: dict[tuple[str, str], str] = {}  # what Hermes answered so far
        self._asked: set[tuple[str, str]] = set()
        self.titles_arrived.connect(self._got_titles)
        self._pending = pending
        self._turns: list[TurnHistory] = []
        self._shown: dict[int, TurnHistory] = {}  # the rows on screen, by the id their items carry
        self._watch = [Path(p) for p in watch]
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self._journal_changed)
        self._watcher.directoryChanged.connect(self._journal_changed)
        self._later = QTimer(self)
        self._later.setSingleShot(True)
        self._later.setInterval(LIVE_DELAY_MS)
        self._later.timeout.connect(self.reload)
        self.setWindowTitle("History")  # the app name is added by Qt (application display name)
        self.setWindowIcon(app_icon())
        self.resize(*DEFAULT_SIZE)

        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.summary = QLabel()
        top.addWidget(self.summary, 1)
        home_label = QLabel("&Home:")
        self.home_filter = QComboBox()
        self.home_filter.setAccessibleName("Show the turns of this home")
        home_label.setBuddy(self.home_filter)
        self.home_filter.currentIndexChanged.connect(lambda _i: self._fill())
        top.addWidget(home_label)
        top.addWidget(self.home_filter)
        lay.addLayout(top)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setAccessibleName("Interrupted turns and what happened to them")
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.header().setStretchLastSection(True)  # every column is sized to its text in _fill
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.tree.setExpandsOnDoubleClick(False)  # a double-click opens the turn's page; the arrow shows its trail
        self.tree.itemDoubleClicked.connect(lambda *_: self._open_page())
        lay.addWidget(self.tree, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.resume_button = button("&Resume again", self._resume, "Resume this turn again",
                                    "For a turn resumed before that waits again. Resume a new one from the menu.")
        self.copy_button = button("&Copy session ID", self._copy, "Copy the session ID of this turn")
        for b in (self.resume_button, self.copy_button, button("Re&fresh", self.reload, "Read the history again")):
            buttons.addButton(b, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self._follow()
        self.reload()

    # --- live ---------------------------------------------------------------------------------
    def _follow(self) -> None:
        """Watch the ledger's files and their folder (the first write creates them); while none exists yet, the
        nearest folder above that does."""
        if not self._watch:
            return
        wanted = [str(p) for p in self._watch if p.exists()]
        folder = self._watch[0].parent
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        wanted.append(str(folder))
        stale = [p for p in (*self._watcher.files(), *self._watcher.directories()) if p not in wanted]
        if stale:
            self._watcher.removePaths(stale)
        missing = [p for p in wanted if p not in (*self._watcher.files(), *self._watcher.directories())]
        if missing:
            self._watcher.addPaths(missing)

    def _journal_changed(self, _path: str) -> None:
        self._follow()
        self._later.start()

    def pending_changed(self) -> None:
        """The waiting turns changed (a scan): whether "Resume again" applies may have too."""
        self._update_buttons()

    # --- data ---------------------------------------------------------------------------------
    def reload(self) -> None:
        try:
            entries = list(self._load())
        except Exception:  # boundary: the ledger is the engine's; a read problem is shown, not raised
            log.exception("History could not read the ledger")
            entries = []
            self._error = READ_ERROR
        else:
            self._error = ""
        self._turns = group_turns(entries)
        current = self.home_filter.currentData()
        self.home_filter.blockSignals(True)
        self.home_filter.clear()
        self.home_filter.addItem("All homes", "")
        for home in homes_in(self._turns):
            self.home_filter.addItem(f"{profile_of(home)} — {short_path(home)}", home)
            self.home_filter.setItemData(self.home_filter.count() - 1, home, Qt.ItemDataRole.ToolTipRole)
        index = self.home_filter.findData(current) if current else 0
        self.home_filter.setCurrentIndex(max(0, index))
        self.home_filter.blockSignals(False)
        self._fill()

    def visible_turns(self) -> list[TurnHistory]:
        home = self.home_filter.currentData() or ""
        return [t for t in self._turns if not home or (t.home and same_home(t.home, home))]

    @staticmethod
    def _row_key(t: TurnHistory) -> tuple[object, ...]:
        """The same row across reloads: a turn by its home, session and first run; a change by its time."""
        if t.config:
            return ("config", when_of(t.events[-1]))
        return (t.home, t.session_key, t.started_at)

    def _fill(self) -> None:
        turns = self.visible_turns()
        current = self.selected_turn()
        keep = self._row_key(current) if current is not None else None
        rows = {id(t): t for t in self._turns}
        opened = {self._row_key(old) for item, old in self._rows() if item.isExpanded()}
        scrolled = self.tree.verticalScrollBar().value()
        n = sum(1 for t in turns if not t.config)
        if self._error:
            self.summary.setText(self._error)
        elif turns:
            changes = len(turns) - n
            self.summary.setText(words.count(n, "interrupted turn")
                                 + (f", {words.count(changes, 'settings change')}" if changes else "") + ", newest first")
        else:
            self.summary.setText("Nothing recorded yet.")
        self.tree.clear()
        self._shown = rows
        chosen = None
        for t in turns:
            item = self._row(t)
            self.tree.addTopLevelItem(item)
            key = self._row_key(t)
            if key in opened:
                item.setExpanded(True)
            if key == keep:
                chosen = item
        for col in range(len(COLUMNS)):  # every column as wide as its text (the full text is its tooltip)
            self._fit_column(col)
        self._fit_window()
        chosen = chosen or self.tree.topLevelItem(0)  # None when the list is empty
        if chosen is not None:
            self.tree.setCurrentItem(chosen)
        self.tree.verticalScrollBar().setValue(scrolled)
        self._update_buttons()
        self._ask_hermes_for_titles(turns)

    def _fit_column(self, col: int) -> None:
        """As wide as its text, up to :data:`MAX_COLUMN_PX` (the last column takes the rest)."""
        self.tree.resizeColumnToContents(col)
        self.tree.setColumnWidth(col, min(self.tree.columnWidth(col), MAX_COLUMN_PX))

    def _fit_window(self) -> None:
        """The window grows as wide as its columns need, up to the screen, whenever they grow (titles arrive after
        the first fill): no column is cut off (before: "in your running Her…" with no tooltip)."""
        frame = self.tree.frameWidth() * 2 + self.tree.verticalScrollBar().sizeHint().width() + 4
        needed = sum(self.tree.columnWidth(c) for c in range(len(COLUMNS))) + frame
        layout = self.layout()
        margins = layout.contentsMargins() if layout is not None else None
        width = needed + (margins.left() + margins.right() if margins is not None else 0)
        screen = self.screen().availableGeometry().width() if self.screen() is not None else width
        target = min(width, int(screen * 0.95))
        if target > self.width():
            self.resize(target, self.height())
        if width > max(target, self.width()):  # the screen is narrower still: the title gives way (its tooltip has it)
            self.tree.setColumnWidth(0, max(120, self.tree.columnWidth(0) - (width - max(target, self.width()))))

    def _title(self, t: TurnHistory) -> str:
        """Hermes' title for the session, escaped here (it comes from a file anyone who can write the home wrote)."""
        return safe_text(self._title_for(t.home, t.session_key) or self._titles.get((t.home, t.session_key))
                         or words.untitled_label(t.profile, t.started_at))

    def _ask_hermes_for_titles(self, turns: list[TurnHistory]) -> None:
        ask = self._hermes_titles
        wanted = [(t.home, t.session_key) for t in turns
                  if not t.config and t.home and t.session_key and (t.home, t.session_key) not in self._titles
                  and (t.home, t.session_key) not in self._asked and not self._title_for(t.home, t.session_key)]
        if ask is None or not wanted:
            return
        self._asked.update(wanted)  # in flight; asked again at the next reload unless a title came back

        def work() -> None:
            found: dict[tuple[str, str], str] = {}
            try:
                found = ask(wanted)
            except Exception:  # boundary: a title is a nicety: the row keeps "session …"
                pass
            with suppress(RuntimeError):  # the window was deleted meanwhile
                self.titles_arrived.emit(wanted, found)

        threading.Thread(target=work, name="history-titles", daemon=True).start()

    def _got_titles(self, asked: list, found: dict) -> None:
        self._asked.difference_update(asked)  # a miss (state.db busy, no title yet) is asked again at a reload
        if not found:
            return
        self._titles.update(found)
        for item, t in self._rows():
            item.setText(0, self._title(t))
        self._fit_column(0)
        self._fit_window()

    def _rows(self) -> Iterator[tuple[QTreeWidgetItem, TurnHistory]]:
        """The rows on screen with the turns they show."""
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            t = self._shown.get(item.data(0, TURN_ROLE)) if item is not None else None
            if item is not None and t is not None:
                yield item, t

    def _row(self, t: TurnHistory) -> QTreeWidgetItem:
        if t.config:
            e = t.events[-1]
            what = "Hermes settings changed" if t.home else "Tray settings changed"
            item = QTreeWidgetItem([what, t.profile, stamp(when_of(e)), t.outcome(), ""])
            item.setToolTip(0, safe_text(t.home) or "The tray's own settings")
            item.setToolTip(1, safe_text(t.home))
            item.setToolTip(2, since_text(when_of(e)))
            item.setToolTip(3, t.outcome())
            return item
        title = self._title(t)
        at, what = (t.interrupted_at, "Interrupted") if t.interrupted_at else (t.started_at, "Started")
        when = f"{what} {stamp(at)}" if at else ""  # "Interrupted" only when that moment is known
        item = QTreeWidgetItem([title, t.profile, when, t.outcome(), t.where()])
        item.setData(0, TURN_ROLE, id(t))
        item.setToolTip(0, f"{title}\nSession ID: {safe_text(t.session_key)}")
        item.setToolTip(1, safe_text(t.home))
        if at:
            item.setToolTip(2, f"{what.lower()} {since_text(at)}")
        details = t.outcome_details()
        item.setToolTip(3, t.outcome() + (f"\n{details}" if details and details != t.outcome() else ""))
        if t.where():
            item.setToolTip(4, t.where_details())
        for e in t.events:  # the event trail, on expand
            child = QTreeWidgetItem([event_text(e), "", stamp(when_of(e)), event_detail(e), ""])
            child.setToolTip(3, event_detail(e))
            item.addChild(child)
        return item

    def selected_turn(self) -> TurnHistory | None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        if item is None:
            return None
        return self._shown.get(item.data(0, TURN_ROLE))

    def _update_buttons(self) -> None:
        t = self.selected_turn()
        self.copy_button.setEnabled(t is not None and not t.config)
        self.resume_button.setEnabled(t is not None and t.can_resume_again(self._pending))

    def _open_page(self) -> None:
        t = self.selected_turn()
        if t is not None and t.last is not None:
            self.page_requested.emit(t.last, self._title(t))

    def _copy(self) -> None:
        t = self.selected_turn()
        if t is not None and t.session_key:
            QGuiApplication.clipboard().setText(t.session_key)

    def _resume(self) -> None:
        t = self.selected_turn()
        if t is not None and t.last is not None and t.can_resume_again(self._pending):
            self.resume_requested.emit(t.last)
            self.resume_button.setEnabled(False)
