"""Find bundled resources (icons, desktop-entry templates) wherever the app runs from, and name the icon files.
Three layouts: a frozen bundle (``sys._MEIPASS/resources``); a wheel (package-data ships ``resources/`` as
``hermes_tray/_resources``); a checkout (``_resources`` is a symlink to ``<repo>/resources``, or, without
symlinks, the repo folder is used directly).
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path


def resource_root() -> Path:
    """The folder that holds ``icons/``, ``desktop/`` … for the running layout."""
    frozen_base = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and frozen_base:
        return Path(frozen_base) / "resources"
    package_dir = Path(__file__).resolve().parent
    installed = package_dir / "_resources"
    if installed.is_dir():
        return installed
    return package_dir.parent / "resources"


def resource_path(*parts: str) -> Path:
    """Path of one resource, e.g. ``resource_path("desktop", "hermes-tray.desktop.in")``."""
    return resource_root().joinpath(*parts)


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


#: notification kind -> icon state (the badge says what happened); the "note" variant: the dark glyph in a
#: white outline reads on light and dark notification bubbles alike (the light one vanished on dunst's dark one)
NOTE_ICON_STATES = {"waiting": "attention", "finished": "finished", "gave-up": "gave-up", "failed": "gave-up",
                    "stopped": "idle", "refused": "idle", "info": "idle"}


def note_icon_file(kind: str, size: int = 64) -> str:
    """The PNG a notification of ``kind`` shows (one icon per kind)."""
    state = NOTE_ICON_STATES.get(kind, "idle")
    return str(resource_path("icons", "png", str(size), f"hermes-tray-{state}-note.png"))
