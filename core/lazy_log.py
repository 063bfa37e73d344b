"""A module logger that imports :mod:`logging` the first time something is logged.

``hermes-tray status`` logs nothing on an ordinary run, and nothing else on its path imports
:mod:`logging` (with ``traceback``, ``linecache``, ``tokenize`` …). The engine modules that ``status``
imports take their logger from here; the rest use :func:`logging.getLogger` directly. The name is the
same, so handlers, levels and pytest's ``caplog`` see no difference.

Measured (tests/bench/bench_tricks.py, one run, 2026-12-03, median of 41 alternated runs): a warm
``status`` takes 94.0 ms of CPU against 104.5 ms with :func:`logging.getLogger` at import (+10.4 ms,
1.11x), a cold one 151.3 against 171.1 ms. The tray imports :mod:`logging` anyway: no difference there.
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
