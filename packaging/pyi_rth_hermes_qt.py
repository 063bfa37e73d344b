"""PyInstaller runtime hook, replacing PyInstaller's own ``pyi_rth_pyside6``.

The stock hook imports ``PySide6.QtCore`` at start-up (to add a ``qt.conf`` that PyPI wheels
already embed), which loads Qt and ICU before ``main()`` runs and doubles the start-up time of
every Qt-free command (``--version``, ``status``, ``autostart``). This one only points Qt at the
bundled plugins, which costs nothing; Qt itself loads when the tray first imports it.
"""

import os
import sys


def _hermes_qt_paths() -> None:
    base = getattr(sys, "_MEIPASS", None)
    if not base:
        return
    if sys.platform.startswith("win"):
        qt_dir = os.path.join(base, "PySide6")
        os.environ["PATH"] = base + os.pathsep + os.environ.get("PATH", "")
    else:
        qt_dir = os.path.join(base, "PySide6", "Qt")
    os.environ["QT_PLUGIN_PATH"] = os.path.join(qt_dir, "plugins")


_hermes_qt_paths()
del _hermes_qt_paths
