"""What Hermes did with a resume, read from Hermes' own facts — never from a guess or a version string.

Hermes declines a continuation *silently* (log only) and cannot list or claim an interrupted turn, so the
tray reads what it leaves behind: the resume reply's shape, ``session.active_list``'s ``last_active``, the
marker before and after, and the active-session registry. Nothing here raises for what it reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.numbers import strict_finite
from hermes_tray_core.turn import Marker, Turn
from hermes_tray_core.vocab import NotContinued, Verdict, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.backend.sessions import WriterTurn
    from hermes_tray_core.deciding.policy import Seen
    from hermes_tray_core.hermes.state_db import OwnerView

__all__ = ["TOUCH_SLACK", "continued_elsewhere", "live_reuse", "raw_entry", "seen_now", "touched_by_other",
           "wall_time_of", "why_not_continued"]

#: A resume reply's ``started_at`` older than the request by more than this is a live session's.
REUSE_SLACK = 0.25
#: ``last_active`` newer than the tray's own last touch (when it read Hermes' answer, stamped before) by more
#: than this is another client's: the slack only absorbs float rounding.
TOUCH_SLACK = 0.001


def wall_time_of(received_monotonic: float | None) -> float:
    """The wall-clock time of a frame read at ``received_monotonic`` (``core.backend.rpc.RECEIVED``)."""
    now_wall, now_mono = time.time(), time.monotonic()
    if received_monotonic is None:
        return now_wall
    return now_wall - max(0.0, now_mono - float(received_monotonic))


def live_reuse(reply: Mapping[str, Any], sent_at: float) -> bool:
    """Did ``session.resume`` (sent at wall time ``sent_at``) reuse a session another client holds live? A
    fresh runtime answers ``inflight: null``, no ``turn_started_at`` and a ``started_at`` taken while serving
    the request; anything else, or a doubt, is live (the tray then leaves the session alone)."""
    if "turn_started_at" in reply:
        return True
    if "inflight" not in reply or reply.get("inflight") is not None:
        return True
    started = strict_finite(reply.get("started_at"))
    return started is not None and started < sent_at - REUSE_SLACK


def touched_by_other(row: Mapping[str, Any], own_touch: float) -> bool:
    """Another client resumed the session or submitted to it since the tray's own last touch (wall time)."""
    last = strict_finite(row.get("last_active"))
    return last is not None and last > own_touch + TOUCH_SLACK


def seen_now(turn: Turn, source: str | None, generation: int | None, *, ask_writer: Callable[[], WriterTurn | None],
             lease: Callable[[], tuple[str, str]], owner: Callable[[], OwnerView | None],
             backend: Callable[[], tuple[str, str]]) -> Seen:
    """What runs beside the marker (writer, lease, owner, backend), looked at only as far as the verdict depends
    on it, for the scan and for a resume's re-check alike; the looks are the caller's (one scan's, or fresh)."""
    from hermes_tray_core.deciding.policy import Seen
    from hermes_tray_core.markers.entries import writer_judgement

    marker = turn.marker
    judged = writer_judgement(marker, turn.home) if marker.is_entry else None
    writer, note = (judged.state, judged.note) if judged is not None else (WriterState.UNKNOWN, "")
    idle = ask_writer() if writer == WriterState.ALIVE else None  # a live writer, a backend: its turn there?
    if idle is not None and idle.state != "none":
        idle = None
    if (writer == WriterState.ALIVE and idle is None) or not marker.is_entry:
        return Seen(writer, source, writer_note=note, generation=generation)
    lstate, ldetail = lease()
    found = owner()
    ostate = found.state if found else "none"
    if idle is not None and found is not None and found.pid == marker.writer_pid:
        ostate = "none"  # the registry's owner is the very backend that, asked, runs no turn for it
    details = [d for d, st in ((ldetail, lstate), (found.detail if found else "", ostate))
               if st in ("live", "alive", "unknown")]
    back, back_detail = backend() if writer == WriterState.UNKNOWN else ("none", "")
    return Seen(writer, source, lstate, ostate, "; ".join(details), back, back_detail, note,
                "none" if idle is not None else "unknown", idle.detail if idle is not None else "", generation)


def raw_entry(home: Path | str, key: str) -> dict[str, Any] | None:
    from hermes_tray_core.markers.store import MarkerStore

    try:
        entry = MarkerStore(home).list().get(key)
    except (OSError, ValueError):  # MarkerStoreError (unreadable, corrupt), a path refused
        return None
    return entry if isinstance(entry, dict) else None


def continued_elsewhere(home: Path | str, key: str, our_pid: int | None, before: Mapping[str, Any] | None
                        ) -> tuple[NotContinued, str, int | None] | None:
    """Another Hermes process is continuing this turn (it rewrote the marker, or the registry names it as the
    session's owner): why, in one line, and its pid."""
    from hermes_tray_core.hermes.state_db import active_session_owner
    from hermes_tray_core.markers.entries import marker_writer_state

    entry = raw_entry(home, key)
    if entry is not None and before is not None and dict(entry) != dict(before):
        pid = entry.get("writer_pid")
        if isinstance(pid, int) and pid != our_pid and marker_writer_state(entry, home) == WriterState.ALIVE:
            return (NotContinued.ANOTHER_OWNER, f"another Hermes process (pid {pid}) is continuing it", pid)
    ignore = (our_pid,) if our_pid else ()
    owner = active_session_owner(home, key, ignore_pids=ignore)
    if owner.state == "alive" and owner.pid is not None and owner.pid != our_pid:
        return (NotContinued.ANOTHER_OWNER, f"another Hermes process (pid {owner.pid}) holds this session", owner.pid)
    return None


def why_not_continued(home: Path | str, key: str, before: Mapping[str, Any] | None,
                      our_pid: int | None) -> tuple[NotContinued, str]:
    """Hermes resumed the session and continued nothing: why, from the marker before and after (gone: Hermes'
    own rules on the entry as it was say why)."""
    from hermes_tray_core.deciding.policy import Seen, decide
    from hermes_tray_core.hermes.config import read_backend_config
    from hermes_tray_core.markers.entries import marker_writer_state

    after = raw_entry(home, key)
    elsewhere = continued_elsewhere(home, key, our_pid, before)
    if elsewhere is not None:
        return elsewhere[0], elsewhere[1]
    if after is None and before is not None:
        try:
            cfg = read_backend_config(home).auto_continue
            d = decide(Marker.read(dict(before)), config=cfg, now=time.time(), seen=Seen(WriterState.DEAD))
        except Exception:  # boundary: reading what the user and Hermes wrote: without it, fewer facts
            d = None
        if d is not None and d.verdict in (Verdict.DISABLED, Verdict.STALE, Verdict.EXHAUSTED):
            return NotContinued(d.verdict.value), f"Hermes cleared the turn: {d.reason}"
        return NotContinued.DECLINED, "Hermes cleared the turn without continuing it (it did not say why)"
    if after is not None and marker_writer_state(after, home) == WriterState.ALIVE and after.get("writer_pid") != our_pid:
        return (NotContinued.WRITER_ALIVE,
                f"Hermes left it: its writer (pid {after.get('writer_pid')}) is still running")
    return NotContinued.DECLINED, "Hermes resumed the session but left the turn alone (it did not say why)"
