"""Open a folder or file with the desktop's own program; where none takes it (``openUrl`` returns False: no
``xdg-open``, a minimal session), a small window shows the path with a button that copies it.
"""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from hermes_tray.app import events


def path_box(what: str, path: str, parent: QWidget | None = None) -> QMessageBox:
    """The window that stands in for a file manager: where ``what`` is, and Copy path."""
    box = QMessageBox(parent)
    box.setWindowTitle(what)
    box.setIcon(QMessageBox.Icon.Information)
    box.setText(f"No program here opens it. The {what.lower()} is at:")
    box.setInformativeText(path)
    box.setTextInteractionFlags(box.textInteractionFlags())
    copy = box.addButton("&Copy path", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Close)
    copy.clicked.disconnect()  # keep the box open after copying
    copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(path))
    box.setAccessibleName(f"Where the {what.lower()} is")
    return box


def open_or_show(what: str, path: str, parent: QWidget | None = None) -> QMessageBox | None:
    """Open ``path`` with the desktop's program; when none opens it, show :func:`path_box` (returned)."""
    if QDesktopServices.openUrl(QUrl.fromLocalFile(path)):
        events.emit("open-folder", path=path)
        return None
    box = path_box(what, path, parent)
    box.show()
    events.emit("path-shown", what=what)
    return box
