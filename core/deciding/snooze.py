"""Remind me later: put an interrupted turn's announcement off until a time the user names.

A snooze is one ``snoozed`` decision in the ledger with its ``until``: it outlives a restart and shows in
``history``. It continues and skips nothing: ask-once announces the turn once at ``until`` (unless it stopped
waiting meanwhile), and it belongs to one interruption (a newer one is a new question). :func:`remind_at`
reads ``90s``, ``30m``, ``1h30m``, ``2d``, ``tomorrow`` (:data:`MORNING_HOUR`, local time), ``HH:MM`` (its
next time) or ``2026-12-05 09:00``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes_tray_core.deciding.records import TurnRecord
    from hermes_tray_core.stores.ledger import Ledger

__all__ = ["MAX_SNOOZE_S", "MORNING_HOUR", "remind_at", "snooze_turn"]

MORNING_HOUR = 9  # "tomorrow": the next day at this hour, local time
MAX_SNOOZE_S = 7 * 86400.0  # Hermes forgets a marker after a day; a week is already generous
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+)\s*([smhd])")


def _duration(text: str) -> float | None:
    compact = text.replace(" ", "")
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        return None
    return float(sum(int(n) * _UNITS[u] for n, u in parts))


def remind_at(spec: str, now: float) -> float:
    """``spec`` as a wall-clock time after ``now``; ValueError (a sentence for the user) otherwise."""
    text = spec.strip().lower()
    until: float | None
    if text == "tomorrow":
        day = time.localtime(now + 86400)
        until = time.mktime(time.struct_time((day.tm_year, day.tm_mon, day.tm_mday, MORNING_HOUR, 0, 0, 0, 0, -1)))
    elif (seconds := _duration(text)) is not None:
        until = now + seconds
    else:
        until = None
        for fmt in ("%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
            try:
                parsed = time.strptime(text.upper() if "T" in fmt else text, fmt)
            except ValueError:
                continue
            if fmt == "%H:%M":
                today = time.localtime(now)
                until = time.mktime(time.struct_time((today.tm_year, today.tm_mon, today.tm_mday, parsed.tm_hour,
                                                 parsed.tm_min, 0, 0, 0, -1)))
                if until <= now:
                    until += 86400
            else:
                until = time.mktime(time.struct_time((*parsed[:6], 0, 0, -1)))
            break
    if until is None:
        raise ValueError(f"cannot read {spec!r} as a time: say 30m, 1h, tomorrow, 14:30 or 2026-12-05 09:00")
    if until <= now:
        raise ValueError(f"{spec!r} is not in the future")
    if until - now > MAX_SNOOZE_S:
        raise ValueError(f"{spec!r} is more than a week away; Hermes forgets an interrupted turn after a day")
    return until


def snooze_turn(record: TurnRecord, until: float, *, via: str, ledger: Ledger | None = None) -> None:
    """Hold ``record``'s turn back until ``until`` (a ledger error is raised: it did not take)."""
    from hermes_tray_core.stores.ledger import ledger as default

    (ledger or default()).record("snoozed", record.turn.ident, until=float(until), profile=record.profile, via=via)
