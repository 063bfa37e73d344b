"""Hermes' ``tui_gateway.turn_marker`` calls as the tray makes them: same names, arguments and shapes, never
raising (marker bookkeeping must never break a turn: a failure is "no marker", logged by identity only),
through :class:`~hermes_tray_core.markers.store.MarkerStore`. ``writer=`` is ours: a marker recorded for
another process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hermes_tray_core.errors import DEBUG, bookkeeping
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.markers.entries import marker_writer_state, normalize_marker
from hermes_tray_core.markers.file import decode, marker_path, read_file
from hermes_tray_core.markers.store import MarkerStore
from hermes_tray_core.process.identity import ProcessIdentity
from hermes_tray_core.stores import exchange as atomic_exchange

__all__ = ["clear_turn_marker", "exchange_support", "marker_writer_state", "read_turn_marker", "record_turn_start"]

logger = get_logger(__name__)

_STORES: dict[str, MarkerStore] = {}
_T = TypeVar("_T")


def _quietly(failed: str, subject: object, default: _T, act: Callable[[], _T]) -> _T:
    with bookkeeping(logger, "%s %s", failed, subject, level=DEBUG):
        return act()
    return default


def _store_for(home: Path | str) -> MarkerStore:
    """A store per home, reused: its paths cost more than a marker read."""
    key = os.fspath(home)
    store = _STORES.get(key)
    if store is None:
        if len(_STORES) >= 64:
            _STORES.clear()
        store = _STORES[key] = MarkerStore(home)
    return store


def record_turn_start(
    home: Path | str,
    session_key: str,
    prompt: str,
    *,
    attempts: int = 0,
    auto_continue: bool = True,
    notification_category: str | None = None,
    writer: ProcessIdentity | None = None,
) -> None:
    if not session_key or not prompt or not isinstance(session_key, str) or not isinstance(prompt, str):
        return
    _quietly("failed to record turn marker for", session_key, None, lambda: _store_for(home)._record(
        session_key, prompt, attempts, auto_continue, notification_category, writer))


def clear_turn_marker(home: Path | str, session_key: str) -> None:
    if not session_key or not isinstance(session_key, str):
        return
    _quietly("failed to clear turn marker for", session_key, None, lambda: _store_for(home)._clear(session_key))


def read_turn_marker(home: Path | str, session_key: str) -> dict[str, Any] | None:
    if not session_key or not isinstance(session_key, str):
        return None

    def read() -> dict[str, Any] | None:
        data, _sig = read_file(_store_for(home)._p)
        if data is None:
            return None
        return normalize_marker(decode(data).get(session_key))

    return _quietly("unreadable turn-marker file under", home, None, read)


def exchange_support(home: Path | str) -> tuple[bool, str]:
    """Can writes to ``home``'s marker file go in by exchange? (True, mechanism) or (False, why):
    compare-and-replace, which a concurrent Hermes write can defeat (``doctor`` says so)."""
    directory = marker_path(home).parent
    probe_in = directory if directory.is_dir() else Path(home)
    if not probe_in.is_dir():
        return True, f"{atomic_exchange.mechanism()} (not probed: {probe_in} does not exist yet)"
    return atomic_exchange.probe(os.fspath(probe_in))
