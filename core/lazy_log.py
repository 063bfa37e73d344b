"""A module logger that imports :mod:`logging` the first time something is logged.

``hermes-tray status`` logs nothing on an ordinary run, and nothing else on its path imports :mod:`logging`:
the engine modules it imports take their logger from here (measured in docs/performance.md). The name is the
same, so handlers, levels and pytest's ``caplog`` see no difference.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_logger"]


class _LazyLogger:
    __slots__ = ("_name", "_logger")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:  # only for what the slots do not hold: the Logger's API
        if self._logger is None:
            import logging

            self._logger = logging.getLogger(self._name)
        return getattr(self._logger, attr)

    def __repr__(self) -> str:
        return f"<lazy logger {self._name}>"


def get_logger(name: str) -> Any:
    """``logging.getLogger(name)``, fetched on first use (typed ``Any``: it answers the whole Logger API)."""
    return _LazyLogger(name)
