"""The WebSocket transport: the running Hermes backend's ``/api/ws`` (``hermes dashboard`` / ``serve``).

Loopback only: the address is checked here again, whatever the caller found. Credentials, in this order: a
ticket from ``tickets`` (a gateway), else one the dashboard mints for the token, else the token in the query
string (0.19.0, 0.22.2.post1); none is ever logged, put in a message or stored. Closing never stops the
backend: it is the user's. A 401/403 on the upgrade raises :class:`BackendRefused` ("fall back").
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from hermes_tray_core.backend.rpc import GatewayError, Transport
from hermes_tray_core.hermes.processes import is_loopback
from hermes_tray_core.process.identity import ProcessIdentity, identity_of
from hermes_tray_core.vocab import WriterState

if TYPE_CHECKING:  # websockets is imported when a connection opens, not with this module
    from websockets.sync.client import ClientConnection

logger = logging.getLogger(__name__)

# websockets logs "> GET /api/ws?token=…" at debug level: hand it a logger that never emits.
_SILENT = logging.getLogger("hermes_tray_core.backend.websocket.silenced")
_SILENT.disabled = True
_SILENT.propagate = False

WS_PATH = "/api/ws"
EXIT_GRACE = 1.0  # s: how long a backend that dropped the connection may take to leave the process table
OPEN_TIMEOUT = 5.0
MAX_FRAME = 64 * 1024 * 1024  # a session.resume answer carries the whole transcript


class BackendUnusable(GatewayError):
    """This running backend cannot be used for a continuation (the message says why): fall back."""


class BackendStarting(BackendUnusable):
    """This running backend is still starting (no answer on its port yet): waited for, never passed."""


class BackendRefused(BackendUnusable):
    """The backend refused the WebSocket upgrade (HTTP 401/403: gated mode, token or Origin)."""


class Secret:
    """A token that prints as ``<secret>``: it can pass through a repr, a log or an exception safely."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


def netloc(host: str, port: int) -> str:
    h = host.strip("[]")
    return f"[{h}]:{port}" if ":" in h else f"{h}:{port}"


def loopback_http(method: str, host: str, port: int, path: str, headers: dict[str, str], *, limit: int,
                  timeout: float) -> tuple[int, bytes]:
    """One request to a loopback HTTP server of this user's Hermes: (status, up to ``limit`` bytes of body);
    :class:`BackendStarting` when nothing listens yet, else :class:`BackendUnusable` (no body echoed)."""
    import http.client

    if not is_loopback(host):
        raise BackendUnusable(f"the backend listens on {host}, not a loopback address: not used")
    where = netloc(host, port)
    conn = http.client.HTTPConnection(host.strip("[]"), port, timeout=timeout)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None, headers={"Host": where, **headers})
        resp = conn.getresponse()
        return resp.status, resp.read(limit)
    except ConnectionRefusedError:  # its process runs but does not listen yet: it is starting
        raise BackendStarting(f"your running Hermes does not answer on {where} yet") from None
    except (OSError, http.client.HTTPException) as exc:
        raise BackendUnusable(f"cannot read {path} of the running Hermes on {where}",
                              detail=f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()


def loopback_json(method: str, host: str, port: int, path: str, headers: dict[str, str], *, limit: int,
                  timeout: float) -> Any:
    """The JSON answer (HTTP 200) of :func:`loopback_http`, or None: never raises."""
    try:
        status, body = loopback_http(method, host, port, path, {"Accept": "application/json", **headers},
                                     limit=limit, timeout=timeout)
        return json.loads(body.decode("utf-8", "replace")) if status == 200 else None
    except (BackendUnusable, ValueError):
        return None


class WebSocketTransport(Transport):
    """One connection to a running backend's ``/api/ws``."""

    kind = "websocket"

    def __init__(self, host: str, port: int, token: Secret | None, *, pid: int | None = None,
                 identity: ProcessIdentity | None = None, open_timeout: float = OPEN_TIMEOUT,
                 tickets: Callable[[], Secret] | None = None) -> None:
        if not is_loopback(host):
            raise BackendUnusable(f"the backend listens on {host}, not a loopback address: not used")
        if not 0 < int(port) < 65536:
            raise BackendUnusable(f"invalid backend port {port!r}")
        self.host = host.strip("[]")
        self.port = int(port)
        self.token = token
        self.pid = pid
        self.identity = identity if identity is not None else (identity_of(pid) if pid else None)
        self.open_timeout = open_timeout
        self.ticket_source = tickets
        self._ws: ClientConnection | None = None
        self._closed = False

    def open(self) -> None:
        from websockets.exceptions import InvalidHandshake, InvalidStatus
        from websockets.sync.client import connect
        from websockets.typing import Origin, Subprotocol

        from hermes_tray_core.backend import tickets

        ticket = self.ticket_source() if self.ticket_source is not None else (
            tickets.mint_dashboard_ticket(self.host, self.port, self.token) if self.token else None)
        offered = tickets.subprotocols(ticket) if ticket else None
        query = urllib.parse.urlencode({"token": self.token.reveal()}) if self.token and not offered else ""
        where = netloc(self.host, self.port)
        uri = f"ws://{where}{WS_PATH}" + (f"?{query}" if query else "")
        self.opened_at = time.monotonic()
        try:
            # Our own socket to the loopback address: websockets never resolves or picks an address itself.
            sock = socket.create_connection((self.host, self.port), timeout=self.open_timeout)
            try:
                ws = connect(uri, sock=sock, origin=Origin(f"http://{where}"), open_timeout=self.open_timeout,
                             close_timeout=2, max_size=MAX_FRAME, compression=None, logger=_SILENT,
                             subprotocols=[Subprotocol(p) for p in offered] if offered else None)
                ws = ws.__enter__()  # the context-manager form (websockets ≥ 17 warns on the bare one)
            except BaseException:
                with contextlib.suppress(OSError):
                    sock.close()
                raise
        except InvalidStatus as exc:
            code = exc.response.status_code
            if code in (401, 403):
                raise BackendRefused(f"the running Hermes refused the connection (HTTP {code}: it requires "
                                     "sign-in, or the session token or origin was not accepted)") from None
            raise BackendUnusable(f"the running Hermes answered the connection with HTTP {code}") from None
        except TimeoutError:
            raise BackendUnusable(f"the running Hermes did not accept a connection within "
                                  f"{self.open_timeout:g}s") from None
        except (OSError, InvalidHandshake, ValueError) as exc:
            # Never chain or repeat the exception text: it could carry the URI (and so the token).
            raise BackendUnusable(f"cannot connect to the running Hermes on {where} "
                                  f"({type(exc).__name__})") from None
        if offered and ws.subprotocol != tickets.PROTOCOL:  # the ticket was not taken as Hermes' gateway protocol
            ws.close()
            raise BackendUnusable("the running Hermes did not confirm its gateway protocol (hermes-gateway-v1)")
        peer = ws.remote_address[0] if ws.remote_address else ""
        if not is_loopback(str(peer)):  # a redirect elsewhere: never talk to a non-loopback peer
            ws.close()
            raise BackendUnusable(f"the connection ended up at {peer or 'an unknown peer'}, not loopback: not used")
        self._ws = ws

    def lines(self) -> Iterator[bytes]:
        from websockets.exceptions import ConnectionClosed

        ws = self._ws
        assert ws is not None
        try:
            for message in ws:
                data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
                # One frame per message on 0.19.0; split anyway (the protocol is newline-delimited).
                yield from data.split(b"\n")
        except (ConnectionClosed, OSError):
            return

    def write_line(self, data: bytes) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None or self._closed:
            raise GatewayError("not connected to the running Hermes")
        try:
            self._ws.send(data.decode("utf-8"))
        except ConnectionClosed as exc:
            raise OSError("connection closed") from exc

    def alive(self) -> bool:
        if self._ws is None or self._closed:
            return False
        from websockets.protocol import State

        if self._ws.protocol.state is not State.OPEN:
            return False
        return self.identity is None or self.identity.liveness() != WriterState.DEAD

    def close(self, grace: float = 5.0) -> int | None:
        """Disconnect (the backend keeps running: it is the user's). Idempotent; no exit code."""
        self._closed = True
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # boundary: closing our own connection never fails the caller
                logger.debug("closing the backend connection failed", exc_info=True)
        return None

    def ended(self, during: str) -> str:
        # a killed backend's sockets close a moment before it leaves the process table: "exited", not "closed"
        gone = False
        if self.identity is not None:
            deadline = time.monotonic() + EXIT_GRACE
            state = self.identity.liveness()
            while state == WriterState.ALIVE and time.monotonic() < deadline:
                time.sleep(0.02)
                state = self.identity.liveness()
            gone = state == WriterState.DEAD
        who = f"your running Hermes (pid {self.pid})" if self.pid else "your running Hermes"
        return f"{who} {'exited' if gone else 'closed the connection'} {during}"


__all__ = ["MAX_FRAME", "OPEN_TIMEOUT", "WS_PATH", "BackendRefused", "BackendUnusable", "Secret",
           "WebSocketTransport", "is_loopback", "loopback_http", "loopback_json", "netloc"]
