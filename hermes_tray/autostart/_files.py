"""File helpers the file-based backends (XDG, systemd, LaunchAgent) share."""

from __future__ import annotations

import os
from pathlib import Path

from hermes_tray_core import atomic_write_bytes, ensure_private_dir

# Autostart entries, units and plists are launchers, not user state: world-readable like the
# ones desktops and package managers write (0644); only folders we create are private (0700).
ENTRY_MODE = 0o644


def home() -> Path:
    """The user's home; ``HOME`` wins so tests and install scripts can point elsewhere."""
    return Path(os.environ.get("HOME") or Path.home())


def xdg_config_home() -> Path:
    value = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(value) if os.path.isabs(value) else home() / ".config"


def xdg_config_dirs() -> list[Path]:
    value = os.environ.get("XDG_CONFIG_DIRS", "") or "/etc/xdg"
    return [Path(p) for p in value.split(":") if os.path.isabs(p)]


def make_dirs(path: Path) -> None:
    """``mkdir -p`` where every folder created (not only the last) is 0700. Unlike
    :func:`core.stores.fsutil.ensure_private_dir` alone, an existing folder may be a symlink: dotfile managers
    link ``~/.config/autostart`` and ``~/.config/systemd/user``."""
    if not os.path.isdir(path):
        ensure_private_dir(path)


def write_entry(path: Path, text: str) -> None:
    """Atomically write a launcher-type file (0644); a symlink at ``path`` is refused. The folder may itself
    be a symlink (dotfile managers do that); only new folders are made 0700."""
    make_dirs(path.parent)
    atomic_write_bytes(path, text.encode("utf-8"), mode=ENTRY_MODE)


def remove(path: Path) -> bool:
    """Unlink ``path`` (a file or a symlink); False when it was not there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
