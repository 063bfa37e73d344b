"""Why an interrupted turn stopped, and when: said only from a fact on this machine, always with that fact
(pure). :func:`stop_cause`: first match wins, in the order docs/architecture.md (step 3) lists the causes.
:func:`stopped_at`: Hermes' ``interrupted_at``, else the moment the tray saw it end; else None.

Not met: a clock stepped forward after the Hermes process started (NTP on a computer without a battery-backed
clock) by more than that computer's uptime makes ``restarted`` said of a turn whose computer did not restart.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from hermes_tray_core.numbers import strict_finite
from hermes_tray_core.turn import Marker
from hermes_tray_core.vocab import StopCause

__all__ = ["CAUSE_WORDS", "RESTART_MARGIN_S", "cause_words", "stop_cause", "stopped_at"]

#: A Hermes process this much older than the boot (or more) started before it: the kernel's boot time is
#: whole seconds, and slewing moves it by far less.
RESTART_MARGIN_S = 30.0

#: One short phrase per cause, as the user reads it (the fact follows it in brackets).
CAUSE_WORDS = {
    StopCause.SHUTDOWN: "Hermes was shut down (an update or a quit)",
    StopCause.OUT_OF_MEMORY: "its Hermes process ran out of memory",
    StopCause.TRAY_QUIT: "the tray quit while it ran",
    StopCause.RESTARTED: "the computer restarted",
    StopCause.CONTINUATION_CRASHED: "hermes-tray's continuation of it crashed",
    StopCause.UNKNOWN: "Hermes stopped (cause unknown)",
}


def cause_words(cause: StopCause, fact: str = "") -> str:
    """The cause as one line: its phrase, and the fact behind it."""
    words = CAUSE_WORDS[cause]
    return f"{words} ({fact})" if fact else words


def _when(t: float, now: float) -> str:
    """"14:02" today, "Mar 3 14:02" another day."""
    return _minute(int(t // 60), int(now // 60))


@lru_cache(maxsize=512)  # a scan says the same few moments of many turns (the boot, their starts)
def _minute(t: int, now: int) -> str:
    try:
        at, today = time.localtime(t * 60), time.localtime(now * 60)
    except (OverflowError, OSError, ValueError):
        return "an unreadable time"
    same_day = (at.tm_year, at.tm_yday) == (today.tm_year, today.tm_yday)
    return time.strftime("%H:%M" if same_day else "%b %d %H:%M", at)


def stop_cause(marker: Marker, *, now: float, boot_time: float | None = None,
               witnessed: Mapping[str, Any] | None = None,
               crashed: Mapping[str, Any] | None = None) -> tuple[StopCause, str]:
    """``(cause, fact)`` for a turn no longer running. ``witnessed``: the ledger's ``stopped`` for it;
    ``crashed``: its continuation's crash (or the tray's quit under it). The fact is "" only for
    ``unknown``."""
    entry = marker.raw if marker.is_entry else {}
    if entry.get("interrupted_by") == "shutdown":
        return StopCause.SHUTDOWN, "Hermes recorded it in the turn's marker"
    if witnessed is not None and witnessed.get("cause") == StopCause.OUT_OF_MEMORY:
        fact = witnessed.get("fact")
        if isinstance(fact, str) and fact:
            return StopCause.OUT_OF_MEMORY, fact
    if crashed is not None and crashed.get("event") == "interrupted":  # stopped_by: shutdown (the journal's rule)
        at = strict_finite(crashed.get("created_at"))
        return StopCause.TRAY_QUIT, ("the tray's records: the tray quit while attempt "
                                     f"{crashed.get('attempt')} ran" + (f", at {_when(at, now)}" if at is not None
                                                                         else ""))
    started = strict_finite(entry.get("writer_start_time"))
    what = "its Hermes process started"
    if started is None or started <= 0:
        started, what = strict_finite(entry.get("started_at")), "the turn started"
    if boot_time is not None and started is not None and 0 < started < boot_time - RESTART_MARGIN_S:
        return StopCause.RESTARTED, (f"{what} at {_when(started, now)}, before this computer last started, "
                                     f"at {_when(boot_time, now)}")
    if crashed is not None:
        at = strict_finite(crashed.get("created_at"))
        return StopCause.CONTINUATION_CRASHED, ("the tray's records: the Hermes running attempt "
                                                f"{crashed.get('attempt')} exited mid-turn"
                                                + (f" at {_when(at, now)}" if at is not None else ""))
    return StopCause.UNKNOWN, ""


def stopped_at(marker: Marker, *, witnessed: Mapping[str, Any] | None = None,
               crashed: Mapping[str, Any] | None = None) -> float | None:
    if marker.interrupted_at is not None:
        return marker.interrupted_at
    for fact in (witnessed, crashed):
        at = strict_finite(fact.get("created_at")) if fact is not None else None
        if at is not None and at > 0:
            return at
    return None
