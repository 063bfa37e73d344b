"""Small text helpers shared by the menu, the prompt window and notifications."""

from __future__ import annotations

import math
import time
from typing import Any


def age_text(seconds: float | None) -> str:
    """``"just now"``, ``"4 min ago"``, ``"2 h ago"``: what a person reads at a glance."""
    if seconds is None:
        return "unknown time"
    s = max(0.0, float(seconds))
    if s < 45:
        return "just now"
    if s < 90 * 60:
        return f"{max(1, round(s / 60))} min ago"
    if s < 36 * 3600:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


def turn_age(turn: Any, now: float | None = None) -> float | None:
    """Seconds since the turn started (uses the record's ``age`` when present)."""
    age = getattr(turn, "age", None)
    if age is None:
        age = getattr(turn, "age_seconds", None)
    if isinstance(age, (int, float)) and not isinstance(age, bool) and math.isfinite(age):
        return float(age)
    started = getattr(turn, "started_at", None)
    if isinstance(started, (int, float)) and not isinstance(started, bool) and math.isfinite(started) and started > 0:
        return (now or time.time()) - float(started)
    return None


def elapsed_text(seconds: float) -> str:
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
