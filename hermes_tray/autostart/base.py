"""The one interface every start-at-login backend implements, and what they share. ``is_enabled()`` reads the
system every time, never a cached flag, so the menu, the CLI and a user who deleted the entry by hand agree.
"""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

# Identity shared by the desktop entry, the macOS bundle/LaunchAgent and the Windows installer.
APP_NAME = "hermes-tray"
DESKTOP_ID = "hermes-tray"  # hermes-tray.desktop; the Qt app's desktopFileName
HELPER_DESKTOP_ID = "hermes-tray-helper"
BUNDLE_ID = "org.hermes-agent.hermes-tray"  # macOS CFBundleIdentifier and LaunchAgent label
HELPER_BUNDLE_ID = "org.hermes-agent.hermes-tray.helper"
# AppUserModelID on the Windows Start-menu shortcut. Toasts are delivered for the AUMID the
# notifier uses, and desktop-notifier uses its ``app_name`` for unpackaged apps (registering it
# under HKCU\Software\Classes\AppUserModelId): so this is hermes_tray.notify's app name.
WINDOWS_AUMID = "Hermes Tray"


class AutoStartError(RuntimeError):
    """Start at login could not be changed or read; the message says why, for the user."""


@dataclass(frozen=True)
class AutoStartStatus:
    """What the system says right now (for ``autostart status`` and the tray's check mark)."""

    enabled: bool
    backend: str
    location: str
    command: list[str] | None  # what the entry would run, as read back; None when off


class AutoStart(ABC):
    """Start hermes-tray (or its headless helper) with the user's session. ``command`` is the argv to run at
    login; by default :func:`launch_command` works it out from how this process was started (frozen bundle,
    pipx/venv console script, ``-m``)."""

    backend: str = "abstract"

    def __init__(self, command: list[str] | None = None, *, helper: bool = False) -> None:
        self.helper = helper
        self.command = list(command) if command is not None else launch_command(helper=helper)
        if not self.command:
            raise ValueError("empty autostart command")

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the entry lives (a path or a registry key), shown to the user."""

    @abstractmethod
    def is_enabled(self) -> bool:
        """Read the system now; True iff the session will start us at next login."""

    @abstractmethod
    def enable(self) -> None:
        """Create or refresh the entry (idempotent)."""

    @abstractmethod
    def disable(self) -> None:
        """Remove the entry (idempotent)."""

    def registered_command(self) -> list[str] | None:
        """The argv the existing entry runs, as read back; None when there is none."""
        return None

    def status(self) -> AutoStartStatus:
        enabled = self.is_enabled()
        return AutoStartStatus(
            enabled=enabled,
            backend=self.backend,
            location=self.location,
            command=self.registered_command() if enabled else None,
        )

    def set_enabled(self, enabled: bool) -> None:
        """Enable or disable, then read back: raise if the system does not agree."""
        if enabled:
            self.enable()
        else:
            self.disable()
        if self.is_enabled() != enabled:
            state = "on" if enabled else "off"
            raise AutoStartError(f"start at login was set {state} at {self.location}, but the system still reports otherwise")


def launch_command(*, helper: bool = False) -> list[str]:
    """Argv that starts this same installation at login. Frozen: the bundle's executable (already the
    stable install path after ``install.sh``). pip/pipx: the ``hermes-tray`` console script beside the
    interpreter, so the venv is kept; ``python -m hermes_tray`` as a last resort (pythonw on Windows: no
    console window)."""
    extra = ["helper"] if helper else []
    exe = Path(sys.executable)
    if getattr(sys, "frozen", False):
        exe = exe.resolve()
        # Windows bundles carry a console twin (hermes-tray-cli.exe) for the command line; login
        # must start the windowed one, or a console window opens with every session.
        if exe.name.lower() == f"{APP_NAME}-cli.exe" and (exe.parent / f"{APP_NAME}.exe").is_file():
            exe = exe.parent / f"{APP_NAME}.exe"
        return [str(exe), *extra]
    scripts = exe.parent
    if os.name == "nt":
        if not helper:
            pythonw = scripts / "pythonw.exe"
            if pythonw.is_file():
                return [str(pythonw), "-m", "hermes_tray", *extra]
        script = scripts / f"{APP_NAME}.exe"
    else:
        script = scripts / APP_NAME
    if script.is_file():
        return [str(script), *extra]
    return [str(exe), "-m", "hermes_tray", *extra]
