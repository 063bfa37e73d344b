"""The data the settings dialog edits, kept Qt-free so the controller and helper need no widgets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hermes_tray.contract import BackendValues


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


__all__ = ["BackendValues", "SettingsModel", "SettingsSnapshot"]
