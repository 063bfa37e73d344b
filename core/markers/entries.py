"""One marker entry exactly as Hermes writes and reads it (``tui_gateway.turn_marker``), how the file keeps a
day and 32 of them, and whether its writer still runs. One difference: the newest 32 *include* the marker
being recorded (Hermes prunes to 32 and then adds one, so its file can hold 33).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hermes_tray_core.markers.file import Entries
from hermes_tray_core.numbers import finite
from hermes_tray_core.process.identity import (
    HermesJudgement,
    ProcessIdentity,
    judge_hermes_identity,
    own_identity,
)
from hermes_tray_core.turn import Marker
from hermes_tray_core.vocab import WriterState

__all__ = ["MAX_AGE_SECS", "MAX_ENTRIES", "MAX_PROMPT_CHARS", "build_entry", "marker_writer_state", "normalize_marker",
    "with_record", "writer_judgement"]

MAX_AGE_SECS = 24 * 3600
MAX_ENTRIES = 32
MAX_PROMPT_CHARS = 64_000


def _started_at(entry: dict[str, Any]) -> float:
    """``started_at`` as Hermes reads it; junk is 0, so it ages out instead of breaking writes."""
    return finite(entry.get("started_at") or 0) or 0.0


def build_entry(prompt: str, *, attempts: int = 0, auto_continue: bool = True,
                notification_category: str | None = None, writer: ProcessIdentity | None = None, now: float | None = None) -> dict[str, Any]:
    ident = writer if writer is not None else own_identity()
    entry: dict[str, Any] = {
        "attempts": max(0, int(attempts)),
        "prompt": prompt[:MAX_PROMPT_CHARS],
        "started_at": time.time() if now is None else float(now),
        "auto_continue": bool(auto_continue),
        "writer_pid": int(ident.pid),
    }
    if ident.start_time is not None:
        entry["writer_start_time"] = float(ident.start_time)
    if notification_category == "diagnostic":
        entry["notification_category"] = notification_category
    return entry


def normalize_marker(entry: object) -> dict[str, Any] | None:
    """The shape Hermes' ``read_turn_marker`` returns for a raw entry, or None (no prompt / junk fields)."""
    if not isinstance(entry, dict):
        return None
    try:
        prompt = str(entry.get("prompt") or "")
        if not prompt.strip():
            return None
        out: dict[str, Any] = {
            "attempts": max(0, int(entry.get("attempts") or 0)),
            "prompt": prompt,
            "started_at": float(entry.get("started_at") or 0),
            "auto_continue": bool(entry.get("auto_continue", True)),
        }
        for key in ("writer_pid", "writer_start_time"):
            if entry.get(key) is not None:
                out[key] = entry[key]
        if entry.get("notification_category") == "diagnostic":
            out["notification_category"] = "diagnostic"
        return out
    except Exception:  # boundary: reading what Hermes wrote, where anything can be
        return None


def writer_judgement(marker: Marker, home: Path | str | None = None) -> HermesJudgement:
    """The tray's and Hermes' verdicts on this marker's writer (Hermes': ``unknown`` unless ``writer_pid`` is
    a positive int, then its ``_pid_liveness``). With ``home`` the tray also reads a live Hermes process
    serving that home through a wall-clock step (:func:`core.process.identity.judge_hermes_identity`)."""
    unknown = HermesJudgement(WriterState.UNKNOWN, WriterState.UNKNOWN)
    try:
        pid = marker.writer_pid
        if pid is None:
            return unknown
        serves = None
        if home is not None:
            from hermes_tray_core.hermes.processes import serves_home

            def serves(p: int) -> bool:
                return serves_home(p, home)
        return judge_hermes_identity(pid, marker.writer_start_time, serves_home=serves)
    except Exception:  # boundary: reading what Hermes wrote, where anything can be
        return unknown


def marker_writer_state(entry: object, home: Path | str | None = None) -> WriterState:
    """Is the entry's writer still running? "unknown" (junk, no pid, unreadable) leaves it alone."""
    return writer_judgement(Marker.read(entry), home).state


def with_record(entries: Entries, key: str, entry: dict[str, Any], now: float) -> Entries:
    """Prune (24 h, newest 32 with the new one) and insert; an existing key keeps its place, as in Hermes."""
    fresh = {}
    for k, e in entries.items():
        started = e.get("started_at")
        if type(started) is not float:  # the fast path is what Hermes writes: a float
            started = _started_at(e)
        if now - started <= MAX_AGE_SECS:  # NaN compares False: pruned
            fresh[k] = e
    if len(fresh) - (key in fresh) > MAX_ENTRIES - 1:
        others = [k for k in fresh if k != key]
        keep = set(sorted(others, key=lambda k: _started_at(fresh[k]), reverse=True)[: MAX_ENTRIES - 1])
        fresh = dict(
            sorted(((k, e) for k, e in fresh.items() if k in keep), key=lambda kv: _started_at(kv[1]), reverse=True)
        )
    return {**fresh, key: entry}
