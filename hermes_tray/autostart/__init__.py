"""Start at login: one small interface (:class:`AutoStart`), one implementation per OS.

``get_autostart()`` picks the backend for this platform; ``helper=True`` starts the headless
helper instead of the tray (a systemd user unit on Linux). Nothing here imports Qt.
"""

from __future__ import annotations

import sys

from hermes_tray.autostart.base import (
    AutoStart,
    AutoStartError,
    AutoStartStatus,
    launch_command,
)

__all__ = ["AutoStart", "AutoStartError", "AutoStartStatus", "get_autostart", "launch_command"]


def get_autostart(*, helper: bool = False, command: list[str] | None = None, platform: str | None = None) -> AutoStart:
    """The backend for ``platform`` (default ``sys.platform``)."""
    platform = platform or sys.platform
    if platform.startswith("win"):
        from hermes_tray.autostart.windows import WindowsRunAutoStart

        return WindowsRunAutoStart(command, helper=helper)
    if platform == "darwin":
        from hermes_tray.autostart.launchagent import LaunchAgentAutoStart

        return LaunchAgentAutoStart(command, helper=helper)
    if helper:
        from hermes_tray.autostart.systemd import SystemdUserAutoStart

        return SystemdUserAutoStart(command, helper=True)
    from hermes_tray.autostart.xdg import XdgAutoStart

    return XdgAutoStart(command, helper=False)
