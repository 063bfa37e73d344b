"""What the settings dialog edits, and how its changes are written: Qt-free, so the controller and the helper
need no widgets. The writes block (config.yaml, the tray's settings, start at login): the controller runs them
on its write worker. Each turns a failure into a line the user can read, never an exception.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hermes_tray import words
from hermes_tray.contract import BackendValues, Engine
from hermes_tray.format import short_path

if TYPE_CHECKING:
    from hermes_tray.autostart.base import AutoStart
    from hermes_tray_core import Home, TraySettings

log = logging.getLogger(__name__)

NO_LOGIN_HERE = "Start at login is not available here"


@dataclass
class SettingsSnapshot:
    """Everything the dialog shows, read once when it opens."""

    homes: list[tuple[str, str]]  # (path, label)
    backend: dict[str, BackendValues]  # path -> values
    mode: str = "ask"
    notify: bool = True
    show_prompts: bool = True
    autostart: bool | None = None  # None: not available
    hermes_command: list[str] | None = None
    continuation_idle_timeout: float = 600.0  # seconds without a frame from Hermes before a continuation stops


class SettingsModel(Protocol):
    def snapshot(self) -> SettingsSnapshot: ...

    def apply(self, backend: dict[str, dict[str, Any]], tray: dict[str, Any], autostart: bool | None,
              on_done: Callable[[list[str]], None] | None = None) -> None:
        """Write the changes off the GUI thread; ``on_done(problems)`` follows (empty: all went through)."""
        ...


def autostart_state(autostart: AutoStart | None) -> bool | None:
    """Start at login on (True), off, or not available here (None)."""
    if autostart is None:
        return None
    try:
        return bool(autostart.is_enabled())
    except Exception:  # boundary: a platform's start-at-login store that cannot be read reads "not available"
        return None


def snapshot(engine: Engine, homes: Sequence[Home], settings: TraySettings,
             autostart: AutoStart | None) -> SettingsSnapshot:
    """What the dialog shows: each watched home's auto-continue keys and the tray's own settings."""
    listed = [(str(h.path), short_path(h.label)) for h in homes]
    backend: dict[str, BackendValues] = {}
    for path, _label in listed:
        try:
            backend[path] = engine.backend_values(path)
        except Exception:  # boundary: one home's unreadable config is shown as such, the others still are
            log.exception("engine call backend_values failed")
            backend[path] = BackendValues(error="unreadable")
    return SettingsSnapshot(
        homes=listed,
        backend=backend,
        mode=settings.mode,
        notify=bool(settings.notify),
        show_prompts=bool(settings.show_prompts),
        autostart=autostart_state(autostart),
        hermes_command=list(settings.hermes_command) if settings.hermes_command else None,
        continuation_idle_timeout=float(settings.continuation_idle_timeout),
    )


def existing_homes(homes: Sequence[Home]) -> list[str]:
    """Every watched home that exists (the default root may not, before Hermes first runs)."""
    return [str(h.path) for h in homes if os.path.isdir(h.path)]


def write_backend(engine: Engine, homes: Sequence[str], changes: dict[str, Any]) -> list[str]:
    """Hermes' auto-continue keys in ``homes``; the problems, in words (blocking)."""
    try:
        return engine.set_backend(homes, **changes)
    except Exception as exc:  # boundary: the user is told, the tray goes on
        log.exception("engine call set_backend failed")
        return [words.error_text(exc)]


def write_settings(engine: Engine, changes: dict[str, Any]) -> TraySettings | str:
    """The tray's own settings: the new ones, or why they were not written (blocking)."""
    try:
        return engine.update_settings(changes)
    except Exception as exc:  # boundary: the user is told, the old settings stay
        return str(exc)


def write_autostart(autostart: AutoStart | None, enabled: bool) -> str | None:
    """Start at login on or off: None, or why not (blocking)."""
    if autostart is None:
        return NO_LOGIN_HERE
    try:
        autostart.set_enabled(enabled)
    except Exception as exc:  # boundary: the user is told, the tray goes on
        return str(exc)
    return None


def write_all(engine: Engine, autostart: AutoStart | None, backend: dict[str, dict[str, Any]],
              tray: dict[str, Any], login: bool | None) -> tuple[list[str], TraySettings | str | None, str | None]:
    """The dialog's changes, in order: each home's keys, the tray's settings, start at login (blocking)."""
    problems: list[str] = []
    for path, changes in backend.items():
        problems += write_backend(engine, [path], changes)
    written = write_settings(engine, tray) if tray else None
    login_error = write_autostart(autostart, login) if login is not None else None
    return problems, written, login_error


__all__ = ["BackendValues", "SettingsModel", "SettingsSnapshot", "autostart_state", "existing_homes", "snapshot",
           "write_all", "write_autostart", "write_backend", "write_settings"]
