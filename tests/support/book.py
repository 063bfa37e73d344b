"""The test's ledger (the real one, in its private state dir), with the decision shapes tests write.

``record`` writes a decision about one interruption as another process of ours would (the CLI, an earlier tray);
``attempts`` left out records it as an early journal did, for every attempt count of that run."""

from __future__ import annotations

from typing import Any

from hermes_tray_core.keys import home_path
from hermes_tray_core.stores.ledger import ledger
from hermes_tray_core.turn import TurnId


def ident(home: Any, session_key: str, started_at: float = 0.0, attempts: int | None = None) -> TurnId:
    return TurnId(home_path(home), session_key, float(started_at), -1 if attempts is None else int(attempts))  # type: ignore[arg-type]


def record(event: str, *, home: Any, session_key: str, started_at: float = 0.0, attempts: int | None = None,
           **fields: Any) -> dict[str, Any]:
    return ledger().record(event, ident(home, session_key, started_at, attempts), **fields)


def history(limit: int = 1000, **filters: Any) -> list[dict[str, Any]]:
    return ledger().history(limit, **filters)


def events(home: Any, session_key: str, started_at: float) -> list[str]:
    """The events about one run of a session (every attempt count), oldest first."""
    return [e["event"] for e in reversed(ledger().history(10_000, home=home, session_key=session_key))
            if e["started_at"] == float(started_at)]


def record_config_change(**fields: Any) -> dict[str, Any]:
    return ledger().record_config_change(**fields)


def turns(limit: int = 500, **filters: Any) -> list[dict[str, Any]]:
    """History's rows (``Ledger.turns``)."""
    return ledger().turns(limit, **filters)
