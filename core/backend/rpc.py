"""A JSON-RPC 2.0 client session with a Hermes gateway, over any :class:`Transport`.

Hermes speaks the same newline-delimited JSON-RPC over a stdio child or the running backend's ``/api/ws``:
this is the one copy of the client side; the transports only move lines.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from hermes_tray_core.errors import TrayError
from hermes_tray_core.process.identity import ProcessIdentity

logger = logging.getLogger(__name__)

DEFAULT_RPC_TIMEOUT = 60.0

EOF = object()  # put on ``events`` (once) when the transport ends
RECEIVED = "_received"  # key our reader adds to each parsed frame: time.monotonic() when it was read


class GatewayError(TrayError, RuntimeError):
    """Hermes could not be found, started or spoken to; the message says what to do."""


class HermesNotFound(GatewayError):
    """No Hermes installation to run a continuation with."""


class RpcError(GatewayError):
    """The gateway answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: object, message: str) -> None:
        super().__init__(f"{method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.rpc_message = message

    @property
    def user_message(self) -> str:
        """Hermes' own words (the method and the JSON-RPC code are for the log)."""
        return f"Hermes answered with an error: {self.rpc_message}" if self.rpc_message else super().user_message


class Transport:
    """Moves newline-JSON lines to and from one gateway. ``pid`` / ``identity``: the process that runs the
    turns (a marker the tray keeps names it as writer)."""

    kind = "?"
    pid: int | None = None
    identity: ProcessIdentity | None = None
    log_problem: str | None = None  # why an output log could not be kept (stdio only)
    opened_at = 0.0  # time.monotonic() when open() began

    def open(self) -> None:
        """Spawn / connect. Raises :class:`GatewayError` with a reason a user can act on."""
        raise NotImplementedError

    def lines(self) -> Iterator[bytes]:
        """Incoming lines until the transport ends (read by one reader thread)."""
        raise NotImplementedError

    def write_line(self, data: bytes) -> None:
        """Send one line (``data`` ends with ``\\n``); raises ``OSError``/``GatewayError`` when it cannot."""
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def returncode(self) -> int | None:
        return None

    def close(self, grace: float = 5.0) -> int | None:
        """End the conversation (idempotent). A child is stopped; a running backend is only disconnected."""
        raise NotImplementedError

    def kill(self) -> None:
        """Stop at once: SIGKILL for our own child; for a running backend, only drop the connection."""
        self.close(0.0)

    def ended(self, during: str) -> str:
        """What a user is told when the transport ended ``during`` ("mid-turn", "during start-up")."""
        return f"Hermes exited {during} (exit code {self.returncode()})"


class RpcSession:
    """JSON-RPC over a transport: one reader thread turns lines into responses (matched by id) and
    events (a queue, each event's params with :data:`RECEIVED` added)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.events: queue.Queue[Any] = queue.Queue()
        self.received: dict[str, float] = {}
        self.eof = threading.Event()
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._next_id = 0
        self._reader: threading.Thread | None = None
        self._write_lock = threading.Lock()

    def start(self) -> None:
        self.transport.open()
        self._reader = threading.Thread(target=self._read_loop, name=f"rpc-reader-{self.transport.kind}",
                                        daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return not self.eof.is_set() and self.transport.alive()

    def shutdown(self, grace: float = 5.0) -> int | None:
        code = self.transport.close(grace)
        if self._reader is not None:
            self._reader.join(timeout=2)
        return code

    def _read_loop(self) -> None:
        try:
            for raw in self.transport.lines():
                line = raw.strip()
                if not line:
                    continue
                try:
                    frame = json.loads(line)
                except ValueError:
                    logger.debug("gateway (%s) sent a non-JSON line", self.transport.kind)
                    continue
                if not isinstance(frame, dict):
                    continue
                # arrival time, taken where the frame is read (not when a consumer wakes up)
                received = time.monotonic()
                if frame.get("method") == "event":
                    params = frame["params"] if isinstance(frame.get("params"), dict) else {}
                    params[RECEIVED] = received
                    self.events.put(params)
                    continue
                frame[RECEIVED] = received
                rid = frame.get("id")
                with self._lock:
                    waiter = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if waiter is not None:
                    waiter.put(frame)
        except Exception:  # boundary: the reader thread's top: a transport that breaks mid-read ends like EOF
            logger.debug("gateway (%s) reader stopped", self.transport.kind, exc_info=True)
        finally:
            self.eof.set()
            self.events.put(EOF)
            with self._lock:
                waiters = list(self._pending.values())
                self._pending.clear()
            for w in waiters:
                w.put({"_eof": True})

    def send(self, method: str, params: dict[str, Any]) -> queue.Queue[dict[str, Any]]:
        """Write one request; returns the queue its response will arrive on."""
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            waiter: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
            self._pending[rid] = waiter
        data = (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()
        try:
            if self.eof.is_set():
                raise GatewayError("the gateway connection has ended")
            with self._write_lock:
                self.transport.write_line(data)
        except (OSError, ValueError, GatewayError) as exc:
            with self._lock:
                self._pending.pop(rid, None)
            raise GatewayError(f"Hermes went away before it could take {method}") from exc
        return waiter

    def result_of(self, method: str, waiter: queue.Queue[dict[str, Any]], timeout: float) -> dict[str, Any]:
        """The result of a sent request (``self.received[method]`` = when its answer was read)."""
        try:
            frame = waiter.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"Hermes did not answer {method} within {timeout:.0f}s") from None
        if isinstance(frame.get(RECEIVED), float):
            self.received[method] = frame[RECEIVED]
        if frame.get("_eof"):
            raise GatewayError(f"Hermes went away before answering {method}")
        if "error" in frame:
            err = frame.get("error") or {}
            raise RpcError(method, err.get("code"), str(err.get("message") or "unknown error"))
        result = frame.get("result")
        return result if isinstance(result, dict) else {}

    def request(self, method: str, params: dict[str, Any], timeout: float = DEFAULT_RPC_TIMEOUT) -> dict[str, Any]:
        return self.result_of(method, self.send(method, params), timeout)

    def wait_ready(self, timeout: float) -> float:
        """Block until ``gateway.ready``; returns seconds since open. Other early frames are kept."""
        deadline = time.monotonic() + timeout
        held: list[Any] = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"Hermes did not become ready within {timeout:.0f}s")
                try:
                    ev = self.events.get(timeout=left)
                except queue.Empty:
                    continue
                if ev is EOF:
                    held.append(ev)
                    raise GatewayError(self.transport.ended("during start-up"))
                if ev.get("type") == "gateway.ready":
                    return float(ev.get(RECEIVED) or time.monotonic()) - self.transport.opened_at
                held.append(ev)
        finally:
            for ev in held:
                self.events.put(ev)


__all__ = ["DEFAULT_RPC_TIMEOUT", "EOF", "RECEIVED", "GatewayError", "HermesNotFound", "RpcError", "RpcSession",
           "Transport"]
