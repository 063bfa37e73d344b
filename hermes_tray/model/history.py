"""History as a person reads it: one row per interrupted turn, from the ledger's rows (``Ledger.turns``: an
interruption and those its continuations became, with every decision); the newest decisive decision says the
outcome. Configuration changes are rows of their own. Pure data: the window renders it, tests read it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hermes_tray import words
from hermes_tray.words import event_detail, event_text, field_of, value_text, via_text
from hermes_tray_core import TurnId, json_int, json_number

__all__ = ["TurnHistory", "event_detail", "event_text", "field_of", "group_turns", "homes_in", "profile_of",
           "same_home", "value_text", "via_text", "when_of"]

#: event → what the user reads for a turn whose newest decisive event it is
OUTCOME_TEXT = {
    "completed": "Resumed and finished",
    "skipped": "Skipped",
    "interrupted": "Interrupted again",
    "cleared": "Cleared by Hermes",
    "refused": "Not resumed",
    "dispatched": "Running",
    "continuing": "Running",
    "detached": "Left running in Hermes",
    "approved": "Resuming",
    "notified": "Waiting for you",
    "detected": "Seen",
    "stopped": "Interrupted",  # the tray saw its Hermes end, and nothing else is recorded
}
#: a refusal's verdict → why, in a few words (the journal's reason is the cell's tooltip)
REFUSED_WHY = {"running": "open in Hermes", "disabled": "auto-continue off", "stale": "too old",
               "settled": "already finished", "unsure": "could not check", "not-ours": "Hermes handles it"}
RESUMED = frozenset({"approved", "dispatched", "continuing"})
DECISIVE = frozenset({"completed", "skipped", "interrupted", "failed", "gave-up", "refused", "cleared",
                      "dispatched", "continuing", "approved", "notified", "detected", "detached", "snoozed"})


def _num(v: Any) -> float:
    return json_number(v) or 0.0


def when_of(entry: Any) -> float:
    """When the ledger recorded it (``created_at``; 0 when unknown)."""
    return _num(field_of(entry, "created_at", None))


def profile_of(home: str) -> str:
    """The Hermes profile of a home, as Hermes names it: the name for ``<root>/profiles/<name>``, else
    ``default`` (a root home, wherever it is)."""
    parts = home.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2] == "profiles" and parts[-1]:
        return parts[-1]
    return "default"


@dataclass
class TurnHistory:
    """Everything the ledger knows about one interrupted turn, oldest event first. ``last``: its newest interruption
    (what "Resume again" and its page's buttons act on, while it waits)."""

    home: str
    session_key: str
    started_at: float | None
    events: list[Any] = field(default_factory=list)
    config: bool = False  # a configuration change, not a turn
    last: TurnId | None = None

    @property
    def profile(self) -> str:
        """The profile the journal recorded for the turn, else the one its home path names ("" for the tray's
        own settings: they belong to no profile)."""
        if self.config and not self.home:
            return ""
        for e in self.events:
            name = field_of(e, "profile", "")
            if isinstance(name, str) and name:
                return name
        return profile_of(self.home)

    @property
    def interrupted_at(self) -> float | None:
        """When it was interrupted, where that was seen (its Hermes process's end: ``stopped``), else None: then
        only when it started is known."""
        return next((when_of(e) or None for e in self.events if field_of(e, "event", "") == "stopped"), None)

    def tries(self) -> int:
        """How many continuations the turn had: the highest attempt any of its runs names (a run with its
        own marker journals both ``continuing`` and ``dispatched`` for one try: counting events counted it twice)."""
        counts = (json_int(field_of(e, name, None)) for e in self.events for name in ("attempt", "attempts"))
        return max([0, *(n for n in counts if n is not None)])

    def names(self) -> list[str]:
        return [str(field_of(e, "event", "")) for e in self.events]

    def outcome(self) -> str:
        """What happened, in words: the newest decisive event (gave up names its count)."""
        if self.config:
            return event_detail(self.events[-1])
        names = self.names()
        for e in reversed(self.events):  # the newest event that says something about the outcome
            name = str(field_of(e, "event", ""))
            if name not in DECISIVE:
                continue
            if name == "gave-up":
                return f"Gave up after {words.tries(self.tries())}"
            if name == "failed":
                return words.ending(str(field_of(e, "outcome", "") or "error"),
                                    ran_in="separate-process" if field_of(e, "dispatched", True) else "").what
            if name == "interrupted":  # older journals did not say who stopped it
                by = str(field_of(e, "stopped_by", ""))
                if by == "you" and field_of(e, "dispatched", True) is False:
                    return "Stopped before it started"
                return words.STOPPED_BY.get(by, OUTCOME_TEXT[name])
            if name == "detached" and field_of(e, "finish", "") == "left-alone":
                return "Left to your Hermes window"
            if name == "refused":
                why = REFUSED_WHY.get(str(field_of(e, "verdict", "")), "")
                return "Not resumed" + (f": {why}" if why else "")
            if name == "snoozed" and _num(field_of(e, "until", None)):
                return words.reminder_text(_num(field_of(e, "until", None)), when_of(e))
            return OUTCOME_TEXT.get(name, name)
        # nothing decisive: only what a witness saw (its Hermes' end: "stopped"), in words
        return OUTCOME_TEXT.get(names[-1], names[-1]) if names else ""

    def outcome_details(self) -> str:
        """The engine's own words for the newest decisive event (the cell's tooltip): its reason, where it ran."""
        for e in reversed(self.events):
            if str(field_of(e, "event", "")) in DECISIVE:
                return event_detail(e)
        return ""

    def where(self) -> str:
        """Where the continuation ran, in two or three words (the running Hermes, or a separate process)."""
        for e in reversed(self.events):
            ran_in = str(field_of(e, "ran_in", "") or "")
            if ran_in:
                return words.ran_in_short(ran_in) or ran_in
            where = str(field_of(e, "where", "") or "")
            if where:  # an older journal that said it only in words
                return words.ran_in_short("running-backend" if "running Hermes" in where else "separate-process")
        return ""

    def where_details(self) -> str:
        """Where it ran as the journal said it (with the running Hermes' pid): the cell's tooltip."""
        for e in reversed(self.events):
            where = str(field_of(e, "where", "") or "")
            if where:
                return where
            if field_of(e, "backend_pid", None):
                return f"in your running Hermes (pid {field_of(e, 'backend_pid', '')})"
        return self.where()

    def resumed(self) -> bool:
        """Was it ever resumed (by the user, the tray in auto mode or the command line)?"""
        return any(str(field_of(e, "event", "")) in RESUMED for e in self.events)

    def can_resume_again(self, pending: Callable[[TurnId], bool]) -> bool:
        """Offer "Resume again" only for a turn resumed before whose newest interruption waits now."""
        return not self.config and self.last is not None and self.resumed() and pending(self.last)


def group_turns(rows: Iterable[Mapping[str, Any]]) -> list[TurnHistory]:
    """The ledger's rows (``Ledger.turns``, newest activity first) as :class:`TurnHistory` rows."""
    out = []
    for row in rows:
        first, events = row.get("turn"), list(row.get("events") or ())
        if first is None:
            out.append(TurnHistory(str(field_of(events[-1], "home", "") or "") if events else "", "", None, events,
                                   config=True))
        else:
            out.append(TurnHistory(str(first.home), str(first.key), first.started_at or None, events,
                                   last=row.get("last")))
    return out


def homes_in(turns: Iterable[TurnHistory]) -> list[str]:
    return sorted({t.home for t in turns if t.home}, key=lambda h: (profile_of(h) != "default", h))


def same_home(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)
