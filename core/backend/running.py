"""Which running Hermes backend a continuation should go to, or why none: the gateway that owns every session
of the home, else the user's own ``hermes dashboard`` / ``hermes serve`` serving it (docs/architecture.md,
"Where a resume runs"). Without one the resume falls back to a spawned gateway, except beside a gateway that
owns the home and cannot be used (:class:`GatewayOwnsHome`: nothing is started).

A backend found is kept while that very process lives: finding one costs ~40 ms, a liveness check ~0.2 ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from hermes_tray_core.backend.endpoint import BackendEndpoint, endpoint_for, gateway_endpoint
from hermes_tray_core.backend.websocket import BackendStarting, BackendUnusable
from hermes_tray_core.hermes.processes import HermesProcesses
from hermes_tray_core.keys import home_path
from hermes_tray_core.vocab import BackendKind, ProcessKind

NO_BACKEND = "no running Hermes backend (hermes dashboard) serves this home"


class GatewayOwnsHome(BackendUnusable):
    """A gateway owns every session of this home and the tray cannot continue through it (no tickets, no loopback
    address, not the user's): a second Hermes runtime must never be started beside it."""


_known: dict[str, BackendEndpoint] = {}
_known_lock = threading.Lock()
# Per backend process (pid, start time): its endpoint, reached once. The process table is walked each time (a
# second backend may have started).
_endpoints: dict[tuple[int, float | None], BackendEndpoint] = {}


def forget(home: Path | str) -> None:
    """Drop the backend remembered for ``home`` (it could not be used)."""
    with _known_lock:
        gone = _known.pop(home_path(home), None)
        if gone is not None:
            _endpoints.pop((gone.pid, gone.identity.start_time), None)


def find_live_backend(home: Path | str, processes: HermesProcesses | None = None
                      ) -> tuple[BackendEndpoint | None, str | None]:
    """``(endpoint, None)`` for the running backend to continue in, else ``(None, why not)``; fresh when given
    ``processes`` (a caller's own snapshot)."""
    key = home_path(home)
    if processes is None:
        with _known_lock:
            known = _known.get(key)
        if known is not None and known.identity.liveness() == "alive":
            return known, None
    usable, why, _starting = _look(home, processes)
    return (usable[0], None) if usable else (None, why)


def wait_for_backends(home: Path | str, *, wait: float, on_waiting: Callable[[], None] | None = None,
                      stop: threading.Event | None = None) -> tuple[list[BackendEndpoint], str | None]:
    """Every running backend serving ``home`` that the tray can reach, and why none. One still starting is
    waited for (``wait`` s; ``on_waiting`` once), never passed over: a second Hermes beside it would take the
    session."""
    deadline = time.monotonic() + wait
    said = False
    while True:
        found, why, starting = _look(home, None)
        if found or not starting:
            return found, why
        if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            who, owns = starting[0]
            late = f"{who} did not become ready within {wait:g} s ({why})" if wait > 0 else why
            if owns:  # never a second runtime beside the gateway that owns the home
                raise GatewayOwnsHome(late or who)
            return [], late
        if not said and on_waiting is not None:
            said = True
            on_waiting()
        time.sleep(0.1)


def _look(home: Path | str, processes: HermesProcesses | None
          ) -> tuple[list[BackendEndpoint], str | None, list[tuple[str, bool]]]:
    """(the usable backends of ``home``, why none, the ones still starting: (who, owns the home)); the first
    is remembered."""
    gateway = _gateway(home)
    if isinstance(gateway, tuple):  # the gateway of the home is starting: nothing else is used meanwhile
        return [], f"{gateway[0]} is not ready yet", [gateway]
    found = [gateway] if gateway is not None else []
    reasons: list[str] = []
    starting: list[tuple[str, bool]] = []
    snap = processes if processes is not None else HermesProcesses.now(kinds=(ProcessKind.DASHBOARD,))
    backends = [p for p in snap.serving(home) if p.kind == ProcessKind.DASHBOARD]
    if not backends and not found:
        return [], NO_BACKEND, []
    for proc in backends:
        with _known_lock:
            cached = _endpoints.get((proc.pid, proc.start_time))
        if cached is not None and cached.identity.liveness() == "alive":
            found.append(cached)
            continue
        try:
            endpoint = endpoint_for(proc)
        except BackendStarting as exc:
            reasons.append(str(exc))
            starting.append((f"your running Hermes (pid {proc.pid})", False))
            continue
        except BackendUnusable as exc:
            reasons.append(str(exc))
            continue
        found.append(endpoint)
        with _known_lock:
            _endpoints[(proc.pid, proc.start_time)] = endpoint
    if found:
        with _known_lock:
            _known[home_path(home)] = found[0]
    return found, "; ".join(reasons) or None, starting


def _gateway(home: Path | str) -> BackendEndpoint | tuple[str, bool] | None:
    """The endpoint of ``home``'s gateway, (who, owns the home) of one still starting, or None; one that
    owns the home and cannot be used raises :class:`GatewayOwnsHome`."""
    from hermes_tray_core.backend.gateway_discovery import find_gateway

    gw, _why = find_gateway(home)
    if gw is None:
        return None
    try:
        return gateway_endpoint(gw, home)
    except BackendStarting:
        return gw.describe(), gw.authority
    except BackendUnusable as exc:
        if gw.authority:
            raise GatewayOwnsHome(f"{gw.describe()} owns this home's sessions and the tray cannot continue "
                                  f"through it ({exc})") from None
        return None


class ServedBy(NamedTuple):
    """Which Hermes serves a home, for ``doctor`` and ``status``: ``kind`` None when none does."""

    kind: BackendKind | None
    pid: int | None = None
    version: str | None = None
    capabilities: tuple[str, ...] = ()
    usable: bool = False
    detail: str = ""  # why it cannot be used
    port: int | None = None
    token_source: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"kind": None if self.kind is None else str(self.kind), "usable": self.usable, "pid": self.pid,
                "port": self.port, "token_source": self.token_source, "version": self.version,
                "capabilities": list(self.capabilities), "reason": None if self.usable else self.detail}

    def line(self) -> str:
        facts = "; ".join([*([f"Hermes {self.version}"] if self.version else []), *self.capabilities])
        facts = f" ({facts})" if facts else ""
        if self.kind == BackendKind.GATEWAY:
            who = f"the gateway that owns its sessions, pid {self.pid}" if self.pid else "the gateway that owns its sessions"
            if self.usable:
                return f"{who}{facts}: resumes continue there, with single-use tickets"
            return f"{who}{facts}: {self.detail}"
        if self.kind == BackendKind.DASHBOARD and self.usable:
            return (f"hermes dashboard{facts} — running Hermes: pid {self.pid} on 127.0.0.1:{self.port} (session token "
                    f"from its {self.token_source}): resumes continue there")
        if self.kind == BackendKind.DASHBOARD:
            return f"hermes dashboard — running Hermes: not used ({self.detail}); resumes start a separate Hermes process"
        return "none — resumes start a separate Hermes process" + (f" ({self.detail})" if self.detail else "")


def who_serves(home: Path | str, processes: HermesProcesses | None = None, *, versions: bool = True) -> ServedBy:
    """Which Hermes serves ``home`` and where a resume would go; never raises. ``versions``: ask a dashboard's
    installation (a short Python run, cached)."""
    from hermes_tray_core.backend.gateway_discovery import find_gateway
    from hermes_tray_core.process.identity import process_errors

    gw, _why = find_gateway(home)
    if gw is not None:
        try:
            endpoint = gateway_endpoint(gw, home)
        except BackendUnusable as exc:
            detail = (f"resumes are refused, and no other Hermes is started beside it: it gives the tray no way in "
                      f"({exc})" if gw.authority else f"not used ({exc})")
            return ServedBy(BackendKind.GATEWAY, gw.pid, gw.version, gw.capabilities, False, detail)
        return ServedBy(BackendKind.GATEWAY, gw.pid, gw.version, gw.capabilities, True, port=endpoint.port,
                        token_source=endpoint.token_source)
    from hermes_tray_core.backend.sessions import none_running

    cannot: tuple[type[Exception], ...] = (BackendUnusable, *process_errors())
    try:
        backend, why = (None, NO_BACKEND) if processes is None and none_running() else find_live_backend(home, processes)
    except cannot as exc:
        return ServedBy(None, detail=f"cannot look for a running Hermes: {exc}")
    if backend is None:
        if why and why != NO_BACKEND:  # a dashboard runs, and cannot be used
            return ServedBy(BackendKind.DASHBOARD, detail=why)
        return ServedBy(None, detail=why or "")
    version: str | None = None
    caps: tuple[str, ...] = ()
    if versions:
        from hermes_tray_core.backend.capabilities import backend_capabilities

        found = backend_capabilities(home, backend)
        version = found.version
        caps = ("continues interrupted turns itself",) if found.auto_continue else (
            ("the tray submits the continuation note",) if found.auto_continue is False else ())
    return ServedBy(BackendKind.DASHBOARD, backend.pid, version, caps, True, port=backend.port,
                    token_source=backend.token_source)


__all__ = ["NO_BACKEND", "GatewayOwnsHome", "ServedBy", "find_live_backend", "forget", "wait_for_backends",
           "who_serves"]
