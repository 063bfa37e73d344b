"""One marker entry: how Hermes writes and reads it, how the file keeps at most a day and 32 of them, and
whether the process that wrote it still runs.

Entries are exactly Hermes' (``tui_gateway.turn_marker``): same fields, same order, prompt capped. One
deliberate difference: the cap keeps the newest 32 *including* the marker being recorded (Hermes prunes to 32
and then adds one, so its file can hold 33). ``writer=`` records a marker on behalf of another process (a
continuation the tray launched), so liveness follows that process.
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
    "with_record", "writer_fields", "writer_judgement"]

MAX_AGE_SECS = 24 * 3600
MAX_ENTRIES = 32
MAX_PROMPT_CHARS = 64_000


def _started_at(entry: dict[str, Any]) -> float:
    """``started_at`` as Hermes reads it; junk counts as 0 (so it ages out instead of breaking writes)."""
    return finite(entry.get("started_at") or 0) or 0.0


def writer_fields(writer: ProcessIdentity | None = None) -> dict[str, Any]:
    """``writer_pid`` (+ ``writer_start_time`` when known) for ``writer``, default this process."""
    ident = writer if writer is not None else own_identity()
    fields: dict[str, Any] = {"writer_pid": int(ident.pid)}
    if ident.start_time is not None:
        fields["writer_start_time"] = float(ident.start_time)
    return fields


def build_entry(
    prompt: str,
    *,
    attempts: int = 0,
    auto_continue: bool = True,
    notification_category: str | None = None,
    writer: ProcessIdentity | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """A marker entry exactly as Hermes writes it (same fields, same order, prompt capped)."""
    entry: dict[str, Any] = {
        "attempts": max(0, int(attempts)),
        "prompt": prompt[:MAX_PROMPT_CHARS],
        "started_at": time.time() if now is None else float(now),
        "auto_continue": bool(auto_continue),
        **writer_fields(writer),
    }
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
    """The tray's and Hermes' verdicts on this marker's writer (``writer_pid`` + ``writer_start_time``).

    Hermes' own ``marker_writer_state``: ``unknown`` unless ``writer_pid`` is a positive int (never a bool);
    then ``hermes_cli.active_sessions._pid_liveness`` with its coercions (:func:`core.process.identity.hermes_liveness`:
    a ``writer_start_time`` Hermes cannot convert is no start time; NaN never matches). With ``home`` the
    tray also reads the writer through a wall-clock step when it is a live Hermes process serving that home
    (:func:`core.process.identity.judge_hermes_identity`); ``.hermes`` keeps Hermes' own verdict."""
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
    """``"alive"`` / ``"dead"`` / ``"unknown"``: is the process that wrote this marker entry still running?

    A marker proves a turn started, never that its writer died; "unknown" (junk, no pid, unreadable
    process) is the safe answer that leaves the marker alone. ``home``: the home whose marker file holds the
    entry, so that a live Hermes writer stays alive through a wall-clock step (:func:`writer_judgement`).
    """
    return writer_judgement(Marker.read(entry), home).state


def with_record(entries: Entries, key: str, entry: dict[str, Any], now: float) -> Entries:
    """Prune (24 h, newest 32 including the new one) and insert; an existing key keeps its place, as in Hermes."""
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
