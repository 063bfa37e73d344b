"""The Qt application: tray icon, menu, prompt window, settings, history and start-up."""

from hermes_tray import qt_guard as _qt_guard

_qt_guard.install()  # before any other Qt call: see qt_guard (PySide6 refcount bug on Python < 3.12)
