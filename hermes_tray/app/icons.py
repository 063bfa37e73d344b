"""Tray icon states and variants, loaded from the pre-rendered PNGs in ``resources/icons``.

Pre-rendered sizes rather than an SVG engine: panels ask for odd sizes (22, 24) and a
scaled 64 px pixmap blurs at 16 px; each PNG was rendered for its size.
"""

from __future__ import annotations

import enum
import os
import sys
from functools import lru_cache

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIcon

from hermes_tray.resources import resource_path

SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
VARIANTS = ("light", "dark", "mono")


class IconState(str, enum.Enum):
    """What the tray shows: nothing to do, turns waiting, a continuation running, auto-continue off."""

    IDLE = "idle"
    ATTENTION = "attention"
    BUSY = "busy"
    PAUSED = "paused"


def icon_file(state: IconState | str, variant: str, size: int | None = None) -> str:
    """Path of one rendered PNG (or the SVG source when ``size`` is None)."""
    name = f"hermes-tray-{IconState(state).value}-{variant}"
    if size is None:
        return str(resource_path("icons", "svg", f"{name}.svg"))
    return str(resource_path("icons", "png", str(size), f"{name}.png"))


def default_variant() -> str:
    """Pick the variant that stays legible on this desktop's panel.

    ``light`` = dark glyph for light panels, ``dark`` = light glyph for dark panels, ``mono`` =
    a one-colour template the system tints (macOS menu bar). ``HERMES_TRAY_ICON_VARIANT`` wins.
    """
    forced = os.environ.get("HERMES_TRAY_ICON_VARIANT", "").strip().lower()
    if forced in VARIANTS:
        return forced
    if sys.platform == "darwin":
        return "mono"
    scheme = None
    app = QGuiApplication.instance()
    if app is not None:
        try:
            scheme = QGuiApplication.styleHints().colorScheme()
        except AttributeError:  # Qt < 6.5
            scheme = None
    is_light = scheme == Qt.ColorScheme.Light
    if sys.platform == "win32":
        return "light" if is_light else "dark"
    # Linux: most panels (GNOME, XFCE, trayer, Cinnamon) are dark whatever the app theme;
    # KDE follows the colour scheme.
    desktop = os.environ.get("XDG_CURRENT_DESKTOP", "").upper()
    if "KDE" in desktop and is_light:
        return "light"
    return "dark"


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


#: notification kind -> icon state (the badge says what happened); the "note" variant: the dark glyph in a
#: white outline reads on light and dark notification bubbles alike (the light one vanished on dunst's dark one)
NOTE_ICON_STATES = {"waiting": "attention", "finished": "finished", "gave-up": "gave-up", "failed": "gave-up",
                    "stopped": "idle", "refused": "idle", "info": "idle"}


def note_icon_file(kind: str, size: int = 64) -> str:
    """The PNG a notification of ``kind`` shows (one icon per kind)."""
    state = NOTE_ICON_STATES.get(kind, "idle")
    return str(resource_path("icons", "png", str(size), f"hermes-tray-{state}-note.png"))


def app_icon() -> QIcon:
    """Window icon: the idle glyph on a light background (windows are not panels)."""
    return tray_icon(IconState.IDLE, "light")
