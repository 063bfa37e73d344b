"""The WebUI turn journals of a home: each session summarised without any text (its unfinished turns: ids, times,
worker identity) for the scanner's cache, and judged (:func:`webui_records`, :func:`decide_webui`): a WebUI turn is
listed, never acted on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.deciding.policy import decide_webui
from hermes_tray_core.deciding.records import TurnRecord
from hermes_tray_core.keys import home_path, session_key
from hermes_tray_core.numbers import json_int, strict_finite
from hermes_tray_core.stores import turn_journal as journal
from hermes_tray_core.stores.fsutil import os_error_text
from hermes_tray_core.turn import Marker, Turn
from hermes_tray_core.vocab import TurnSource, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.scanning.cache import ScanCache
    from hermes_tray_core.scanning.running import RunningNow

__all__ = ["summarise_journal", "valid_summary", "webui_records"]


def summarise_journal(sid: str, files: Sequence[str]) -> dict[str, Any]:
    """Pending turns of one WebUI session, without any text. ``files``: the main file first, then its shards;
    plain strings, since path objects were a third of a cold ``status`` over a thousand journals."""
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
        pids_by_turn = _shard_pids(sid, labelled)
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


def _shard_pids(sid: str, labelled: Sequence[tuple[str | None, str]]) -> dict[str, int]:
    """turn_id → pid of the shard ``<sid>~<pid>.jsonl`` that wrote it (the worker's pid)."""
    out: dict[str, int] = {}
    for label, f in labelled:
        if not label:
            continue
        try:
            pid = int(label.rsplit("~", 1)[1].split(".", 1)[0])
            events = journal.read_journal_files(sid, [(label, f)])["events"]
        except (OSError, ValueError):
            continue
        out.update((ev["turn_id"].strip(), pid) for ev in events if isinstance(ev.get("turn_id"), str))
    return out


def _list_journals(jdir: Path) -> dict[str, tuple[str, list[str]]]:
    """A WebUI journal directory's sessions: sid -> (signature of its files, their paths, main file first)."""
    groups: dict[str, list[tuple[str, str, str]]] = {}  # sid -> [(name, path, "name:ino:size:mtime_ns")]
    for de in os.scandir(jdir):
        name = de.name
        if name[-6:] != ".jsonl" or name[0] == ".":
            continue
        try:
            st = de.stat()
        except OSError:
            continue
        item = (name, de.path, f"{name}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
        groups.setdefault(name[:-6].split("~", 1)[0], []).append(item)
    for files in groups.values():
        files.sort(key=lambda f: ("~" in f[0], f[0]))
    return {sid: ("|".join(f[2] for f in files), [f[1] for f in files]) for sid, files in groups.items()}


def webui_records(home: Home, now: float, problems: list[str], live: set[str], cache: ScanCache,
                  running: RunningNow, log_once: Callable[..., None]) -> tuple[int, list[TurnRecord]]:
    """The WebUI sessions of ``home`` with an unfinished turn (``live``: their cache keys)."""
    from hermes_tray_core.process.identity import process_liveness
    from hermes_tray_core.scanning.cache import MISS  # (the cache reads this module's summaries)

    jdir = home.webui_journal_dir
    try:
        listing = _list_journals(jdir)
    except (FileNotFoundError, NotADirectoryError):
        return 0, []
    except (OSError, ValueError) as exc:
        problems.append(f"cannot list WebUI journals in {jdir}: {os_error_text(exc)}")
        return 0, []
    records: list[TurnRecord] = []
    malformed_sessions = 0
    prefix = str(jdir) + os.sep
    for sid, (sig, paths) in listing.items():
        ckey = prefix + sid
        live.add(ckey)
        summary = cache.summary(ckey, sig)
        if summary is MISS:
            try:
                summary = cache.put_summary(ckey, sig, summarise_journal(sid, paths))
            except ValueError:
                continue  # not a WebUI session id: not ours to read
            except Exception as exc:  # boundary: reading a journal the WebUI wrote, where anything can be
                problems.append(f"cannot read WebUI journal {jdir / sid}.jsonl: {os_error_text(exc)}")
                continue
        if summary is None:
            continue
        if summary.get("malformed"):
            malformed_sessions += 1
        pending = [p for p in summary["pending"] if type(p) is dict]
        if not pending:
            continue
        try:
            record = _webui_record(home, sid, pending, now, process_liveness, running)
            if record is not None:
                records.append(record)
        except Exception as exc:  # boundary: one hostile journal never hides the others
            log_once(home, sid, f"cannot judge this WebUI session ({type(exc).__name__}: {exc})", level=40)
    if malformed_sessions:
        what = "WebUI journal has" if malformed_sessions == 1 else "WebUI journals have"
        problems.append(f"{malformed_sessions} {what} malformed lines in {jdir} (skipped)")
    return len(listing), records

def _webui_record(home: Home, sid: str, pending: list[dict[str, Any]], now: float,
                  liveness: Callable[[object, object], WriterState], running: RunningNow) -> TurnRecord | None:
    """A WebUI session's newest unfinished turn, judged; None while a worker of the session is alive."""
    judged = [(liveness(p["pid"], p.get("start")) if p.get("pid") else WriterState.UNKNOWN, p)
              for p in pending]
    # A live worker anywhere in the session wins (it is running); else the newest turn speaks for it.
    if any(j[0] == WriterState.ALIVE for j in judged):
        return None  # a live worker: the session's turn is simply running, not interrupted
    writer, turn = max(judged, key=lambda j: strict_finite(j[1].get("started_at")) or 0.0)
    server, server_detail = (running.webui_server(home) if writer == WriterState.UNKNOWN else ("none", ""))
    decision = decide_webui(turn, worker=writer, now=now, server=server, server_detail=server_detail,
                            pending_turns=len(pending))
    started = strict_finite(turn.get("started_at")) or 0.0
    return TurnRecord(
        home=home.path, profile=home.profile, turn=Turn(home_path(home.path), session_key(sid),
                                                        Marker.known(started)),
        title=None, prompt_excerpt="", age_seconds=decision.age_seconds, writer=writer,
        verdict=decision.verdict, reason=decision.reason, source=TurnSource.WEBUI, unsure=decision.unsure,
        turn_id=turn.get("turn_id") if isinstance(turn.get("turn_id"), str) else None, code=decision.code,
    )
