"""Hermes' ``tui_gateway.turn_marker`` calls, as the tray makes them: never raising.

Same names, arguments and return shapes as Hermes' module (:func:`record_turn_start`,
:func:`clear_turn_marker`, :func:`read_turn_marker`, :func:`marker_writer_state`): marker bookkeeping must never
break a turn, so an I/O failure degrades to "no marker" (logged, identity only). Like Hermes they accept any
non-empty key. The writes go through :class:`~hermes_tray_core.markers.store.MarkerStore` (locked, by exchange).
``writer=`` is the tray's addition: a marker recorded on behalf of another process.
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
    """Hermes calls these in its turn: a failure is logged (identity only, ``failed`` + ``subject``) and swallowed."""
    with bookkeeping(logger, "%s %s", failed, subject, level=DEBUG):
        return act()
    return default


def _store_for(home: Path | str) -> MarkerStore:
    """A store per home, reused: building the paths costs more than a marker read."""
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
    """Persist the marker for a turn that is about to run (Hermes' call; ``writer`` is our addition).

    Empty key or prompt is ignored; any failure is logged (identity only) and swallowed.
    """
    if not session_key or not prompt or not isinstance(session_key, str) or not isinstance(prompt, str):
        return
    _quietly("failed to record turn marker for", session_key, None, lambda: _store_for(home)._record(
        session_key, prompt, attempts, auto_continue, notification_category, writer))


def clear_turn_marker(home: Path | str, session_key: str) -> None:
    """Remove the marker once its turn concluded (any outcome the client saw). Never raises."""
    if not session_key or not isinstance(session_key, str):
        return
    _quietly("failed to clear turn marker for", session_key, None, lambda: _store_for(home)._clear(session_key))


def read_turn_marker(home: Path | str, session_key: str) -> dict[str, Any] | None:
    """The marker left by a turn that never concluded, in Hermes' shape, or None. Never raises."""
    if not session_key or not isinstance(session_key, str):
        return None

    def read() -> dict[str, Any] | None:
        data, _sig = read_file(_store_for(home)._p)
        if data is None:
            return None
        return normalize_marker(decode(data).get(session_key))

    return _quietly("unreadable turn-marker file under", home, None, read)


def exchange_support(home: Path | str) -> tuple[bool, str]:
    """Can the tray's writes to ``home``'s marker file go in by atomic exchange? (True, mechanism) or
    (False, why): then they fall back to compare-and-replace, which a concurrent Hermes write can still
    defeat (``hermes-tray doctor`` shows this)."""
    directory = marker_path(home).parent
    probe_in = directory if directory.is_dir() else Path(home)
    if not probe_in.is_dir():
        return True, f"{atomic_exchange.mechanism()} (not probed: {probe_in} does not exist yet)"
    return atomic_exchange.probe(os.fspath(probe_in))
