"""Which sessions the user's running Hermes has open: asked when a scan would offer a turn.

A session open in the Hermes app (a Desktop window has it) belongs to that app: a resume of it is refused
(``core.gateway``: ``session.active_list``). Before this, the tray learnt that only when the user pressed
Resume; ``status`` said ``actionable`` and the Resume button stayed. The scanner now asks the running
backend of the home the same question (``session.active_list`` over its ``/api/ws``) before it offers a
turn, and a session live there reads as a live owner (``running``: "open in Hermes — it continues there").

Read-only: connect, ``gateway.ready``, ``session.active_list``, close. Every ``hermes dashboard`` serving the
home is asked; an answer is reused for :data:`CACHE_SECONDS` (a scan comes every few seconds at most when
files change). A backend that cannot be asked (gated, refused, silent) answers nothing: the resume path
still asks before it continues, so nothing is ever continued beside an open window on this guess.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from hermes_tray_core import hermes_paths
from hermes_tray_core.vocab import ProcessKind

HERMES_COMMANDS = frozenset({"hermes", "hermes-agent", "hermes-acp"})  # core.hermes_processes.HERMES_COMMANDS

logger = logging.getLogger(__name__)

CACHE_SECONDS = 3.0
ASK_TIMEOUT = 2.0  # connect, ready and the answer, each: a scan never waits long for the app

_cache: dict[tuple[str, int, float | None], tuple[float, frozenset[str]]] = {}
_lock = threading.Lock()


def none_running() -> bool:
    """True when this user surely runs no ``hermes dashboard`` / ``hermes serve`` (Linux: their command lines
    in ``/proc``, a few ms), so a scan need not look at the process table at all: ``status`` stays fast
    (tests/bench/bench_status.py). False when one may run, or elsewhere (the full look decides)."""
    import os

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
        names = [os.path.basename(a.decode("utf-8", "replace")) for a in argv]
        if any(n in HERMES_COMMANDS for n in names) and any(n in (b"dashboard", b"serve") for n in argv):
            return False
    return True


def open_in_backends(home: Path | str, processes: Any) -> dict[str, int]:
    """``{session key: pid of the running Hermes that has it open}`` for ``home``, from every ``hermes
    dashboard`` serving it in ``processes`` (a :class:`~hermes_tray_core.hermes_processes.HermesProcesses`).
    Empty when none serves it or none could be asked."""
    found: dict[str, int] = {}
    for proc in processes.serving(home):
        if proc.kind != ProcessKind.DASHBOARD:
            continue
        for key in _asked(home, proc):
            found.setdefault(key, proc.pid)
    return found


def _asked(home: Path | str, proc: Any) -> frozenset[str]:
    ident = (hermes_paths.canonical(home), int(proc.pid), getattr(proc, "start_time", None))
    now = time.monotonic()
    with _lock:
        hit = _cache.get(ident)
    if hit is not None and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    keys = _ask(proc)
    with _lock:
        if len(_cache) > 64:
            _cache.clear()
        _cache[ident] = (time.monotonic(), keys)
    return keys


def _ask(proc: Any) -> frozenset[str]:
    from hermes_tray_core.backend_endpoint import endpoint_for
    from hermes_tray_core.rpc import GatewayError, RpcSession
    from hermes_tray_core.transport_ws import WebSocketTransport

    try:
        backend = endpoint_for(proc)
        session = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid,
                                                identity=backend.identity, open_timeout=ASK_TIMEOUT))
        session.start()
    except (GatewayError, OSError, ValueError) as exc:
        logger.info("cannot ask Hermes pid %s which sessions are open: %s", proc.pid, exc)
        return frozenset()
    try:
        session.wait_ready(ASK_TIMEOUT)
        listed = session.request("session.active_list", {}, timeout=ASK_TIMEOUT)
    except (GatewayError, TimeoutError) as exc:
        logger.info("Hermes pid %s did not say which sessions are open: %s", proc.pid, exc)
        return frozenset()
    finally:
        try:
            session.shutdown(1.0)
        except Exception:  # closing our own connection: never the backend
            pass
    rows = listed.get("sessions") if isinstance(listed, dict) else None
    return frozenset(str(r["session_key"]) for r in rows or () if isinstance(r, dict)
                     and isinstance(r.get("session_key"), str))


def forget() -> None:
    """Drop every cached answer (tests; a caller that knows the app just changed)."""
    with _lock:
        _cache.clear()


__all__ = ["ASK_TIMEOUT", "CACHE_SECONDS", "forget", "none_running", "open_in_backends"]
