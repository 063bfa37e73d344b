"""The scanner's records: one interrupted turn and one home as the user and ``status --json`` see them
(NamedTuples: ``status`` pays for every class it defines, and dataclasses cost more).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_tray_core.deciding.policy import AutoContinueConfig
from hermes_tray_core.keys import SessionKey
from hermes_tray_core.numbers import strict_finite
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Moment, ReasonCode, StopCause, TurnSource, Verdict, WriterState

if TYPE_CHECKING:  # read from state.db only when a home has markers
    from hermes_tray_core.hermes.progress import TurnProgress

__all__ = ["TurnRecord", "HomeReport", "ScanResult", "prompt_excerpt", "EXCERPT_CHARS"]

EXCERPT_CHARS = 120


class TurnRecord(NamedTuple):
    """One interrupted turn as the user sees it. ``home``: as the user named it; ``turn``: the turn as read
    (pass it back to skip or resume, so a changed marker is refused). A WebUI turn (``turn_id``) is never
    acted on. ``progress`` None: it cannot be read. ``cause`` (with ``cause_fact``): None while it runs."""

    home: Path
    profile: str
    turn: Turn
    title: str | None
    prompt_excerpt: str
    age_seconds: float
    writer: WriterState
    verdict: Verdict
    reason: str
    source: TurnSource
    unsure: bool = False
    turn_id: str | None = None
    code: ReasonCode | None = None  # the policy's ReasonCode: what the shell branches on, never the reason text
    # (pid, start time) of the live process other than its writer that makes it ``running``: the tray watches
    # it
    holder: tuple[int, float | None] | None = None
    progress: TurnProgress | None = None
    cause: StopCause | None = None
    cause_fact: str = ""
    title_from_prompt: bool = False
    interrupted_at: float | None = None

    @property
    def session_key(self) -> SessionKey:
        return self.turn.key

    @property
    def started_at(self) -> float:
        return self.turn.started_at

    @property
    def attempts(self) -> int:
        return self.turn.attempts

    @property
    def entry(self) -> Mapping[str, Any] | None:
        raw = self.turn.marker.raw
        return raw if isinstance(raw, dict) else None

    @property
    def actionable(self) -> bool:
        return self.verdict == Verdict.ACTIONABLE

    @property
    def moment(self) -> tuple[Moment, float | None]:
        """The moment a turn's age is said from: interrupted (a fact), else the last thing Hermes saved, else
        its start (None: not known)."""
        if self.interrupted_at is not None:
            return Moment.INTERRUPTED, self.interrupted_at
        started = strict_finite(self.started_at)
        started = started if started is not None and started > 0 else None
        p = self.progress
        if started is not None and p is not None and p.kept and p.ran_for_s is not None and p.ran_for_s > 0:
            return Moment.LAST_SAVED, started + p.ran_for_s
        return Moment.STARTED, started

    def shown_title(self, *, prompts: bool) -> str | None:
        return None if self.title_from_prompt and not prompts else self.title

    def __repr__(self) -> str:
        # identity only: a record that lands in a log must not carry prompt text
        return (f"TurnRecord(home={str(self.home)!r}, session_key={self.session_key!r}, source={self.source!r}, "
                f"verdict={self.verdict!r}, writer={self.writer!r}, attempts={self.attempts})")

    def to_json(self, *, prompts: bool = True) -> dict[str, Any]:
        """The ``status --json`` turn object (docs/cli.md)."""
        return {
            "home": str(self.home),
            "profile": self.profile,
            "session_key": self.session_key,
            "title": self.shown_title(prompts=prompts),
            "prompt_excerpt": self.prompt_excerpt if prompts else None,
            "started_at": self.started_at,
            "interrupted_at": self.interrupted_at,
            "age_seconds": round(self.age_seconds, 3),
            "attempts": self.attempts,
            "writer": str(self.writer),
            "verdict": str(self.verdict),
            "reason": self.reason,
            "reason_code": None if self.code is None else str(self.code),
            "source": str(self.source),
            "progress": None if self.progress is None else self.progress.to_json(excerpts=prompts),
            "cause": None if self.cause is None else str(self.cause),
            "cause_fact": self.cause_fact or None,
        }


class HomeReport(NamedTuple):
    """What one home holds and every problem met reading it (each says what to do)."""

    path: Path
    profile: str
    origin: str
    exists: bool
    markers: str  # "ok" | "none" | "corrupt" | "unreadable"
    marker_count: int
    config: AutoContinueConfig
    state_db: str  # "ok" | "missing" | "unreadable"
    webui_journal_dir: Path
    webui_sessions: int
    unsupported: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    # False: the home could not be read or did not answer, nothing in it is touched again this scan (not in
    # the JSON)
    reachable: bool = True

    def to_json(self) -> dict[str, Any]:
        c = self.config
        config = {"enabled": c.enabled, "freshness_minutes": c.freshness_minutes,
                  "max_attempts": c.max_attempts, "managed": list(c.managed)}
        return {"auto_continue" if k == "config" else k: config if k == "config" else
                str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
                for k, v in self._asdict().items() if k != "reachable"}


class ScanResult(NamedTuple):
    homes: list[HomeReport]
    turns: list[TurnRecord]
    scanned_at: float

    @property
    def actionable(self) -> list[TurnRecord]:
        return [t for t in self.turns if t.actionable]

    @property
    def unsupported(self) -> bool:
        return any(h.unsupported for h in self.homes)

    def to_json(self, *, prompts: bool = True) -> dict[str, Any]:
        return {"homes": [h.to_json() for h in self.homes],
                "turns": [t.to_json(prompts=prompts) for t in self.turns]}


def prompt_excerpt(prompt: object, limit: int = EXCERPT_CHARS) -> str:
    """First non-empty line, at most ``limit`` characters (``…`` marks a cut)."""
    if not isinstance(prompt, str):
        return ""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
