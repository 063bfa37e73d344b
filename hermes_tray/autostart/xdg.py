"""Linux/BSD desktops: an XDG autostart entry in ``$XDG_CONFIG_HOME/autostart``, read back as session managers do:
the user's entry shadows a system one, and ``Hidden=true`` or ``X-GNOME-Autostart-enabled=false`` mean off.
Turning off with only a system entry present writes a ``Hidden=true`` override.
"""

from __future__ import annotations

from pathlib import Path

from hermes_tray.autostart import _files
from hermes_tray.autostart.base import DESKTOP_ID, AutoStart
from hermes_tray.autostart.desktop_entry import parse_exec, read_entry, render_template

TEMPLATE = "hermes-tray-autostart.desktop.in"


def _entry_enabled(entry: dict[str, str]) -> bool:
    if entry.get("Hidden", "false").strip().lower() == "true":
        return False
    return entry.get("X-GNOME-Autostart-enabled", "true").strip().lower() != "false"


class XdgAutoStart(AutoStart):
    backend = "xdg-autostart"

    @property
    def path(self) -> Path:
        return _files.xdg_config_home() / "autostart" / f"{DESKTOP_ID}.desktop"

    @property
    def location(self) -> str:
        return str(self.path)

    def _effective_entry(self) -> dict[str, str] | None:
        """The entry the session would use: the user's, else the first system one."""
        if self.path.exists() or self.path.is_symlink():
            return read_entry(self.path) or {"Hidden": "true"}  # unreadable: nothing will start
        for base in _files.xdg_config_dirs():
            entry = read_entry(base / "autostart" / f"{DESKTOP_ID}.desktop")
            if entry is not None:
                return entry
        return None

    def is_enabled(self) -> bool:
        entry = self._effective_entry()
        return entry is not None and _entry_enabled(entry)

    def registered_command(self) -> list[str] | None:
        entry = self._effective_entry()
        if entry is None or "Exec" not in entry:
            return None
        return parse_exec(entry["Exec"])

    def enable(self) -> None:
        _files.write_entry(self.path, render_template(TEMPLATE, self.command))

    def disable(self) -> None:
        _files.remove(self.path)
        if self.is_enabled():  # a system-wide entry still applies: shadow it for this user
            _files.write_entry(
                self.path,
                f"[Desktop Entry]\nType=Application\nName=Hermes Tray\nExec={DESKTOP_ID}\nHidden=true\n",
            )
