"""Find bundled resources (icons, desktop-entry templates) wherever the app runs from.

Three layouts: a frozen PyInstaller bundle (``sys._MEIPASS/resources``), a source checkout
(``<repo>/resources``) and an installed wheel (``hermes_tray/_resources``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def resource_root() -> Path:
    frozen_base = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and frozen_base:
        return Path(frozen_base) / "resources"
    package_dir = Path(__file__).resolve().parent
    installed = package_dir / "_resources"
    if installed.is_dir():
        return installed
    return package_dir.parent / "resources"


def resource_path(*parts: str) -> Path:
    return resource_root().joinpath(*parts)
