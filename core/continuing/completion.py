"""Whether a continuation the tray ran finished is Hermes' fact: its ``state.db`` says so.

On a backend that predates auto-continue (``hermes-agent`` 0.19.0) the tray submits the
continuation note itself and keeps a marker for that run (``attempts + 1``, the gateway child as
writer). Its own process retiring that marker on ``message.complete`` is not enough: stopped or
killed after Hermes finished, it leaves the marker of a completed turn, whose writer then exits, and
a second resume would send the model a second note. So, just before the note is submitted, what is
needed to recognise its completion in ``state.db`` goes into the continuation's marker (extra keys,
which Hermes' ``read_turn_marker`` ignores) and into the ledger (``continuing``):

* ``tray_state_session``: the stored session the note goes to (``session.resume``'s compression tip);
* ``tray_after_message_id``: ``MAX(messages.id)`` before the submit (ids only grow);
* ``tray_note_sha256``: the note's digest (the note itself is rebuilt from the marker's prompt);
* ``tray_submitted_at``: when.

Any reader that finds such a marker asks ``state.db`` (:func:`hermes_state.note_answered`): the
note and a finished reply after it mean the turn is settled — journalled ``completed`` and the
marker retired (compare-and-remove: a marker Hermes or anyone changed meanwhile is left alone),
never offered or continued again. This holds whether or not the marker's writer still runs: a
gateway whose client was killed exits, but a running ``hermes dashboard`` the continuation ran in
never does, and a finished reply in ``state.db`` is the end of the turn either way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hermes_tray_core.digest import note_digest
from hermes_tray_core.errors import bookkeeping
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.markers.file import MARK_KEYS
from hermes_tray_core.numbers import json_int
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
        """The marker's extra keys (also the journal's fields), in :data:`MARK_KEYS` order."""
        return dict(zip(MARK_KEYS, (self.state_session, self.after_message_id, self.note_sha256,
                                    self.submitted_at), strict=True))

    @classmethod
    def for_note(cls, state_session: str, after_message_id: int, note: str) -> ContinuationMark:
        return cls(state_session, int(after_message_id), note_digest(note), time.time())


def mark_of(entry: Mapping[str, Any]) -> ContinuationMark | None:
    """The mark a tray continuation left in a marker entry, or None (a Hermes marker, or junk)."""
    session, after, digest, at = (entry.get(k) for k in MARK_KEYS)
    if not isinstance(session, str) or not session or not isinstance(digest, str) or len(digest) != 64:
        return None
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        return None
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        return None
    return ContinuationMark(session, after, digest, float(at))


@dataclass(frozen=True)
class Settlement:
    """What ``state.db`` says about a marked continuation: ``finished`` (settled: journalled, and
    ``retired`` when the marker could be removed) or ``unknown`` (``state.db`` unreadable: whether
    it finished cannot be told, so it must not be continued now); ``reason`` in one line."""

    state: str
    reason: str
    retired: bool = False

    @property
    def finished(self) -> bool:
        return self.state == "finished"


def settle_if_finished(turn: Turn) -> Settlement | None:
    """If the turn's marker is a tray continuation's and ``state.db`` shows its note answered, journal
    ``completed`` (once) and retire the marker; return the :class:`Settlement` (``finished``).

    ``unknown`` when ``state.db`` cannot be read (a resume must refuse: it might run the turn twice).
    None when it is not such a marker or its note is not answered (pending): then the caller's
    ordinary verdict stands. Bookkeeping failures are logged, never raised."""
    entry = turn.marker.entry
    mark = mark_of(entry) if entry is not None else None
    if entry is None or mark is None:
        return None
    from hermes_tray_core.hermes.state_db import note_answered

    prompt = turn.marker.excerpt_source
    if not prompt:
        return None
    note = continuation_note(prompt)
    if note_digest(note) != mark.note_sha256:
        logger.warning("continuation marker for %s: its prompt does not match the recorded note; left alone",
                       turn.key)
        return None
    state, why = note_answered(turn.home, mark.state_session, note, mark.after_message_id)
    if state == "unknown":
        return Settlement("unknown", why)
    if state != "finished":
        return None
    _journal_completed(turn, why)
    retired = False
    with bookkeeping(logger, "could not retire the settled continuation marker for %s", turn.key):
        from hermes_tray_core.markers.store import MarkerStore

        retired = MarkerStore(turn.home).remove_if_unchanged(turn.key, entry)
    logger.info("continuation of %s settled from state.db (%s); marker %s", turn.key, why,
                "retired" if retired else "left (it changed, or could not be written)")
    return Settlement("finished", why, retired)


def _journal_completed(turn: Turn, why: str) -> None:
    """``completed`` under the continuation marker's identity, unless a reader already recorded it."""
    with bookkeeping(logger, "could not record the settled continuation of %s", turn.key):
        from hermes_tray_core.stores.ledger import ledger

        book = ledger()
        if not book.status(turn.ident).finished:
            book.record("completed", turn.ident, settled_by="state.db", attempt=json_int(turn.marker.raw.get("attempts")),
                        reason=why)
