"""History: what the tray (and the CLI, and the helper) decided, from the decision journal."""

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

COLUMNS = ("When", "What", "Profile / home", "Session", "Detail")


def _field(entry: Any, name: str, default: Any = "") -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name, default)
    return getattr(entry, name, default)


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
        entries.sort(key=lambda e: _num(_field(e, "time", _field(e, "ts", 0))), reverse=True)
        self.table.setRowCount(len(entries))
        for row, e in enumerate(entries):
            when = _num(_field(e, "time", _field(e, "ts", 0)))
            home = str(_field(e, "home", ""))
            profile = str(_field(e, "profile", "")) or home
            detail = _field(e, "reason", "") or _field(e, "outcome", "") or _field(e, "detail", "")
            values = (
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) if when else "",
                str(_field(e, "event", "")),
                profile,
                str(_field(e, "session_key", "")),
                str(detail),
            )
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                if col == 2 and home:
                    item.setToolTip(home)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
