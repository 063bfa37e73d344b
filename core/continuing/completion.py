"""Whether a continuation the tray ran finished is Hermes' fact: its ``state.db`` says so.

On an older Hermes the tray submits the note itself and keeps a marker for that run; killed after Hermes
finished, it would leave the marker of a completed turn, and a second resume would send a second note. So
before the submit, what recognises the note's answer (the stored session, ``MAX(messages.id)`` then, the
note's digest, when) goes into that marker (extra keys Hermes ignores) and the ledger. Any reader that finds
such a marker asks ``state.db``: the note and a finished reply after it settle the turn (``completed``, the
marker retired by compare-and-remove), whether or not the marker's writer still runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from typing import Any

from hermes_tray_core.digest import note_digest
from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.markers.file import MARK_KEYS
from hermes_tray_core.numbers import json_int, json_number
from hermes_tray_core.turn import Turn

logger = get_logger(__name__)

__all__ = ["MARK_KEYS", "ContinuationMark", "Settlement", "mark_of", "note_digest", "settle_if_finished"]


@dataclass(frozen=True)
class ContinuationMark:
    """What recognises one submitted continuation note, and its reply, in ``state.db``."""

    state_session: str
    after_message_id: int
    note_sha256: str
    submitted_at: float

    def fields(self) -> dict[str, Any]:
        return dict(zip(MARK_KEYS, astuple(self), strict=True))

    @classmethod
    def for_note(cls, state_session: str, after_message_id: int, note: str) -> ContinuationMark:
        return cls(state_session, int(after_message_id), note_digest(note), time.time())


def mark_of(entry: Mapping[str, Any]) -> ContinuationMark | None:
    """The mark a tray continuation left in a marker entry, or None (a Hermes marker, or junk)."""
    session, after, digest, at = (entry.get(k) for k in MARK_KEYS)
    if not isinstance(session, str) or not session or not isinstance(digest, str) or len(digest) != 64:
        return None
    after_id, when = json_int(after), json_number(at)
    if after_id is None or after_id < 0 or when is None:
        return None
    return ContinuationMark(session, after_id, digest, when)


@dataclass(frozen=True)
class Settlement:
    """What ``state.db`` says about a marked continuation: ``finished`` (settled; ``retired``: the marker
    removed) or ``unknown`` (unreadable: it must not be continued now)."""

    state: str
    reason: str
    retired: bool = False

    @property
    def finished(self) -> bool:
        return self.state == "finished"


def settle_if_finished(turn: Turn) -> Settlement | None:
    """Settle a tray continuation's marker whose note ``state.db`` shows answered (record ``completed`` once,
    retire the marker). None when it is not such a marker or its note is pending: the ordinary verdict
    stands."""
    entry = turn.marker.entry
    mark = mark_of(entry) if entry is not None else None
    if entry is None or mark is None:
        return None
    from hermes_tray_core.hermes.state_db import note_state

    prompt = turn.marker.excerpt_source
    if not prompt:
        return None
    note = continuation_note(prompt)
    if note_digest(note) != mark.note_sha256:
        logger.warning("continuation marker for %s: its prompt does not match the recorded note; left alone",
                       turn.key)
        return None
    state, why = note_state(turn.home, mark.state_session, note, mark.after_message_id)
    if state == "unknown":
        return Settlement("unknown", why)
    if state != "finished":
        return None
    with bookkeeping(logger, "could not record the settled continuation of %s", turn.key):
        from hermes_tray_core.stores.ledger import ledger

        book = ledger()
        if not book.status(turn.ident).finished:
            book.record("completed", turn.ident, settled_by="state.db",
                        attempt=json_int(turn.marker.raw.get("attempts")), reason=why)
    retired = False
    with bookkeeping(logger, "could not retire the settled continuation marker for %s", turn.key):
        from hermes_tray_core.markers.store import MarkerStore

        retired = MarkerStore(turn.home).remove_if_unchanged(turn.key, entry)
    logger.info("continuation of %s settled from state.db (%s); marker %s", turn.key, why,
                "retired" if retired else "left (it changed, or could not be written)")
    return Settlement("finished", why, retired)
