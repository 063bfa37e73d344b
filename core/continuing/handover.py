"""The marker of a continuation the tray submits itself (a Hermes without auto-continue records none).

Just BEFORE the note is submitted, the checked entry is swapped (compare-and-swap) for the run's own:
``attempts + 1``, the original prompt, the gateway as writer, the note's completion mark. A skip that changed
the entry first wins (nothing is submitted); once swapped, a skip of the old entry fails: exactly one wins.
A crash after the swap reads right (the entry names the dead gateway: the budget counts it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.errors import ERROR, INFO, bookkeeping
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.keys import SessionKey
from hermes_tray_core.numbers import json_number
from hermes_tray_core.process.identity import ProcessIdentity
from hermes_tray_core.stores.fsutil import os_error_text

if TYPE_CHECKING:  # completion is needed once a note goes in: an idle tray imports this module and never does
    from hermes_tray_core.continuing.completion import ContinuationMark

__all__ = ["MarkerHandover"]

logger = logging.getLogger(__name__)


class MarkerHandover:
    """The checked entry (``expected``), the run's own entry once taken (``ours``) and its completion mark."""

    def __init__(self, home: Path, key: SessionKey, prompt: str, attempts: int,
                 expected: Mapping[str, Any] | None) -> None:
        self.home, self.key, self.prompt, self.attempts = home, key, prompt, attempts
        self.expected: dict[str, Any] | None = dict(expected) if expected is not None else None
        self.ours: dict[str, Any] | None = None  # the entry the tray wrote for this run
        self.mark: ContinuationMark | None = None  # how state.db will show the note answered

    @property
    def note(self) -> str:
        return continuation_note(self.prompt)

    def make_mark(self, state_session: str) -> str | None:
        """The note's completion mark from ``state.db``'s message high-water mark; why not, or None."""
        from hermes_tray_core.continuing.completion import ContinuationMark
        from hermes_tray_core.hermes.state_db import message_high_water

        after, problem = message_high_water(self.home)
        if after is None:
            return problem or "state.db cannot be read"
        self.mark = ContinuationMark.for_note(state_session, after, self.note)
        return None

    def take(self, writer: ProcessIdentity) -> bool:
        """Swap the checked entry for this run's own; False when it changed or vanished since (a skip won)."""
        from hermes_tray_core.markers.entries import build_entry
        from hermes_tray_core.markers.store import MarkerStore

        assert self.mark is not None
        store = MarkerStore(self.home)
        expected = self.expected if self.expected is not None else store.list().get(self.key)
        category = expected.get("notification_category") if isinstance(expected, dict) else None
        entry = {**build_entry(self.prompt, attempts=self.attempts + 1, writer=writer,
                               notification_category=category if isinstance(category, str) else None),
                 **self.mark.fields()}
        if expected is None:  # no checked entry and none there (a direct call): record ours
            entry = {**store.record(self.key, self.prompt, attempts=self.attempts + 1, writer=writer),
                     **self.mark.fields()}
            expected = store.list().get(self.key)
            if not isinstance(expected, dict):
                return False
        if not store.replace_if_unchanged(self.key, expected, entry):
            return False
        self.ours = entry
        return True

    def give_back(self) -> None:
        """Nothing reached Hermes after all: put the checked entry back (only over our own)."""
        from hermes_tray_core.markers.store import MarkerStore

        if self.expected is None or self.ours is None:
            return
        with bookkeeping(logger, "could not restore the marker for %s", self.key, level=ERROR):
            if MarkerStore(self.home).replace_if_unchanged(self.key, self.ours, self.expected):
                self.ours = None

    def retire(self, writer_pid: int | None, *, stopped: bool = False) -> tuple[str, float | None] | None:
        """The continuation concluded (or was stopped): remove our own entry, else the one ``writer_pid``
        wrote, or after the user's Stop the checked one if unchanged. Why an entry that had to go stayed
        (plain words) and its ``started_at`` (the caller records the turn under it), or None."""
        from hermes_tray_core.markers.store import MarkerStore

        target: dict[str, Any] | None = self.ours
        with bookkeeping(logger, "could not retire the marker for %s", self.key, level=INFO,
                         trace=False) as kept:
            store = MarkerStore(self.home)
            if self.ours is not None:
                if not store.remove_if_unchanged(self.key, self.ours):
                    logger.warning("marker for %s changed during the continuation; left as is", self.key)
                return None
            entry = store.list().get(self.key)
            if isinstance(entry, dict) and ((writer_pid is not None and entry.get("writer_pid") == writer_pid)
                                            or (stopped and entry == self.expected)):
                target = entry
                store.remove_if_unchanged(self.key, entry)
        if kept.error is not None and target is not None:
            return os_error_text(kept.error)[:300], json_number(target.get("started_at"))
        return None

