"""History: what the tray (and the CLI, and the helper) decided, from the decision journal.

Turn decisions and configuration changes (``config-changed``: a home's auto-continue settings or the
tray's own, from the menu, the settings dialog or the CLI) in one list, newest first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hermes_tray.app.icons import app_icon
from hermes_tray_core.numbers import strict_finite

COLUMNS = ("When", "What", "Profile / home", "Session", "Detail")


def _field(entry: Any, name: str, default: Any = "") -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name, default)
    return getattr(entry, name, default)


def _when(entry: Any) -> float:
    """The journal stamps ``created_at``; older in-memory entries used ``time`` / ``ts``."""
    for name in ("created_at", "time", "ts"):
        value = _num(_field(entry, name, None))
        if value:
            return value
    return 0.0


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def _row(entry: Any) -> tuple[str, str, str, str, str]:
    """(what, profile/home, home tooltip, session, detail) for one journal entry."""
    event = str(_field(entry, "event", ""))
    home = str(_field(entry, "home", "") or "")
    if event == "config-changed":
        where = home or "tray settings"
        by = _field(entry, "by", "")
        detail = (f"{_field(entry, 'key', '?')}: {_value(_field(entry, 'old', None))} → "
                  f"{_value(_field(entry, 'new', None))}" + (f" (from the {by})" if by else ""))
        return "settings changed", where, home, "", detail
    profile = str(_field(entry, "profile", "")) or home
    detail = _field(entry, "reason", "") or _field(entry, "outcome", "") or _field(entry, "detail", "")
    return event, profile, home, str(_field(entry, "session_key", "") or ""), str(detail)


class HistoryWindow(QDialog):
    def __init__(self, load: Callable[[], Iterable[Any]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._load = load
        self.setWindowTitle("Hermes Tray — History")
        self.setWindowIcon(app_icon())
        self.resize(760, 420)
        lay = QVBoxLayout(self)
        self.summary = QLabel()
        lay.addWidget(self.summary)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.table, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        refresh = buttons.addButton("Refresh", QDialogButtonBox.ButtonRole.ActionRole)
        refresh.clicked.connect(self.reload)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.reload()

    def reload(self) -> None:
        try:
            entries = list(self._load())
        except Exception as exc:  # the journal is the engine's; a read problem is shown, not raised
            entries = []
            self.summary.setText(f"The decision journal could not be read: {exc}")
        else:
            self.summary.setText(f"{len(entries)} recorded decisions, newest first" if entries else "Nothing recorded yet.")
        entries.sort(key=_when, reverse=True)  # stable: same-stamp entries keep the journal's order
        self.table.setRowCount(len(entries))
        for row, e in enumerate(entries):
            when = _when(e)
            what, where, home, session, detail = _row(e)
            values = (
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) if when else "",
                what,
                where,
                session,
                detail,
            )
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                if col == 2 and home:
                    item.setToolTip(home)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()


def _num(v: Any) -> float:
    return strict_finite(v) or 0.0
