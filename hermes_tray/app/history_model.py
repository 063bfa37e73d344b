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

from hermes_tray.format import short_path

#: event → what the user reads for a turn whose newest decisive event it is
OUTCOME_TEXT = {
    "completed": "resumed and finished",
    "skipped": "skipped",
    "interrupted": "stopped (ended for good)",
    "cleared": "cleared by Hermes",
    "refused": "not resumed",
    "dispatched": "running",
    "continuing": "running",
    "approved": "resume approved",
    "notified": "asked, no answer yet",
    "detected": "seen",
}
DECISIVE = frozenset({"completed", "skipped", "interrupted", "failed", "gave-up", "refused", "cleared",
                      "dispatched", "continuing", "approved", "notified", "detected"})


def field_of(entry: Any, name: str, default: Any = "") -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name, default)
    return getattr(entry, name, default)


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def when_of(entry: Any) -> float:
    """The journal stamps ``created_at``; older in-memory entries used ``time`` / ``ts``."""
    for name in ("created_at", "time", "ts"):
        value = _num(field_of(entry, name, None))
        if value:
            return value
    return 0.0


def profile_of(home: str) -> str:
    """``default`` for a root home, the profile name for ``<root>/profiles/<name>``, else the short path."""
    parts = home.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 2 and parts[-2] == "profiles":
        return parts[-1]
    if parts and parts[-1] in (".hermes", "hermes"):
        return "default"
    return short_path(home)


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def event_detail(entry: Any) -> str:
    """One line about one event (never prompt text: the journal has none)."""
    event = str(field_of(entry, "event", ""))
    if event == "config-changed":
        by = field_of(entry, "by", "")
        return (f"{field_of(entry, 'key', '?')}: {value_text(field_of(entry, 'old', None))} → "
                f"{value_text(field_of(entry, 'new', None))}" + (f" (from the {by})" if by else ""))
    bits = []
    for name in ("reason", "outcome", "where", "via"):
        v = field_of(entry, name, "")
        if v and not (name == "outcome" and str(v) in str(field_of(entry, "reason", ""))):
            bits.append(f"{name} {v}" if name == "via" else str(v))
    attempt = field_of(entry, "attempt", None)
    if isinstance(attempt, int) and not isinstance(attempt, bool):
        bits.append(f"attempt {attempt}")
    return " · ".join(bits)


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
        return "tray settings" if self.config and not self.home else profile_of(self.home)

    @property
    def last_at(self) -> float:
        return max((when_of(e) for e in self.events), default=0.0)

    def tries(self) -> int:
        """How many continuations the turn had: the highest attempt any of its runs names (a run with its
        own marker journals both ``continuing`` and ``dispatched`` for one try: counting events counted it twice)."""
        best = 0
        for e in self.events:
            for name in ("attempt", "attempts"):
                v = field_of(e, name, None)
                if isinstance(v, int) and not isinstance(v, bool):
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
                n = self.tries()
                reason = field_of(e, "reason", "")
                return f"gave up after {n} continuation{'s' if n != 1 else ''}" + (f" ({reason})" if reason else "")
            if name == "failed":
                return f"failed: {field_of(e, 'outcome', '') or field_of(e, 'reason', '') or 'error'}"
            if name == "interrupted":  # older journals did not say who stopped it
                by = str(field_of(e, "stopped_by", ""))
                if by == "you" and field_of(e, "dispatched", True) is False:
                    return "stopped by you before it started (still waiting)"
                return {"you": "stopped by you (ended for good)",
                        "hermes": "interrupted in Hermes (not continued again)"}.get(by, OUTCOME_TEXT[name])
            if name == "refused":
                reason = str(field_of(e, "reason", ""))
                return "not resumed" + (f": {reason}" if reason else "")
            return OUTCOME_TEXT.get(name, name)
        return names[-1] if names else ""

    def where(self) -> str:
        """Where the continuation ran (the running Hermes backend or a gateway the tray started)."""
        for e in reversed(self.events):
            where = field_of(e, "where", "") or ""
            if where:
                return str(where)
            ran_in = field_of(e, "ran_in", "") or ""
            if ran_in:
                return {"running-backend": "in your running Hermes",
                        "separate-process": "in a Hermes process the tray started"}.get(str(ran_in), str(ran_in))
        return ""

    def can_resume_again(self, pending: Callable[[str, str], bool]) -> bool:
        """Offer "Resume again" only where the policy allows: the turn is waiting right now."""
        return not self.config and pending(self.home, self.session_key)


def group_turns(entries: Iterable[Any]) -> list[TurnHistory]:
    """Journal entries (any order) → one :class:`TurnHistory` per interrupted turn, newest activity first.

    Which turn an event belongs to is the engine's one rule (``decisions.turn_roots``): the events of a turn's
    continuations (attempt 1, 2, …, each a marker with its own ``started_at``) land in its row."""
    from hermes_tray_core.decisions import turn_roots

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
