"""Background detection: file-system and process-exit watching, off the GUI thread."""

from hermes_tray import qt_guard as _qt_guard

_qt_guard.install()  # before any other Qt call: see qt_guard (PySide6 refcount bug on Python < 3.12)
