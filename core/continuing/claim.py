"""Exactly once: the one home of the per-turn claim, the re-check under it, and the skip tombstones.

Every hermes-tray process (the tray, the helper, the CLI, a second login) that acts on an interrupted turn —
resume or skip — goes through here, so one rule decides who may act:

* **the claim**: ``resume:<canonical home>:<session key>`` in the tray's per-user lease store
  (:mod:`core.stores.lease`), with a fencing epoch. Resume and skip take the same name, so they exclude each
  other; the holder string says which one holds it (``via=skip-…`` for a skip);
* **the re-check** under the claim: the marker is still there, equal to what the user was shown, and the
  decision journal does not already settle this very turn (``completed`` or ``skipped``);
* **the marker hand-over**: a continuation takes the marker over by compare-and-swap
  (:mod:`core.continuing.handover`), so it never continues a turn that changed or was skipped since;
* **tombstones**: a skip is journalled as ``skipped`` under the turn's identity (session key + ``started_at``
  + ``attempts``). Any process of ours that later finds that exact entry back in Hermes' file (a stale Hermes
  write brought it back) removes it again and never offers it (:func:`tombstoned`, :func:`enforce_tombstones`).
  A turn the tray saw continued and finished (``completed`` under the same identity) is retired by the same
  rule wherever it reappears (:func:`retired`): neither the tray nor Hermes (whose ``session.resume`` would
  continue a fresh entry again) gets to run it twice;
* **a Stop is final**: a turn you stopped (``interrupted`` with ``stopped_by: you``) or the tray gave up on
  (``gave-up``) is honoured by the same rule (:func:`stopped`), also when Hermes' file could not be changed (a
  read-only home): every reader shows it stopped, never actionable, and a resume refuses it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.errors import INFO, bookkeeping
from hermes_tray_core.keys import home_path
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Refusal

__all__ = [
    "SETTLED", "Claim", "ClaimRefused", "claim",
    "claim_name", "enforce_tombstones", "is_held", "lease_store", "release", "retired", "settled", "stopped", "tombstoned",
]

logger = get_logger(__name__)

#: Journalled for a turn identity: it must never be dispatched (or offered) again.
SETTLED = ("completed", "skipped")


def lease_errors() -> tuple[type[Exception], ...]:
    """What the lease store can raise (:data:`core.stores.lease.STORE_ERRORS`), for ``except lease_errors():``."""
    from hermes_tray_core.stores.lease import STORE_ERRORS

    return STORE_ERRORS


def claim_name(home: Path | str, session_key: str) -> str:
    """The claim's name in the lease store (a :class:`~hermes_tray_core.keys.HomePath` is taken as it is)."""
    return f"resume:{home_path(home)}:{session_key}"


_stores: dict[str, Any] = {}
_stores_lock = threading.Lock()


def lease_store(path: Path | None = None) -> Any:
    """One open ``LeaseStore`` per path per process: the tray resumes many times, and a fresh
    connection (file checks, WAL set-up) would sit on every resume's critical path."""
    from hermes_tray_core.stores.lease import LeaseStore
    from hermes_tray_core.stores.paths import lease_db

    p = str(path or lease_db())
    with _stores_lock:
        store = _stores.get(p)
        if store is None:
            store = _stores[p] = LeaseStore(p)
        return store


class Claim(NamedTuple):
    """A held claim on one turn; ``epoch`` is its fencing token. (Named tuples, not dataclasses, here:
    ``status`` imports this module for the tombstones, and ``dataclasses`` costs ~10 ms of its start-up.)"""

    store: Any
    lease: Any
    name: str

    @property
    def epoch(self) -> int:
        return int(self.lease.epoch)


class ClaimRefused(NamedTuple):
    """The claim was not granted: why (``code``) and a one-line ``message``."""

    code: Refusal
    message: str


def claim(turn: Turn, *, purpose: str, via: str, ttl: float, wait: float = 0.0,
          lease_path: Path | None = None) -> Claim | ClaimRefused:
    """Take the turn's claim for ``purpose`` (``resume`` or ``skip``). Never raises for a busy or broken
    store: a :class:`ClaimRefused` says which (when unsure whether someone holds it, nobody acts)."""
    name = claim_name(turn.home, turn.key)
    tag = f"skip-{via}" if purpose == "skip" else via
    try:
        store = lease_store(lease_path)
        lease = store.acquire(name, f"pid={os.getpid()}:via={tag}", ttl=ttl, wait=wait)
    except lease_errors() as exc:
        return ClaimRefused(Refusal.STORE_ERROR, f"cannot claim the turn in the tray's lease store ({exc})")
    if lease is not None:
        return Claim(store, lease, name)
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
    """A live process of ours holds the turn's claim (a resume or a skip of it runs now), or the lease store cannot
    tell: then it is taken as held, so nobody acts on the turn behind that process's back."""
    try:
        return lease_store().current(claim_name(home, session_key)) is not None
    except lease_errors():
        return True


def release(held: Claim, session_key: str = "?") -> None:
    """Release a claim; a failure is logged (the lease expires on its own)."""
    try:
        held.store.release(held.lease)
    except lease_errors():
        logger.warning("could not release the claim on %s (it expires on its own)", session_key, exc_info=True)


def settled(turn: Turn, *, journal: Any = None) -> str | None:
    """``completed`` / ``skipped`` when the decision journal already records that for this very turn
    (home, session, started_at): a marker for it that is back (a writer re-wrote it, the tray could
    not remove its own) must not run the turn again. None when unknown (journal unreadable: logged)."""
    from hermes_tray_core.stores import decisions

    names: list[str] = []  # unknown is the answer when the journal cannot be read
    with bookkeeping(logger, "cannot read the decision journal for %s", turn.key):
        names = (journal or decisions.default_journal()).events_for(turn.home, turn.key, turn.started_at)
    for name in reversed(names):
        if name in SETTLED:
            return name
    return None


def tombstoned(turn: Turn, *, journal: Any = None) -> bool:
    """True when this exact turn (session key + ``started_at`` + ``attempts``) was skipped: its entry must
    never be offered again, and any process of ours that sees it removes it (:func:`enforce_tombstones`)."""
    return bool(_journal_says("is_tombstoned", turn, journal))


def retired(turn: Turn, *, journal: Any = None) -> bool:
    """True when this exact turn (the identity :func:`tombstoned` uses) was continued and finished
    (``completed``): an entry for it is a stale write's copy and is retired, never offered or continued."""
    return bool(_journal_says("is_retired", turn, journal))


def stopped(turn: Turn, *, journal: Any = None) -> str | None:
    """``interrupted`` (you stopped it) / ``gave-up`` when the journal records that for this exact turn (the
    identity :func:`tombstoned` uses): a Stop is final wherever it was recorded. None otherwise (also when the
    journal cannot be read: logged)."""
    how = _journal_says("stopped_how", turn, journal)
    return how if isinstance(how, str) else None


def _journal_says(question: str, turn: Turn, journal: Any) -> Any:
    from hermes_tray_core.stores import decisions

    with bookkeeping(logger, "cannot read the decision journal for %s", turn.key):  # unknown is the answer
        j = journal or decisions.default_journal()
        answer = getattr(j, question)(turn.home, turn.key, turn.started_at, turn.attempts)
        return answer if isinstance(answer, str) else bool(answer)
    return None if question == "stopped_how" else False


def enforce_tombstones(turns: Iterable[Turn], *, journal: Any = None) -> list[str]:
    """Remove every turn's entry (as read from its home's marker file) that a skip tombstoned, that the tray saw
    finished (:func:`retired`) or that was stopped for good (:func:`stopped`), and that is still (or again) there.
    Returns the keys removed.
    Compare-and-remove: an entry that changed (a new turn, a new attempt) is not this tombstone's and
    stays. Never raises (a failure is logged; the next scan retries)."""
    from hermes_tray_core.markers.store import remove_marker_if_unchanged

    removed: list[str] = []
    for turn in turns:
        entry = turn.marker.entry
        if entry is None or not (tombstoned(turn, journal=journal) or retired(turn, journal=journal)
                                 or stopped(turn, journal=journal)):
            continue
        # a read-only home: the journal keeps the decision
        with bookkeeping(logger, "could not remove the settled marker of %s", turn.key, level=INFO,
                         trace=False):
            if remove_marker_if_unchanged(turn.home, turn.key, entry):
                logger.info("removed the marker of %s again: it was skipped or finished and a stale write brought "
                            "it back", turn.key)
                removed.append(turn.key)
    return removed
