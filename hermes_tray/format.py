"""Small text helpers shared by every view and the command line (Qt-free: ``status`` imports it)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hermes_tray_core.numbers import strict_finite

if TYPE_CHECKING:
    from hermes_tray_core.scan_records import TurnRecord


def age_text(seconds: float | None) -> str:
    """``"12 s ago"``, ``"4 min ago"``, ``"2 h ago"``, ``"3 days ago"``: the one age formatter of
    every view (menu, turns window, tooltip, History) and of ``hermes-tray status``, so two rows never disagree in style."""
    if seconds is None:
        return "at an unknown time"
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{int(s)} s ago"
    if s < 90 * 60:
        return f"{int(s // 60)} min ago"
    if s < 36 * 3600:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} days ago"


def since_text(since: float | None, now: float | None = None) -> str:
    """:func:`age_text` of a wall-clock moment, as of ``now`` (default: this instant)."""
    if since is None:
        return age_text(None)
    return age_text((time.time() if now is None else now) - since)


def turn_age(turn: TurnRecord, now: float | None = None) -> float | None:
    """Seconds since the turn was interrupted, as the policy stated it (the record's ``age_seconds``,
    never recomputed here: one home for the age, ``core/policy.py``)."""
    age = strict_finite(turn.age_seconds)
    if age is not None:
        return max(0.0, float(age))
    started = strict_finite(turn.started_at)
    if started is not None and started > 0:
        return (time.time() if now is None else now) - started
    return None


def turn_since(turn: TurnRecord, scanned_at: float | None = None) -> float | None:
    """The wall-clock moment a turn's age counts from (the scanner's age is as of its scan), so the
    views can say the age *now*, ticking, instead of the age the last scan saw."""
    at = time.time() if scanned_at is None else scanned_at
    age = turn_age(turn, at)
    return None if age is None else at - age


def elapsed_text(seconds: float) -> str:
    """``m:ss`` of a running continuation (menu, tooltip, turns window, status window)."""
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


def elide(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def first_line(text: str, limit: int = 120) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return elide(line.strip(), limit)
    return ""


def short_path(path: object) -> str:
    """``/home/me/.hermes`` → ``~/.hermes``: shorter, and the same for every reader."""
    import os

    text = str(path)
    home = os.path.expanduser("~")
    if home and home != "/" and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home):]
    return text
