"""macOS: a LaunchAgent plist with ``RunAtLoad``. launchd reads the folder at login, so writing or removing the
plist is the whole switch. Read back: it exists, parses, and is not ``Disabled``.
"""

from __future__ import annotations

import plistlib
from pathlib import Path
from typing import Any

from hermes_tray.autostart import _files
from hermes_tray.autostart.base import BUNDLE_ID, HELPER_BUNDLE_ID, AutoStart


class LaunchAgentAutoStart(AutoStart):
    backend = "launchagent"

    @property
    def label(self) -> str:
        return HELPER_BUNDLE_ID if self.helper else BUNDLE_ID

    @property
    def path(self) -> Path:
        return _files.home() / "Library" / "LaunchAgents" / f"{self.label}.plist"

    @property
    def location(self) -> str:
        return str(self.path)

    def plist(self) -> dict[str, Any]:
        """The exact content written (tests compare it; packaging/macos has the same as a template)."""
        data: dict[str, Any] = {
            "Label": self.label,
            "ProgramArguments": list(self.command),
            "RunAtLoad": True,
            "ProcessType": "Interactive",
            "LimitLoadToSessionType": "Aqua",
        }
        if self.helper:
            data["ProcessType"] = "Background"
            data["KeepAlive"] = {"SuccessfulExit": False}
            data.pop("LimitLoadToSessionType")
        return data

    def _read(self) -> dict[str, Any] | None:
        try:
            with open(self.path, "rb") as fh:
                data = plistlib.load(fh)
        except (OSError, plistlib.InvalidFileException, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def is_enabled(self) -> bool:
        data = self._read()
        return data is not None and data.get("RunAtLoad") is True and not data.get("Disabled", False)

    def registered_command(self) -> list[str] | None:
        data = self._read()
        if not data:
            return None
        args = data.get("ProgramArguments")
        if isinstance(args, list):
            return [str(a) for a in args]
        program = data.get("Program")
        return [str(program)] if program else None

    def enable(self) -> None:
        _files.write_entry(self.path, plistlib.dumps(self.plist(), fmt=plistlib.FMT_XML).decode("utf-8"))

    def disable(self) -> None:
        _files.remove(self.path)
