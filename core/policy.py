"""What should happen to one interrupted-turn marker: one pure function, Hermes' own order.

:func:`decide` takes everything it needs as arguments (no I/O, no clock) so the tray, the
helper, the CLI and the resume engine all reach the same verdict as Hermes' backend would
on ``session.resume``. Verdicts, first match wins:

``not-ours``   ``auto_continue`` false, no prompt (queued / malformed entries), or a hosted
               ``bot_room`` session: another mechanism owns recovery.
``running``    the writer is alive, or a live Hermes turn lease / active-session owner.
               Also the verdict when the writer's state is ``unknown``: Hermes "leaves the
               marker alone" then (``marker_writer_state`` docstring), and so do we.
``disabled``   backend ``desktop.auto_continue.enabled`` is false.
``stale``      older than the freshness window (from ``interrupted_at`` when present).
``exhausted``  ``attempts >= max_attempts``.
``actionable`` may be resumed.

When the writer is known dead but the lease or active-session view is ``unknown`` (locked,
corrupt or unreadable ``state.db`` / registry), the remaining checks still apply (they are all "do nothing"
verdicts Hermes would also reach); a marker that would otherwise be ``actionable`` reads
``running`` with ``unsure=True`` instead — when unsure, do nothing and say why.

The tray's own mode (ask / auto / off) never changes a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

Verdict = Literal["not-ours", "running", "disabled", "stale", "exhausted", "actionable"]
VERDICTS: tuple[str, ...] = ("not-ours", "running", "disabled", "stale", "exhausted", "actionable")

DEFAULT_ENABLED = True
DEFAULT_FRESHNESS_MINUTES = 15
DEFAULT_MAX_ATTEMPTS = 2


class AutoContinueConfig(NamedTuple):
    """Effective ``desktop.auto_continue`` block of one home (already coerced).

    Records in ``core.policy`` / ``core.scanner`` / ``core.homes`` are ``typing.NamedTuple``:
    immutable, typed, compared by value, and ~10x cheaper to define than frozen dataclasses —
    ``hermes-tray status`` pays for every class it defines at start-up.
    """

    enabled: bool = DEFAULT_ENABLED
    freshness_minutes: float = DEFAULT_FRESHNESS_MINUTES
    max_attempts: int = DEFAULT_MAX_ATTEMPTS


class Decision(NamedTuple):
    """A verdict plus the one line a user reads to understand it."""

    verdict: str
    reason: str
    unsure: bool = False

    @property
    def actionable(self) -> bool:
        return self.verdict == "actionable"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _fmt_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 90 * 60:
        return f"{int(round(seconds / 60))} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _fmt_minutes(minutes: float) -> str:
    return f"{int(minutes)} min" if float(minutes).is_integer() else f"{minutes:g} min"


def marker_reference_time(marker: Mapping[str, Any]) -> float | None:
    """When the freshness window starts: ``interrupted_at`` if present and numeric, else ``started_at``."""
    interrupted = _num(marker.get("interrupted_at"))
    if interrupted is not None and interrupted > 0:
        return interrupted
    started = marker.get("started_at")
    if started is None or started == 0:
        return 0.0  # Hermes: float(entry.get("started_at") or 0)
    return _num(started)


def marker_attempts(marker: Mapping[str, Any]) -> int | None:
    """Hermes' ``max(0, int(attempts or 0))``; None when Hermes' own reader would fail on it."""
    raw = marker.get("attempts")
    if raw is None or raw == 0 or raw is False:
        return 0
    if isinstance(raw, bool):
        return 1  # int(True) == 1, as Hermes' int() would give
    try:
        return max(0, int(raw))
    except (TypeError, ValueError, OverflowError):
        return None


def decide(
    marker: Mapping[str, Any],
    *,
    config: AutoContinueConfig,
    writer: str,
    now: float,
    source: str | None = None,
    lease: str = "free",
    owner: str = "none",
    activity_detail: str = "",
) -> Decision:
    """Verdict for one marker entry (the raw dict stored under its session key).

    ``writer``: ``alive`` / ``dead`` / ``unknown`` (``marker_writer_state``). ``source``: the
    session's ``state.db`` source, when known. ``lease``: ``live`` / ``free`` / ``unknown`` (Hermes
    turn lease; a home with no ``state.db`` holds none: ``free``); ``owner``: ``alive`` / ``dead`` /
    ``none`` / ``unknown`` (active-session registry; no registry file: ``none``). ``unknown`` means
    a source exists but could not be read: never actionable.
    ``activity_detail`` is appended to lease/owner reasons (e.g. the holder's pid).
    """
    if not isinstance(marker, Mapping):
        return Decision("not-ours", "marker entry is not an object; Hermes ignores it")
    # 1. not-ours
    if not bool(marker.get("auto_continue", True)):
        return Decision("not-ours", "auto_continue is off for this turn: another mechanism owns its recovery")
    prompt = marker.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        what = "a queued entry with no prompt" if marker.get("queued") else "no prompt recorded"
        return Decision("not-ours", f"{what}: there is nothing to continue")
    if source == "bot_room":
        return Decision("not-ours", "hosted bot_room session: its driver owns recovery")
    attempts = marker_attempts(marker)
    ref = marker_reference_time(marker)
    if attempts is None or ref is None:
        bad = "attempts" if attempts is None else "started_at"
        return Decision("not-ours", f"malformed marker ({bad} is not a number): Hermes ignores it")
    # 2. running
    detail = f" ({activity_detail})" if activity_detail else ""
    if writer == "alive":
        pid = marker.get("writer_pid")
        return Decision("running", f"its writer (pid {pid}) is still running: the turn is not interrupted")
    if lease == "live":
        return Decision("running", f"a Hermes backend holds this session's turn lease{detail}")
    if owner == "alive":
        return Decision("running", f"a live Hermes process has this session open{detail}")
    if writer != "dead":
        why = (
            "the marker has no writer pid (written by an older backend)"
            if marker.get("writer_pid") is None
            else f"cannot tell whether writer pid {marker.get('writer_pid')} is still running"
        )
        return Decision("running", f"{why}; left alone, as Hermes does when unsure", unsure=True)
    unsure_why = None
    if lease not in ("free", "live"):
        unsure_why = f"cannot read this session's Hermes turn lease{detail}"
    elif owner not in ("dead", "none", "alive"):
        unsure_why = f"cannot tell whether the session's owner process is alive{detail}"
    # 3. disabled
    if not config.enabled:
        return Decision("disabled", "auto-continue is disabled in this home's config.yaml")
    # 4. stale
    age = now - ref
    window = float(config.freshness_minutes) * 60.0
    if age > window:
        since = "interrupted" if _num(marker.get("interrupted_at")) else "started"
        return Decision(
            "stale",
            f"{since} {_fmt_age(age)} ago, beyond the {_fmt_minutes(config.freshness_minutes)} freshness window",
        )
    # 5. exhausted
    if attempts >= config.max_attempts:
        return Decision(
            "exhausted",
            f"already continued {attempts} time(s); the budget is {config.max_attempts}",
        )
    if unsure_why:
        return Decision("running", f"{unsure_why}; left alone until that is known", unsure=True)
    # 6. actionable
    nxt = attempts + 1
    return Decision("actionable", f"interrupted {_fmt_age(age)} ago; would be continuation {nxt} of {config.max_attempts}")
