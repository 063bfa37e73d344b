"""How to reach a running Hermes backend (``hermes dashboard`` / ``hermes serve``) of this user.

Its loopback port, its session token (its environment, else its host record, else its page) and whether it is
gated (docs/architecture.md, "Where a resume runs"). :class:`BackendUnusable` says why one cannot be used (the
resume falls back); :class:`BackendStarting`, one to wait for. Never a non-loopback address; the token only
ever lives in a :class:`Secret`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hermes_tray_core.backend.rpc import GatewayError, RpcSession
from hermes_tray_core.backend.websocket import (
    OPEN_TIMEOUT,
    BackendStarting,
    BackendUnusable,
    Secret,
    WebSocketTransport,
    loopback_http,
)
from hermes_tray_core.hermes.processes import HermesProcess, is_loopback
from hermes_tray_core.process.identity import ProcessIdentity
from hermes_tray_core.vocab import BackendKind, ProcessKind

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hermes_tray_core.backend.gateway_discovery import GatewayIdentity

DEFAULT_PORT = 9119
#: A backend younger than this that offers no token yet is still starting (it listens a moment before it
#: publishes its host record): waited for, not passed over.
STARTING_AGE = 60.0
TOKEN_ENV = "HERMES_DASHBOARD_SESSION_TOKEN"
PAGE_TIMEOUT = 3.0
PAGE_LIMIT = 4 * 1024 * 1024

_TOKEN_RE = re.compile(r'window\.__HERMES_SESSION_TOKEN__\s*=\s*"([A-Za-z0-9_\-.~]{8,512})"')
_GATED_RE = re.compile(r"window\.__HERMES_AUTH_REQUIRED__\s*=\s*(true|false)")


@dataclass(frozen=True)
class BackendEndpoint:
    """A running backend the tray may connect to; a gateway has ``tickets`` (one per connection), no token."""

    pid: int
    identity: ProcessIdentity
    host: str
    port: int
    python: str | None  # the interpreter it runs (for the capability probe); None = unknown
    token: Secret | None = field(repr=False)
    token_source: str  # "environment" | "host-record" | "page" | "gateway-ticket"
    kind: BackendKind = BackendKind.DASHBOARD
    tickets: Callable[[], Secret] | None = field(default=None, repr=False, compare=False)
    version: str | None = None  # what the gateway said of itself (dashboards: asked of the installation)

    def describe(self) -> str:
        who = "Hermes gateway" if self.kind == BackendKind.GATEWAY else "running Hermes"
        return f"your {who} (pid {self.pid}, port {self.port})"

    def session(self, open_timeout: float = OPEN_TIMEOUT) -> RpcSession:
        return RpcSession(WebSocketTransport(self.host, self.port, self.token, pid=self.pid, identity=self.identity,
                                             open_timeout=open_timeout, tickets=self.tickets))


def connect_backend(backend: BackendEndpoint, *, timeout: float = 10.0) -> RpcSession:
    """A JSON-RPC session with a running backend, ready; opening one changes nothing in the backend."""
    s = backend.session()
    try:
        s.start()
        s.wait_ready(timeout)
    except (GatewayError, TimeoutError):
        s.shutdown(1.0)
        raise
    return s


def gateway_endpoint(gateway: GatewayIdentity, home: Path | str) -> BackendEndpoint:
    """How to reach the gateway that owns ``home``'s sessions, or :class:`BackendUnusable`."""
    from hermes_tray_core.backend.gateway_discovery import session_ticket
    from hermes_tray_core.process.identity import identity_of

    host, port = gateway.loopback_origin()
    if gateway.state != "ready":
        raise BackendStarting(f"{gateway.describe()} is {gateway.state}, not ready yet")
    if gateway.pid is None:
        raise BackendUnusable(f"{gateway.describe()}: the system does not say which process it is")
    identity = identity_of(gateway.pid)
    if identity.start_time is None:
        raise BackendUnusable(f"{gateway.describe()} exited")
    try:
        import psutil

        python = backend_python(psutil.Process(gateway.pid).cmdline())
    except (psutil.Error, OSError):
        python = None
    session_ticket(gateway, home)  # it grants tickets at all (one unused ticket expires on its own in 30 s)
    return BackendEndpoint(gateway.pid, identity, host, port, python, None, "gateway-ticket", BackendKind.GATEWAY,
                           lambda: session_ticket(gateway, home), gateway.version)


def args_endpoint(argv: Sequence[str]) -> tuple[str, int]:
    """``--host``/``--port`` from the backend's arguments, with Hermes' defaults (127.0.0.1:9119)."""
    found = {"--host": "127.0.0.1", "--port": str(DEFAULT_PORT)}
    args = [str(a) for a in argv]
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in found and (eq or i + 1 < len(args)):
            found[name] = value if eq else args[i + 1]
    try:
        return found["--host"], int(found["--port"])
    except ValueError:
        raise BackendUnusable(f"cannot read the backend's --port {found['--port']!r}") from None


def backend_python(argv: Sequence[str]) -> str | None:
    """The interpreter a backend runs, from its argv (``psutil.exe()`` gives a venv's base one)."""
    from hermes_tray_core.backend.install import launcher_python, looks_like_python

    if not argv:
        return None
    first = str(argv[0])
    if looks_like_python(first):
        return first
    return launcher_python(first) if os.path.isabs(first) else None


def read_page(host: str, port: int, *, timeout: float = PAGE_TIMEOUT) -> tuple[Secret | None, bool | None]:
    """GET ``/`` on the loopback backend: its two injected globals, the token and whether it is gated (None:
    the page does not say, no SPA: ``hermes serve``). Never logs the body."""
    status, raw = loopback_http("GET", host, port, "/", {"Accept": "text/html"}, limit=PAGE_LIMIT,
                                timeout=timeout)
    body = raw.decode("utf-8", "replace")
    if status in (401, 403):
        return None, True
    gated_m = _GATED_RE.search(body)
    token_m = _TOKEN_RE.search(body)
    return Secret(token_m.group(1)) if token_m else None, (gated_m.group(1) == "true") if gated_m else None


def endpoint_for(proc: HermesProcess) -> BackendEndpoint:
    """How to reach the backend ``proc``, or :class:`BackendUnusable`."""
    if proc.kind != ProcessKind.DASHBOARD:
        raise BackendUnusable(f"{proc.describe()} is not a Hermes web backend")
    if proc.start_time is None:
        raise BackendUnusable(f"cannot tell which process {proc.describe()} is (no start time)")
    identity = ProcessIdentity(proc.pid, proc.start_time, proc.mark)
    arg_host, arg_port = args_endpoint(proc.argv)
    listening = proc.listening_addresses()
    if listening:
        match = [hp for hp in listening if hp[1] == arg_port]
        host, port = (match or listening)[0]
    else:
        arg_host = "127.0.0.1" if arg_host == "localhost" else arg_host
        if not arg_port and is_loopback(arg_host):  # --port 0: the port is known once it listens
            raise BackendStarting(f"{proc.describe()} is not listening yet")
        if not (arg_port and is_loopback(arg_host)):
            raise BackendUnusable(f"{proc.describe()} has no loopback listening socket (its arguments say "
                                  f"{arg_host}:{arg_port}): not used")
        host, port = arg_host, arg_port
    python = backend_python(proc.argv)
    value = proc.environ_get(TOKEN_ENV)
    token, source = (Secret(value), "environment") if value else (None, "page")
    record_why = ""
    if token is None:
        from hermes_tray_core.backend.host_record import find_host_token

        found, record_why = find_host_token(proc.pid, proc.start_time, proc.environ_get)
        if found is not None:
            token, source, host, port = found.token, "host-record", found.host, found.port
    if token is None:
        token, gated = read_page(host, port)
        if gated:
            raise BackendUnusable(f"your running Hermes ({proc.describe()}) requires sign-in (gated mode) and "
                                  f"publishes no host record the tray can use ({record_why}), so the tray cannot "
                                  "use it")
        if not token:
            why = (f"your running Hermes ({proc.describe()}) offers no session token (none in its environment, its "
                   f"host record — {record_why} — or its page)")
            if time.time() - proc.start_time < STARTING_AGE:  # a 0.22 Hermes writes its host record once it serves
                raise BackendStarting(why)
            raise BackendUnusable(why)
    if not proc.is_alive():
        raise BackendUnusable(f"{proc.describe()} exited")
    return BackendEndpoint(proc.pid, identity, host, port, python, token, source)


__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "BackendEndpoint", "args_endpoint", "backend_python",
           "connect_backend", "endpoint_for", "gateway_endpoint", "read_page"]
