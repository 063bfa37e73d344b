"""Skip one interrupted turn — only if it is still the one the user saw, and not while it is being resumed.

It takes the claim a resume takes, without waiting (a resume holding it wins), removes the marker by
compare-and-remove against the entry the user was shown, and records ``skipped`` still inside the claim: skip
and resume exclude each other. A failure to record it is reported, never undoes the skip.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from hermes_tray_core.continuing import claim as exactly_once
from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.stores.fsutil import os_error_text
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Refusal, SkipOutcome

logger = logging.getLogger(__name__)

CLAIM_TTL = 30.0


@dataclass(frozen=True)
class SkipResult:
    outcome: SkipOutcome
    message: str
    journal_error: str | None = None  # the ledger could not record it (the skip stands): a warning to show

    @property
    def ok(self) -> bool:
        return self.outcome == SkipOutcome.SKIPPED


def skip_turn(turn: Turn, *, via: str = "api", **fields: Any) -> SkipResult:
    """Skip ``turn`` (module doc); never raises for expected failures."""
    from hermes_tray_core.markers.store import remove_marker_if_unchanged

    key = turn.key
    held = exactly_once.claim(turn, purpose="skip", via=via, ttl=CLAIM_TTL)
    if isinstance(held, exactly_once.ClaimRefused):
        if held.code == Refusal.STORE_ERROR:  # cannot tell whether a resume holds it: do nothing
            return SkipResult(SkipOutcome.ERROR, f"Not skipped: {held.message}.")
        return SkipResult(SkipOutcome.RESUMING, "Not skipped: this turn is being resumed right now; stop the continuation "
                                    "instead if it should not run.")
    journal_error: str | None = None
    try:
        removed = remove_marker_if_unchanged(turn.home, key, turn.marker.entry or {})
        if removed:
            from hermes_tray_core.stores.ledger import ledger

            with bookkeeping(logger, "could not record the skip of %s", key) as kept:  # never undoes the skip
                ledger().record("skipped", turn.ident, via=via, **fields)
            if kept.error is not None:
                journal_error = f"could not record 'skipped' in the tray's ledger ({kept.error})"
    except OSError as exc:
        logger.info("could not skip %s: %s", key, exc)  # the result says it, in words
        from hermes_tray_core.continuing.writable import unwritable

        where = unwritable(turn.home)  # a read-only home said as such, never the lock file that failed first
        return SkipResult(SkipOutcome.ERROR, f"Not skipped: {where[0]} cannot be written: {where[1]}." if where
                          else f"Not skipped: {os_error_text(exc)}")
    finally:
        exactly_once.release(held, key)
    if not removed:
        return SkipResult(SkipOutcome.CHANGED, "Not skipped: the turn changed (or was cleared) since it was shown; it was "
                                   "left in place.")
    return SkipResult(SkipOutcome.SKIPPED, "Skipped: it will not be resumed.", journal_error)


__all__ = ["SkipResult", "skip_turn"]
