"""Exactly once: the per-turn claim every process of ours takes to resume or skip (docs/architecture.md, step
5; resume and skip take the same name, the holder string says which), and removing a settled turn's marker
that a stale Hermes write brought back, so that neither the tray nor Hermes' ``session.resume`` runs it twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_tray_core.errors import INFO, bookkeeping
from hermes_tray_core.keys import home_path
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Refusal

if TYPE_CHECKING:
    from hermes_tray_core.stores.lease import Lease, LeaseStore

__all__ = ["Claim", "ClaimRefused", "claim", "claim_name", "is_held", "release", "remove_settled", "run_held"]

logger = get_logger(__name__)


def lease_errors() -> tuple[type[Exception], ...]:
    """What the lease store can raise, for ``except lease_errors():``."""
    from hermes_tray_core.stores.lease import STORE_ERRORS

    return STORE_ERRORS


def claim_name(home: Path | str, session_key: str) -> str:
    return f"resume:{home_path(home)}:{session_key}"


class Claim(NamedTuple):
    """A held claim on one turn; ``run``: the ledger's run of a resume (0 for a skip). A NamedTuple:
    ``dataclasses`` costs ``status`` ~10 ms of its start-up."""

    store: LeaseStore
    lease: Lease
    name: str
    run: int = 0

    @property
    def epoch(self) -> int:
        return int(self.lease.epoch)


class ClaimRefused(NamedTuple):
    code: Refusal
    message: str


def claim(turn: Turn, *, purpose: str, via: str, ttl: float, wait: float = 0.0) -> Claim | ClaimRefused:
    """Take the turn's claim for ``purpose`` (``resume`` or ``skip``), a resume's run recorded in the same
    transaction. Never raises for a busy or broken store: when unsure whether someone holds it, nobody
    acts."""
    from hermes_tray_core.stores.ledger import ledger

    name = claim_name(turn.home, turn.key)
    tag = f"skip-{via}" if purpose == "skip" else via
    runs: list[int] = []
    try:
        book = ledger()
        store = book.store()

        def record(conn: Any, lease: Lease) -> None:
            runs.append(book.begin_run(conn, turn.ident, lease))

        lease = store.acquire(name, f"pid={os.getpid()}:via={tag}", ttl=ttl, wait=wait,
                              then=record if purpose == "resume" else None)
    except lease_errors() as exc:
        return ClaimRefused(Refusal.STORE_ERROR, f"cannot claim the turn in the tray's lease store ({exc})")
    if lease is not None:
        return Claim(store, lease, name, runs[0] if runs else 0)
    try:
        cur = store.current(name)
    except lease_errors():  # only the holder's name is missing from the message: still a refusal
        logger.warning("could not read the claim on %s", turn.key, exc_info=True)
        cur = None
    if cur is not None and ":via=skip-" in cur.holder:
        return ClaimRefused(Refusal.BEING_SKIPPED, "this turn is being skipped right now")
    who = f" ({cur.holder})" if cur is not None else ""
    return ClaimRefused(Refusal.CLAIMED_ELSEWHERE, f"another hermes-tray process is already resuming this turn{who}")


def is_held(home: Path | str, session_key: str) -> bool:
    """A live process of ours holds the turn's claim, or the store cannot tell (then nobody acts)."""
    return run_held(claim_name(home, session_key))


def run_held(claim: str, epoch: int | None = None) -> bool:
    """The claim (a run of ours was recorded under) is held (at its ``epoch``) by a live process, or unsure."""
    from hermes_tray_core.stores.lease import shared

    if not claim:
        return False
    try:
        held = shared().current(claim)
    except lease_errors():
        return True
    return held is not None and epoch in (None, held.epoch)


def release(held: Claim, session_key: str = "?") -> None:
    try:
        held.store.release(held.lease)
    except lease_errors():
        logger.warning("could not release the claim on %s (it expires on its own)", session_key, exc_info=True)


def remove_settled(turn: Turn) -> bool:
    """Remove the marker of a turn the ledger settles, if it is still (or again) there as read (a new
    interruption stays). Never raises: the next scan retries."""
    from hermes_tray_core.markers.store import remove_marker_if_unchanged

    entry = turn.marker.entry
    if entry is None:
        return False
    with bookkeeping(logger, "could not remove the settled marker of %s", turn.key, level=INFO, trace=False):
        if remove_marker_if_unchanged(turn.home, turn.key, entry):  # a read-only home: the ledger keeps the decision
            logger.info("removed the marker of %s again: it was settled and a stale write brought it back", turn.key)
            return True
    return False
