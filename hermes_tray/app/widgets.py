"""What the tray's windows build alike: wrapped labels, buttons that never take Enter, the Remind-me menu."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QMenu, QPushButton, QWidget

from hermes_tray import words


def text(value: str = "", *, selectable: bool = False, name: str = "", bold: bool = False,
         scale: float = 1.0) -> QLabel:
    """A wrapped label (plain text and selectable when asked: what came from a file is never markup)."""
    label = QLabel(value)
    label.setWordWrap(True)
    if selectable:
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setAccessibleName(name)
    if bold:
        font = QFont(label.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * scale)
        label.setFont(font)
    return label


def button(label: str, slot: Callable[[], object] | None = None, name: str = "", tip: str = "") -> QPushButton:
    """A button that is never the default one (Enter resumes), named for a screen reader when asked."""
    b = QPushButton(label)
    b.setAutoDefault(False)
    if name:
        b.setAccessibleName(name)
    if tip:
        b.setToolTip(tip)
    if slot is not None:
        b.clicked.connect(slot)
    return b


def remind_menu(parent: QWidget, pick: Callable[[str], object]) -> QMenu:
    """Remind me in an hour, or tomorrow: ``pick("1h")`` / ``pick("tomorrow")``."""
    menu = QMenu(parent)
    menu.addAction(words.REMIND_HOUR, lambda: pick("1h"))
    menu.addAction(words.REMIND_TOMORROW, lambda: pick("tomorrow"))
    return menu
