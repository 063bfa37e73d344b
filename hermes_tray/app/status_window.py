"""A small status window for desktops without a system tray (GNOME without the extension, kiosks): the icon's
picture, counts and menu, so what the tray offers is reachable without one. Closing hides it to the task bar.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QPushButton, QVBoxLayout, QWidget

from hermes_tray.app.icons import IconState, app_icon, tray_icon
from hermes_tray.model.viewstate import ViewState


class StatusWindow(QWidget):
    open_requested = Signal()
    quit_requested = Signal()

    def __init__(self, menu: QMenu | None = None, parent: QWidget | None = None) -> None:
        """``menu``: the tray icon's menu, offered behind the "Menu" button (not owned here)."""
        super().__init__(parent)
        self.setWindowTitle("Hermes Tray")  # the app's own name: this window stands in for its icon
        self.setWindowIcon(app_icon())
        lay = QHBoxLayout(self)
        self.picture = QLabel()
        self.picture.setFixedSize(QSize(48, 48))
        lay.addWidget(self.picture)
        col = QVBoxLayout()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setMinimumWidth(380)  # a running continuation's line fits without being cut
        self.text.setAccessibleName("Status")
        col.addWidget(self.text)
        row = QHBoxLayout()
        self.open_button = QPushButton("Open turns…")
        self.open_button.clicked.connect(self.open_requested.emit)
        self.menu_button = QPushButton("&Menu")
        self.menu_button.setAccessibleName("Menu: History, settings, the log folder and more")
        self.menu_button.setToolTip("What the tray icon's menu offers: History, the mode, Settings, About…")
        if menu is not None:
            self.menu_button.setMenu(menu)
        self.menu_button.setVisible(menu is not None)
        quit_button = QPushButton("&Quit")
        quit_button.clicked.connect(self.quit_requested.emit)
        for b in (self.open_button, self.menu_button, quit_button):
            row.addWidget(b)
        col.addLayout(row)
        lay.addLayout(col, 1)
        self.set_state(ViewState())

    def refresh(self) -> None:
        """Re-say elapsed times and ages as of now."""
        self.set_state(self._state)

    def set_state(self, state: ViewState) -> None:
        self._state = state
        self.picture.setPixmap(tray_icon(IconState(state.icon_state), "light").pixmap(48, 48))
        self.text.setText(state.tooltip().replace("Hermes Tray\n", "", 1))
        self.open_button.setDefault(bool(state.pending))
        self.adjustSize()  # grow with the text (a continuation adds lines), never cut it
