"""After a kill, the truth from Hermes: a run of ours whose process is gone is settled from Hermes' facts.

The process that follows a continuation records its end; killed (or detached at a quit), it leaves the run
open. Every scan settles open runs whose claim no live process holds from Hermes' facts, as
docs/architecture.md (step 7) lists; ``state.db`` unreadable or a writer alive leaves it for a later scan.
Bookkeeping only: it never raises, never writes Hermes' files, and costs nothing when no run is open.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.keys import HomePath, home_path
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.turn import Turn, TurnId
from hermes_tray_core.vocab import WriterState

if TYPE_CHECKING:
    from hermes_tray_core.stores.ledger import Ledger

__all__ = ["settle_orphaned_runs"]

logger = get_logger(__name__)


def settle_orphaned_runs(home: Path | str, entries: Mapping[str, Any] | None = None, *,
                         book: Ledger | None = None) -> int:
    """Settle ``home``'s open runs whose process is gone; ``entries``: its markers as just read. How many."""
    where = home_path(home)
    with bookkeeping(logger, "could not settle the open runs of %s", where):  # settling old runs never breaks a scan
        from hermes_tray_core.stores.ledger import ledger

        book = book or ledger()
        runs = book.open_runs(where)
        if not runs:
            return 0
        if entries is None:
            from hermes_tray_core.markers.store import list_turn_markers

            entries = list_turn_markers(where)
        return len([ev for ev in runs if _settle(where, ev, entries, book)])
    return 0


def _settle(home: HomePath, ev: Mapping[str, Any], entries: Mapping[str, Any], book: Ledger) -> bool:
    from hermes_tray_core.continuing.claim import run_held

    key = ev["session_key"]
    if run_held(ev["claim"], ev["epoch"]):  # a live process of ours follows the run
        return False
    if ev["event"] is None:  # it died checking the turn: nothing began
        book.end_run(ev["run"])
        return True
    from hermes_tray_core.continuing.completion import mark_of
    from hermes_tray_core.markers.entries import writer_judgement

    turn = Turn.of(home, key, entries[key]) if key in entries else None  # the ledger's keys are checked ones
    mark = mark_of(ev)
    if mark is not None:
        from hermes_tray_core.hermes.state_db import note_state

        state, why = note_state(home, mark.state_session, None, mark.after_message_id, digest=mark.note_sha256)
        if state == "unknown":
            return False  # cannot tell: a later scan asks again
        if state == "finished":
            return _record(book, "completed", ev, settled_by="state.db", reason=why)
    if turn is not None and turn.marker.is_entry:
        if writer_judgement(turn.marker, home).state != WriterState.DEAD:
            return False  # Hermes still runs it (or may): its end comes later
        # a marker other than the one the run started from: Hermes had taken the turn over (its continuation's)
        dispatched = ev["event"] != "approved" or turn.started_at != ev["started_at"]
        return _record(book, "failed", ev, marker=turn.started_at if dispatched else None,
                       outcome="crashed" if dispatched else "error", dispatched=dispatched,
                       reason="the process following the continuation is gone and it did not finish; the turn waits "
                              "again" if dispatched else "the resume ended before Hermes started the continuation")
    return _record(book, "cleared", ev,
                   reason="Hermes holds no marker for it and state.db holds no finished reply: it ended in Hermes "
                          "without one (stopped there, or cleared)")


def _record(book: Ledger, event: str, ev: Mapping[str, Any], *, marker: float | None = None, **fields: Any) -> bool:
    attempt = ev.get("attempt")
    turn = TurnId(ev["home"], ev["session_key"], ev["started_at"], ev["attempts"] if ev["attempts"] is not None else -1)
    with bookkeeping(logger, "could not record how the run of %s ended", turn.key) as kept:
        book.record(event, turn, run=ev["run"], marker_started=marker, via="scan", after=ev.get("event"),
                    ran_in=ev.get("ran_in"), backend_pid=ev.get("backend_pid"),
                    **({"attempt": attempt} if attempt is not None else {}), **fields)
    if kept.failed:
        return False
    logger.info("run of %s (%s) settled from Hermes' facts: %s", turn.key, ev.get("event"), event)
    return True
