"""Which sessions a running Hermes backend has live: ``session.active_list`` over its ``/api/ws``.

Read-only, for two questions: is this session open in the user's Hermes app (:func:`open_in_backends`: the
scanner says so instead of offering a Resume that would be refused), and does the live backend a marker names
as its writer still run a turn for it (:func:`ask_writer`: a resume killed after handing an older Hermes the
marker leaves it naming a backend that never ran it). Answers are cached for :data:`CACHE_SECONDS` (scans come
in bursts); the resume path asks again before it continues, never acting on a cached guess.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.process.identity import process_errors
from hermes_tray_core.vocab import ProcessKind

__all__ = ["ASK_TIMEOUT", "CACHE_SECONDS", "RUNNING_STATUSES", "WriterTurn", "active_sessions", "ask_writer", "forget",
           "none_running", "open_in_backends", "session_row"]

logger = logging.getLogger(__name__)

CACHE_SECONDS = 3.0
ASK_TIMEOUT = 2.0  # connect, ready and the answer, each: a scan never waits long for the app
RUNNING_STATUSES = ("working", "starting", "waiting", "streaming")  # a live row's status while a turn runs
_COMMANDS = (b"hermes", b"hermes-agent", b"hermes-acp")  # hermes_processes.HERMES_COMMANDS, as bytes

_cache: dict[tuple[int, float | None], tuple[float, dict[str, dict[str, Any]] | None]] = {}
_lock = threading.Lock()


class WriterTurn(NamedTuple):
    """``state``: ``running``, ``none`` (no turn there) or ``unknown``; ``detail`` names the backend."""

    state: str
    detail: str


def session_row(listed: Mapping[str, Any], key: str, sid: str | None = None) -> dict[str, Any] | None:
    """The ``session.active_list`` row of stored session ``key`` (runtime id ``sid`` when given)."""
    rows = listed.get("sessions")
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict) and row.get("session_key") == key and (sid is None or row.get("id") == sid):
            return row
    return None


def none_running() -> bool:
    """True when this user surely runs no ``hermes dashboard`` / ``serve`` (Linux ``/proc``, a few ms):
    ``status`` then skips the process table."""
    if not os.path.isdir("/proc/self"):
        return False
    uid = os.getuid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read(4096).split(b"\0")
        except OSError:
            continue
        if any(os.path.basename(a) in _COMMANDS for a in argv) and any(a in (b"dashboard", b"serve") for a in argv):
            return False
    return True


def active_sessions(proc: Any) -> dict[str, dict[str, Any]] | None:
    """``{session key: its active_list row}`` of the running backend ``proc``, or None. Cached."""
    ident = (int(proc.pid), getattr(proc, "start_time", None))
    with _lock:
        hit = _cache.get(ident)
    if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
        return hit[1]
    rows = _ask(proc)
    with _lock:
        if len(_cache) > 64:
            _cache.clear()
        _cache[ident] = (time.monotonic(), rows)
    return rows


def _ask(proc: Any) -> dict[str, dict[str, Any]] | None:
    from hermes_tray_core.backend.endpoint import endpoint_for
    from hermes_tray_core.backend.rpc import GatewayError

    try:
        session = endpoint_for(proc).session(open_timeout=ASK_TIMEOUT)
        session.start()
    except (GatewayError, OSError, ValueError) as exc:
        logger.info("cannot ask Hermes pid %s which sessions are live: %s", proc.pid, exc)
        return None
    try:
        session.wait_ready(ASK_TIMEOUT)
        listed = session.request("session.active_list", {}, timeout=ASK_TIMEOUT)
    except (GatewayError, TimeoutError) as exc:
        logger.info("Hermes pid %s did not say which sessions are live: %s", proc.pid, exc)
        return None
    finally:
        try:
            session.shutdown(1.0)
        except Exception:  # boundary: closing our own connection never fails the caller (never the backend)
            pass
    rows = listed.get("sessions") if isinstance(listed, dict) else None
    if not isinstance(rows, list):
        return None
    return {str(r["session_key"]): r for r in rows if isinstance(r, dict) and isinstance(r.get("session_key"), str)}


def open_in_backends(home: Path | str, processes: Any) -> dict[str, int]:
    """``{session key: pid of the running Hermes that has it open}`` for ``home``."""
    found: dict[str, int] = {}
    for proc in processes.serving(home):
        if proc.kind == ProcessKind.DASHBOARD:
            for key in active_sessions(proc) or {}:
                found.setdefault(key, proc.pid)
    return found


def ask_writer(home: Path | str, session_key: str, pid: int, start_time: float | None, *,
               processes: object = None) -> WriterTurn:
    """Does the live writer ``pid``, a backend of ``home``, run a turn for ``session_key``? Never raises."""
    from hermes_tray_core.hermes.processes import HermesProcesses
    from hermes_tray_core.process.identity import judge_hermes_identity

    try:
        snap = processes if isinstance(processes, HermesProcesses) else HermesProcesses.now(
            kinds=(ProcessKind.DASHBOARD,))
        proc = next((p for p in snap.serving(home) if p.kind == ProcessKind.DASHBOARD and p.pid == pid), None)
    except process_errors() as exc:  # the process table cannot be walked
        return WriterTurn("unknown", f"cannot list processes ({type(exc).__name__})")
    if proc is None:
        return WriterTurn("unknown", f"pid {pid} is not a Hermes backend serving this home")
    if start_time is not None and judge_hermes_identity(pid, start_time, serves_home=lambda _p: True).state != "alive":
        return WriterTurn("unknown", f"pid {pid} is another process now")
    rows = active_sessions(proc)
    who = f"your running Hermes (pid {pid})"
    if rows is None:
        return WriterTurn("unknown", f"{who} did not say which sessions are live")
    row = rows.get(session_key)
    if row is None:
        return WriterTurn("none", f"{who} does not hold the session")
    if str(row.get("status") or "") in RUNNING_STATUSES:
        return WriterTurn("running", f"{who} is running a turn for it")
    return WriterTurn("none", f"{who} holds the session but runs no turn for it")


def forget() -> None:
    """Drop every cached answer."""
    with _lock:
        _cache.clear()

