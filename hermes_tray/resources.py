"""Find bundled resources (icons, desktop-entry templates) wherever the app runs from.

Three layouts, one API:

* a frozen PyInstaller bundle: the spec copies ``resources/`` to ``sys._MEIPASS/resources``;
* an installed wheel: pyproject's package-data ships ``resources/`` as ``hermes_tray/_resources``;
* a source checkout: ``hermes_tray/_resources`` is a symlink to ``<repo>/resources``; where the
  checkout has no symlinks (Windows without ``core.symlinks``) the repo folder is used directly.
"""

from __future__ import annotations

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
