"""History as a person reads it: one row per interrupted turn (what happened to it, where it ran),
built from the decision journal's event log. Pure data: the window renders it, tests read it.

The journal stores one line per event (``notified``, ``approved``, ``dispatched``, ``completed``…);
a user asks "what happened to that turn?". Events of one turn share ``turn_id`` (home + session +
``started_at``); the newest decisive event says the outcome. Configuration changes stay rows of
their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hermes_tray import words
from hermes_tray.words import event_detail, event_text, value_text, via_text
from hermes_tray_core import json_int, json_number

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


def field_of(entry: Any, name: str, default: Any = "") -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name, default)
    return getattr(entry, name, default)


def _num(v: Any) -> float:
    return json_number(v) or 0.0


def when_of(entry: Any) -> float:
    """The journal stamps ``created_at``; older in-memory entries used ``time`` / ``ts``."""
    for name in ("created_at", "time", "ts"):
        value = _num(field_of(entry, name, None))
        if value:
            return value
    return 0.0


def profile_of(home: str) -> str:
    """The Hermes profile of a home, as Hermes names it: the name for ``<root>/profiles/<name>``, else
    ``default`` (a root home, wherever it is)."""
    parts = home.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2] == "profiles" and parts[-1]:
        return parts[-1]
    return "default"


@dataclass
class TurnHistory:
    """Everything the journal knows about one interrupted turn, oldest event first."""

    home: str
    session_key: str
    started_at: float | None
    events: list[Any] = field(default_factory=list)
    config: bool = False  # a configuration change, not a turn

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

    @property
    def last_at(self) -> float:
        return max((when_of(e) for e in self.events), default=0.0)

    def tries(self) -> int:
        """How many continuations the turn had: the highest attempt any of its runs names (a run with its
        own marker journals both ``continuing`` and ``dispatched`` for one try: counting events counted it twice)."""
        best = 0
        for e in self.events:
            for name in ("attempt", "attempts"):
                v = json_int(field_of(e, name, None))
                if v is not None:
                    best = max(best, v)
        return best

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

    def can_resume_again(self, pending: Callable[[str, str], bool]) -> bool:
        """Offer "Resume again" only for a turn resumed before that the policy lets resume now (it waits)."""
        return not self.config and self.resumed() and pending(self.home, self.session_key)


def group_turns(entries: Iterable[Any]) -> list[TurnHistory]:
    """Journal entries (any order) → one :class:`TurnHistory` per interrupted turn, newest activity first.

    Which turn an event belongs to is the engine's one rule (``decisions.turn_roots``): the events of a turn's
    continuations (attempt 1, 2, …, each a marker with its own ``started_at``) land in its row."""
    from hermes_tray_core import turn_roots

    order = sorted(entries, key=when_of)
    fields = ("event", "turn_id", "home", "session_key", "started_at", "attempts", "attempt", "created_at",
              "original_started_at")
    roots = turn_roots({f: field_of(e, f, None) for f in fields} for e in order)
    turns: dict[str, TurnHistory] = {}
    firsts: dict[str, float | None] = {}  # the started_at of each run, to date a turn by its first run
    for n, e in enumerate(order):
        event = str(field_of(e, "event", ""))
        home = str(field_of(e, "home", "") or "")
        if event == "config-changed":
            turns[f"config-{n}"] = TurnHistory(home, "", None, [e], config=True)
            continue
        key = str(field_of(e, "session_key", "") or "")
        started = field_of(e, "started_at", None)
        run = str(field_of(e, "turn_id", "") or f"{home}\x1f{key}\x1f{started}")
        tid = roots.get(run, run)
        if run not in firsts and event != "continuing":
            firsts[run] = _num(started) or None
        t = turns.get(tid)
        if t is None:
            t = turns[tid] = TurnHistory(home, key, None)
        t.events.append(e)
    for tid, t in turns.items():
        if not t.config:  # interrupted when its first run was (the root's own started_at when it is known)
            t.started_at = firsts.get(tid) or min((v for r, v in firsts.items() if v and roots.get(r, r) == tid),
                                                  default=None)
    return sorted(turns.values(), key=lambda t: t.last_at, reverse=True)


def homes_in(turns: Iterable[TurnHistory]) -> list[str]:
    return sorted({t.home for t in turns if t.home}, key=lambda h: (profile_of(h) != "default", h))


def same_home(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)
