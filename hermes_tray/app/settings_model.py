"""The data the settings dialog edits, kept Qt-free so the controller and helper need no widgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class BackendValues:
    enabled: bool = True
    freshness_minutes: int = 15
    max_attempts: int = 2
    error: str | None = None  # config.yaml unreadable: shown, and its home cannot be edited


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
    extra: dict[str, Any] = field(default_factory=dict)


class SettingsModel(Protocol):
    def snapshot(self) -> SettingsSnapshot: ...

    def apply(self, backend: dict[str, dict[str, Any]], tray: dict[str, Any], autostart: bool | None) -> list[str]:
        """Write the changes; return the problems (empty when all went through)."""
        ...
