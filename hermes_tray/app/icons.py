"""Tray icon states and variants, from the PNGs pre-rendered per size (panels ask for 22 and 24, and a scaled
64 px pixmap blurs at 16 px); their file names are :mod:`hermes_tray.resources`'.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from PySide6.QtGui import QGuiApplication, QIcon

from hermes_tray.resources import IconState, icon_file

__all__ = ["SIZES", "VARIANTS", "IconState", "app_icon", "default_variant", "icon_file", "tray_icon"]

SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
VARIANTS = ("light", "dark", "mono")


def default_variant() -> str:
    """The variant legible on this desktop's panel: ``light`` (a dark glyph for light panels), ``dark``, or
    ``mono`` (a template macOS's menu bar tints)."""
    forced = os.environ.get("HERMES_TRAY_ICON_VARIANT", "").strip().lower()
    if forced in VARIANTS:
        return forced
    if sys.platform == "darwin":
        return "mono"
    # Linux: most panels (GNOME, XFCE, trayer, Cinnamon) are dark whatever the app theme; KDE's and Windows'
    # follow the colour scheme. Asked only there: Qt's enums load in about 15 ms, before the icon shows.
    if sys.platform != "win32" and "KDE" not in os.environ.get("XDG_CURRENT_DESKTOP", "").upper():
        return "dark"
    from PySide6.QtCore import Qt

    try:
        light = QGuiApplication.instance() is not None and QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Light
    except AttributeError:  # Qt < 6.5
        light = False
    return "light" if light else "dark"


@lru_cache(maxsize=32)
def tray_icon(state: IconState | str, variant: str | None = None) -> QIcon:
    """A multi-size QIcon for ``state``; a mono icon is marked as a mask so macOS tints it."""
    variant = variant or default_variant()
    icon = QIcon()
    for size in SIZES:
        path = icon_file(state, variant, size)
        if os.path.exists(path):
            icon.addFile(path)
    if icon.isNull():  # PNGs not shipped: let the SVG icon engine render on demand
        icon = QIcon(icon_file(state, variant))
    if variant == "mono":
        icon.setIsMask(True)
    return icon


def app_icon() -> QIcon:
    """Window icon: the idle glyph on a light background (windows are not panels)."""
    return tray_icon(IconState.IDLE, "light")
