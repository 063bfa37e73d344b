"""The WebUI turn journal of one session, summarised without any text: its unfinished turns (ids, times,
worker identity), for the scanner and its cache.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from hermes_tray_core.numbers import json_int, strict_finite
from hermes_tray_core.stores import turn_journal as journal

__all__ = ["summarise_journal", "valid_summary", "shard_pids", "MAX_JOURNAL_BYTES"]

MAX_JOURNAL_BYTES = 64 * 1024 * 1024


def summarise_journal(sid: str, files: Sequence[str]) -> dict[str, Any]:
    """Pending turns of one WebUI session, without any text: ids, times, worker identity.

    ``files``: the session's journal files from the scanner's listing of its directory, the main file
    (``<sid>.jsonl``) first when there is one, then its shards (``<sid>~<pid>.jsonl``). Plain strings:
    a cold ``status`` summarises a thousand journals, and path objects were a third of that."""
    journal.validate_journal_session_id(sid)
    labelled = [(os.path.basename(f) if "~" in os.path.basename(f) else None, f) for f in files]
    doc = journal.read_journal_files(sid, labelled)
    events = doc["events"]
    pending = journal.pending_turns(events)
    out: list[dict[str, Any]] = []
    if pending:
        by_turn: dict[str, list[dict[str, Any]]] = {}
        for ev in events:
            tid = str(ev.get("turn_id") or "").strip()
            if tid:
                by_turn.setdefault(tid, []).append(ev)
        pids_by_turn = shard_pids(files) if any(label for label, _ in labelled) else {}
        for latest in pending:
            tid = str(latest.get("turn_id") or "").strip()
            evs = by_turn.get(tid, [latest])
            first = min((strict_finite(e.get("created_at")) or 0.0) for e in evs)
            pid, start = None, None
            for ev in evs:
                for pk, sk in (("worker_pid", "worker_start_time"), ("pid", "process_start_time")):
                    p = json_int(ev.get(pk))
                    if p is not None and p > 0:
                        pid, start = p, strict_finite(ev.get(sk))
            if pid is None and tid in pids_by_turn:
                pid = pids_by_turn[tid]
            out.append({"turn_id": tid, "started_at": first, "event": str(latest.get("event") or ""),
                        "pid": pid, "start": start})
    return {"pending": out, "malformed": len(doc["malformed"])}


def valid_summary(summary: Any) -> bool:
    return (type(summary) is dict and type(summary.get("pending")) is list
            and all(type(p) is dict for p in summary["pending"]))


def shard_pids(files: Sequence[str | os.PathLike[str]]) -> dict[str, int]:
    """turn_id → pid of the shard ``<sid>~<pid>.jsonl`` that wrote it (the worker's pid)."""
    out: dict[str, int] = {}
    for f in files:
        name = os.path.basename(f)
        if "~" not in name:
            continue
        try:
            pid = int(name.rsplit("~", 1)[1].split(".", 1)[0])
            with open(f, "rb") as fh:
                data = fh.read(MAX_JOURNAL_BYTES)
        except (OSError, ValueError):
            continue
        for line in data.split(b"\n"):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and isinstance(ev.get("turn_id"), str):
                out[ev["turn_id"].strip()] = pid
    return out
