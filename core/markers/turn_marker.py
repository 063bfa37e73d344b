"""Hermes' ``tui_gateway.turn_marker`` calls as the tray makes them: same names, arguments and shapes, never
raising (marker bookkeeping must never break a turn: a failure is "no marker", logged by identity only),
through :class:`~hermes_tray_core.markers.store.MarkerStore`. ``writer=`` is ours: a marker recorded for
another process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hermes_tray_core.errors import DEBUG, bookkeeping
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.markers.entries import build_entry, marker_writer_state, normalize_marker
from hermes_tray_core.markers.file import marker_path
from hermes_tray_core.markers.store import MarkerStore
from hermes_tray_core.stores import exchange as atomic_exchange

__all__ = ["clear_turn_marker", "exchange_support", "marker_writer_state", "read_turn_marker", "record_turn_start"]

logger = get_logger(__name__)
_T = TypeVar("_T")


def _quietly(failed: str, subject: object, act: Callable[[], _T]) -> _T | None:
    with bookkeeping(logger, "%s %s", failed, subject, level=DEBUG):
        return act()
    return None


@functools.lru_cache(maxsize=64)
def _store_for(home: Path | str) -> MarkerStore:
    """A store per home, reused: its paths cost more than a marker read."""
    return MarkerStore(home)


def record_turn_start(home: Path | str, session_key: str, prompt: str, **options: Any) -> None:
    """``options``: :func:`~hermes_tray_core.markers.entries.build_entry`'s (``attempts``, ``auto_continue``,
    ``notification_category``, ``writer``)."""
    if not session_key or not prompt or not isinstance(session_key, str) or not isinstance(prompt, str):
        return
    _quietly("failed to record turn marker for", session_key,
             lambda: _store_for(home)._record(session_key, build_entry(prompt, **options)))


def clear_turn_marker(home: Path | str, session_key: str) -> None:
    if not session_key or not isinstance(session_key, str):
        return
    _quietly("failed to clear turn marker for", session_key, lambda: _store_for(home)._clear(session_key))


def read_turn_marker(home: Path | str, session_key: str) -> dict[str, Any] | None:
    if not session_key or not isinstance(session_key, str):
        return None
    return _quietly("unreadable turn-marker file under", home,
                    lambda: normalize_marker(_store_for(home).list().get(session_key)))


def exchange_support(home: Path | str) -> tuple[bool, str]:
    """Can writes to ``home``'s marker file go in by exchange? (True, mechanism) or (False, why):
    compare-and-replace, which a concurrent Hermes write can defeat (``doctor`` says so)."""
    directory = marker_path(home).parent
    probe_in = directory if directory.is_dir() else Path(home)
    if not probe_in.is_dir():
        return True, f"{atomic_exchange.mechanism()} (not probed: {probe_in} does not exist yet)"
    return atomic_exchange.probe(os.fspath(probe_in))
