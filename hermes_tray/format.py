"""Small text helpers shared by every view and the command line (Qt-free: ``status`` imports it). The age
formatter lives with the ages it words (``core.deciding.policy``), loaded on first use: the tray's icon shows first.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import hermes_tray_core
from hermes_tray_core import strict_finite

__all__ = ["since_text", "turn_age", "turn_since", "elapsed_text", "elide",
           "first_line", "repeats", "safe_text", "short_path", "stamp", "tell_apart"]

if TYPE_CHECKING:
    from hermes_tray_core import TurnRecord


# What a file must never put on a terminal or in a window as is: C0 and C1 control characters (ESC starts
# the sequences that retitle a terminal or rewrite its screen, BEL rings it), DEL, the bidirectional
# overrides and isolates (U+202E shows text backwards), the line and paragraph separators, and the lone
# surrogates a path that is not UTF-8 decodes to (they cannot even be printed). Tab and line feed are
# handled apart (see safe_text).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return " " if ch in "\t\n" else f"\\u{ord(ch):04x}"


def safe_text(value: object, *, keep_newlines: bool = False) -> str:
    """``value`` as text that is safe to show, the one function every human output uses: each character a file
    could use to take over a terminal or a label (``_UNSAFE``) becomes a visible escape in JSON's spelling
    (``\\u001b``: ``--json`` output stays valid JSON); tabs and line feeds become spaces unless ``keep_newlines``."""
    text = value if isinstance(value, str) else str(value)
    pattern = _UNSAFE if keep_newlines else _UNSAFE_OR_BREAK
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def since_text(since: float | None, now: float | None = None) -> str:
    """The engine's ``age_text`` of a wall-clock moment, as of ``now`` (default: this instant)."""
    return hermes_tray_core.age_text(None if since is None else (time.time() if now is None else now) - since)


def turn_age(turn: TurnRecord, now: float | None = None) -> float | None:
    """Seconds since the turn was interrupted, as the policy stated it (the record's ``age_seconds``,
    never recomputed here: one home for the age, ``core/deciding/policy.py``)."""
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


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""


def elapsed_text(seconds: float) -> str:
    """``m:ss`` of a running continuation (menu, tooltip, turns window, status window)."""
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


def elide(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def tell_apart(texts: Sequence[str], width: int) -> list[str]:
    """Each text in at most ``width`` characters, showing where it differs from the others: its first words, then
    from the first word that differs (``Please refactor … keys warn (round 2)``); one that another merely continues
    shows its own end; equal texts stay equal. Sorted neighbours share the longest prefixes: O(n log n)."""
    words = [str(t).split() for t in texts]
    shown = [elide(t, width) for t in texts]
    seen = Counter(shown)
    order = sorted(range(len(words)), key=lambda i: words[i])
    shared = [0] * len(words)  # the most leading words each text shares with another
    for a, b in zip(order, order[1:], strict=False):
        n = _common(words[a], words[b])
        shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
    same = Counter(tuple(w) for w in words)
    out = []
    for i, w in enumerate(words):
        if seen[shown[i]] == 1 or not w or same[tuple(w)] > 1:
            out.append(shown[i])
            continue
        k = shared[i]
        start = k if k < len(w) else max(0, len(w) - 3)  # all of it begins another: its end tells it apart
        if start <= 2:
            out.append(shown[i])
            continue
        out.append(elide(f"{' '.join(w[:2])} … {' '.join(w[start:])}", width))
    return out


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def repeats(a: str, b: str, run: int = 3) -> bool:
    """Do ``a`` and ``b`` share a run of ``run`` words (or is one of them that short and inside the other)?
    A line that says one of them already need not say the other: never the same text twice."""
    def norm(text: str) -> list[str]:
        return [w for w in (x.strip("“”\"'…,.:;!?()").lower() for x in str(text).split()) if w]

    wa, wb = norm(a), norm(b)
    if not wa or not wb:
        return False
    n = min(run, len(wa), len(wb))
    grams = {tuple(wa[i:i + n]) for i in range(len(wa) - n + 1)}
    return any(tuple(wb[i:i + n]) in grams for i in range(len(wb) - n + 1))


def first_line(text: str, limit: int = 120) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return elide(line.strip(), limit)
    return ""


def short_path(path: object) -> str:
    """``/home/me/.hermes`` → ``~/.hermes``: shorter, the same for every reader, and shown safely
    (:func:`safe_text`: a folder's name is whatever its creator chose)."""
    import os

    text = str(path)
    home = os.path.expanduser("~")
    if home and home != "/" and (text == home or text.startswith(home + os.sep)):
        text = "~" + text[len(home):]
    return safe_text(text)
