"""Ask a running Hermes backend whether it runs a turn for a session: for a marker whose writer is alive.

A live writer means "someone is working on it" (Hermes' own rule), but a marker can name a live backend
that holds no turn for the session any more: the tray's own continuation on a backend that predates
auto-continue hands the marker to that backend's pid before it submits its note, and a resume killed in
between leaves the marker naming a backend that never ran it. Hermes itself would continue such a marker
when resumed *in that very process* (it holds back only for another process's live marker). So when the
writer is a ``hermes dashboard`` / ``hermes serve`` of this user serving the marker's home, the tray asks
it (``session.active_list`` over its ``/api/ws``): is the session live there, and is a turn running?

The answer is cached per (home, session, writer) for a few seconds: scans come in bursts.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import NamedTuple

from hermes_tray_core import hermes_paths

__all__ = ["WriterTurn", "ask_writer", "forget_answers"]

CACHE_SECONDS = 5.0
ASK_TIMEOUT = 5.0
_RUNNING = ("working", "starting", "waiting", "streaming")


class WriterTurn(NamedTuple):
    """``state``: ``running`` (a turn runs for the session there), ``none`` (the backend holds no turn for it:
    the session is not live there, or live and idle), ``unknown`` (not a backend the tray can ask, or it did
    not answer); ``detail`` names the backend."""

    state: str
    detail: str


_cache: dict[tuple[str, str, int, float | None], tuple[float, WriterTurn]] = {}
_cache_lock = threading.Lock()


def forget_answers() -> None:
    with _cache_lock:
        _cache.clear()


def ask_writer(home: Path | str, session_key: str, pid: int, start_time: float | None, *,
               processes: object = None) -> WriterTurn:
    """Does the live writer ``pid`` — when it is a running backend serving ``home`` — run a turn for
    ``session_key``? Never raises."""
    key = (hermes_paths.canonical(home), session_key, int(pid), start_time)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    answer = _ask(home, session_key, pid, start_time, processes)
    if answer.state != "unknown":
        with _cache_lock:
            _cache[key] = (now, answer)
    return answer


def _ask(home: Path | str, session_key: str, pid: int, start_time: float | None, processes: object) -> WriterTurn:
    from hermes_tray_core.backend_endpoint import endpoint_for
    from hermes_tray_core.hermes_facts import session_row
    from hermes_tray_core.hermes_processes import HermesProcesses
    from hermes_tray_core.rpc import GatewayError, RpcSession
    from hermes_tray_core.transport_ws import BackendUnusable, WebSocketTransport
    from hermes_tray_core.vocab import ProcessKind

    try:
        snap = processes if isinstance(processes, HermesProcesses) else HermesProcesses.now(
            kinds=(ProcessKind.DASHBOARD,))
        proc = next((p for p in snap.serving(home) if p.kind == ProcessKind.DASHBOARD and p.pid == pid), None)
    except Exception as exc:
        return WriterTurn("unknown", f"cannot list processes ({type(exc).__name__})")
    if proc is None:
        return WriterTurn("unknown", f"pid {pid} is not a Hermes backend serving this home")
    if start_time is not None and proc.start_time is not None and abs(proc.start_time - float(start_time)) >= 0.001:
        return WriterTurn("unknown", f"pid {pid} is another process now")
    try:
        endpoint = endpoint_for(proc)
    except BackendUnusable as exc:
        return WriterTurn("unknown", str(exc))
    s = RpcSession(WebSocketTransport(endpoint.host, endpoint.port, endpoint.token, pid=endpoint.pid,
                                      identity=endpoint.identity))
    try:
        s.start()
        s.wait_ready(ASK_TIMEOUT)
        listed = s.request("session.active_list", {}, ASK_TIMEOUT)
    except (GatewayError, TimeoutError) as exc:
        return WriterTurn("unknown", f"{endpoint.describe()} did not answer ({exc})")
    finally:
        s.shutdown(1.0)
    if not isinstance(listed.get("sessions"), list):
        return WriterTurn("unknown", f"{endpoint.describe()} gave no session list")
    row = session_row(listed, session_key)
    who = endpoint.describe()
    if row is None:
        return WriterTurn("none", f"{who} does not hold the session")
    if str(row.get("status") or "") in _RUNNING:
        return WriterTurn("running", f"{who} is running a turn for it")
    return WriterTurn("none", f"{who} holds the session but runs no turn for it")
