"""An earlier release's decision journal (JSON lines), read into the ledger once, when the ledger is made,
then renamed ``decisions.jsonl.migrated-<time>`` and kept (docs/architecture.md).

One bad line costs that line only (counted in the log), a field that is not a scalar that field only. Runs are
rebuilt in the journal's order: ``approved`` starts one, ``continuing`` names the run it continues
(``original_started_at``) and its own marker, an end closes it; a run left open is settled by the next scan.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.keys import InvalidIdError, home_path, session_key
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.numbers import json_number
from hermes_tray_core.stores import fsutil, turn_journal
from hermes_tray_core.turn import TurnId
from hermes_tray_core.vocab import Event

if TYPE_CHECKING:
    from hermes_tray_core.stores.ledger import Ledger

__all__ = ["read_journal", "set_aside"]

logger = get_logger(__name__)

_IDENTITY = frozenset({"event", "home", "session_key", "started_at", "turn_id", "created_at", "version", "session_id",
                       "stream_id", "attempts"})
_CLOSING = frozenset({"completed", "interrupted", "failed", "gave-up", "refused", "cleared"})


def _attempts(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return int(value) if float(value).is_integer() and 0 <= value < 2**31 else None
    except (OverflowError, ValueError):
        return None


def _fields(ev: Mapping[str, Any]) -> dict[str, Any]:
    from hermes_tray_core.stores.ledger import FORBIDDEN_FIELDS, _clean

    out = {}
    for k, v in ev.items():
        if not isinstance(k, str) or k in _IDENTITY or k in FORBIDDEN_FIELDS:
            continue
        try:
            out[k] = _clean(k, v)
        except TypeError:
            continue  # a nested value: that field is left out, the record kept
    return out


def read_journal(ledger: Ledger, conn: sqlite3.Connection, path: Path) -> bool:
    """Read the journal into ``ledger`` in the transaction that makes it; True when there was one."""
    try:
        doc = turn_journal.read_journal_files("decisions", [(None, path)])
    except (OSError, ValueError) as exc:
        logger.warning("cannot read the decision journal %s to carry it into the ledger: %s", path, exc)
        return False
    events = doc["events"]
    if not events and not doc["malformed"] and not path.exists():
        return False
    attempts: dict[tuple[str, str, float], int] = {}
    for ev in events:  # an interruption's attempt count, from any of its events that recorded it
        key = (str(ev.get("home")), str(ev.get("session_key")), json_number(ev.get("started_at")) or 0.0)
        n = _attempts(ev.get("attempts"))
        if n is not None and ev.get("event") != "continuing":
            attempts.setdefault(key, n)
    runs: dict[tuple[str, str, float], int] = {}
    kept = 0
    for ev in events:
        try:
            kept += _one(ledger, conn, ev, attempts, runs)
        except (ValueError, TypeError, OverflowError, RecursionError, sqlite3.Error) as exc:
            logger.info("decision journal: an entry left out (%s)", type(exc).__name__)
    left_out = len(events) - kept + len(doc["malformed"])
    logger.warning("the decision journal %s was read into the ledger: %d entries kept, %d left out", path, kept,
                   left_out)
    return True


def _one(ledger: Ledger, conn: sqlite3.Connection, ev: Mapping[str, Any], attempts: Mapping[tuple[str, str, float], int],
         runs: dict[tuple[str, str, float], int]) -> int:
    from hermes_tray_core.stores.ledger import _config, _decision, _new_run

    name, at, home = ev.get("event"), json_number(ev.get("created_at")) or 0.0, ev.get("home")
    if name == Event.CONFIG_CHANGED:
        _config(conn, at, {**_fields(ev), "home": home_path(home) if isinstance(home, str) else None})
        return 1
    kind, key = Event(str(name)), session_key(ev.get("session_key"))
    if not isinstance(home, str) or not home:
        raise InvalidIdError("no home")
    started = json_number(ev.get("started_at")) or 0.0
    # a continuation is recorded under its own marker; it belongs to the run it continues
    original = json_number(ev.get("original_started_at")) if kind is Event.CONTINUING else None
    ident = (home, key, started if original is None else original)
    turn = TurnId(home_path(home), key, ident[2], attempts.get(ident, -1))
    run = runs.pop(ident, None) if name in _CLOSING else runs.get(ident)
    if kind is Event.APPROVED:
        run = runs[ident] = _new_run(conn, ledger._turn_row(conn, turn), "", 0, at)
    ledger._insert(conn, turn, _decision(kind, _fields(ev), at), run, None if original is None else started)
    return 1


def set_aside(path: Path) -> None:
    if fsutil.set_aside(path, "migrated") is None and path.exists():
        logger.warning("the decision journal %s was read into the ledger but cannot be set aside", path)
