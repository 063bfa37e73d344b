"""A stand-in for the Hermes gateway that owns every session (upstream v0.23.x), written from upstream's contract
as its tests state it, for the tray's tests. A real process; run it with a simulated Hermes' interpreter (so the
tray's capability probe of that process finds Hermes' marker module) through :func:`running_gateway`.

What it takes from upstream (NousResearch/hermes-agent):

* ``gateway/control_socket.py`` @ 00067189dfecf833d4d009c2dd977ae85cf800e0: a control socket
  ``$HERMES_HOME/gateway.sock`` bound under umask 0177 and chmod 0600 (or a socket elsewhere named by
  ``gateway.sock.path``), one JSON line in and one out per connection, answers ``{"ok", "protocol": 1, "id",
  "result"}`` or ``{"ok": false, "error"}`` for an unknown verb;
* ``tests/gateway/...`` normal-entrypoint readiness test (stored copy, found by its text
  ``test_normal_entrypoint_earns_authenticated_authority_readiness``): ``identify`` answers ``state: "ready"``,
  ``authority_epoch > 0``, ``served_profiles == [{profile_id: str(home), home: str(home)}]``,
  ``"session-authority-v1" in capabilities``, ``api_origin``; ``/api/ws`` refuses a connection without a ticket;
  ``session-ticket`` with ``{profile_id, instance_id, purpose: "interactive"}`` grants a ``ticket``; the client
  offers ``hermes-gateway-v1`` and ``hermes-gateway-ticket.<ticket>`` and sees ``hermes-gateway-v1`` echoed;
  ``session.resume`` of an unknown id answers the error ``not_found``; the same ticket a second time is refused;
* ``hermes_cli/gateway_client.py`` @ 25e44a5cb89cb1420ccdcb7000544a2eee817c60: the grant names the same
  ``profile_id``, ``instance_id`` and ``runtime_protocol`` 1; a served profile's ticket is minted by the
  multiplexer's (root's) socket;
* ``tests/hermes_cli/test_gateway_runtime_discovery.py`` @ 6ec419058ae4f0df42a8bed906e55b97587eda9d: the pointer
  file names ``<tmp>/hermes-gw-<hash>/control.sock`` in a private folder.

Events and sessions behind ``/api/ws`` are the simulated dashboard's (:mod:`tests.support.sim_dashboard`, a
Hermes that continues interrupted turns itself), one per served home. Knobs (arguments): ``--no-tickets`` (the
gateway grants none: ``session-ticket`` is an unknown verb), ``--not-authority`` (no ``session-authority-v1``),
``--pointer`` (the socket lives in a temp folder), ``--serve-profile NAME`` (also serves ``profiles/NAME`` of the
home, as the multiplexer does, without a socket of that profile's own).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROTOCOL = "hermes-gateway-v1"
TICKET_PREFIX = "hermes-gateway-ticket."
TICKET_TTL = 30.0
VERSION = "0.23.6"


def _home_hash(home: Path) -> str:
    import hashlib

    resolved = str(Path(home).expanduser().resolve(strict=False))
    return hashlib.sha256(os.path.normcase(resolved).encode("utf-8")).hexdigest()[:16]


class Standin:
    def __init__(self, home: Path, profiles: list[str], *, tickets: bool, authority: bool) -> None:
        from hermes_tray.demo.sim_backend import AUTO
        from tests.support.sim_dashboard import SimDashboard

        class Sessions(SimDashboard):
            def m_session_resume(self, params: dict[str, Any]) -> tuple[dict, Any]:
                from hermes_tray.demo import sim_state
                from hermes_tray.demo.sim_backend import _RpcError

                if not sim_state.session_exists(self.home, str(params.get("session_id") or "")):
                    raise _RpcError(4007, "not_found")
                return super().m_session_resume(params)

        self.home = home
        self.homes = [home, *(home / "profiles" / p for p in profiles)]
        self.sessions = {str(h): Sessions(h, AUTO) for h in self.homes}
        self.tickets_on, self.authority = tickets, authority
        self.instance_id = uuid.uuid4().hex
        self.epoch = int(time.time())
        self.tickets: dict[str, tuple[str, float]] = {}
        self.lock = threading.Lock()
        self.port = 0
        self.bound: dict[int, str] = {}

    # the control socket

    def identify(self) -> dict[str, Any]:
        return {"runtime_protocol": 1, "state": "ready", "instance_id": self.instance_id,
                "authority_epoch": self.epoch, "pid": os.getpid(), "version": VERSION,
                "served_profiles": [{"profile_id": str(h), "home": str(h)} for h in self.homes],
                "capabilities": ["session-authority-v1"] if self.authority else [],
                "api_origin": f"http://127.0.0.1:{self.port}", "supervisor": "manual"}

    def grant(self, params: dict[str, Any]) -> dict[str, Any]:
        profile, instance = params.get("profile_id"), params.get("instance_id")
        if instance != self.instance_id or profile not in {str(h) for h in self.homes} \
                or params.get("purpose") != "interactive":
            raise ValueError("binding_mismatch")
        ticket = secrets.token_urlsafe(24)
        with self.lock:
            self.tickets[ticket] = (str(profile), time.monotonic() + TICKET_TTL)
        return {"ticket": ticket, "profile_id": profile, "instance_id": self.instance_id, "runtime_protocol": 1}

    def answer(self, line: bytes) -> bytes:
        rid: Any = None
        try:
            req = json.loads(line.decode("utf-8"))
            rid, verb = req.get("id"), req.get("verb")
            verbs = {"identify": lambda _p: self.identify()}
            if self.tickets_on:
                verbs["session-ticket"] = self.grant
            if verb not in verbs:
                out: dict[str, Any] = {"ok": False, "error": f"unknown verb: {verb!r}", "protocol": 1,
                                       "supported_verbs": sorted(verbs)}
            else:
                params = req.get("params") if isinstance(req.get("params"), dict) else {}
                out = {"ok": True, "protocol": 1, "result": verbs[verb](params)}
        except Exception as exc:  # boundary: the stand-in answers every request, as upstream's never raises
            out = {"ok": False, "error": str(exc), "protocol": 1}
        if rid is not None:
            out["id"] = rid
        return json.dumps(out).encode("utf-8") + b"\n"

    def serve_control(self, path: Path) -> None:
        standin = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(64 * 1024)
                if line:
                    self.wfile.write(standin.answer(line.rstrip(b"\n")))

        old = os.umask(0o177)
        try:
            server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()

    # /api/ws

    def take_ticket(self, offered: list[str]) -> str | None:
        """The profile a valid, unused ticket binds, consuming it; None when the offer is not exactly upstream's."""
        tickets = [p for p in offered if p.startswith(TICKET_PREFIX)]
        if PROTOCOL not in offered or len(tickets) != 1:
            return None
        with self.lock:
            bound = self.tickets.pop(tickets[0][len(TICKET_PREFIX):], None)
        if bound is None or bound[1] < time.monotonic():
            return None
        return bound[0]

    def serve_ws(self) -> None:
        from websockets.datastructures import Headers
        from websockets.http11 import Response
        from websockets.sync.server import serve

        def refuse(status: int) -> Response:
            return Response(status, "Unauthorized", Headers([("Content-Length", "0")]), b"")

        def process_request(connection: Any, request: Any) -> Response | None:
            if request.path.split("?", 1)[0] != "/api/ws":
                return refuse(404)
            raw = request.headers.get("Sec-WebSocket-Protocol") or ""
            profile = self.take_ticket([p.strip() for p in raw.split(",") if p.strip()])
            if profile is None:  # no ticket, a used one, ?token=: refused before the upgrade
                return refuse(401)
            self.bound[id(connection)] = profile
            return None

        def select(_connection: Any, offered: Any) -> Any:
            return PROTOCOL if PROTOCOL in offered else None  # the ticket is never echoed

        def handler(connection: Any) -> None:
            profile = self.bound.pop(id(connection), str(self.home))
            self.sessions[profile].handle_connection(connection)

        with serve(handler, "127.0.0.1", 0, process_request=process_request, select_subprotocol=select,
                   compression=None, max_size=None) as server:
            self.port = server.socket.getsockname()[1]
            self.ready.set()
            server.serve_forever()

    def run(self, pointer: bool) -> None:
        self.ready = threading.Event()
        threading.Thread(target=self.serve_ws, daemon=True).start()
        self.ready.wait(10)
        if pointer or len(str(self.home / "gateway.sock").encode()) > 100:  # upstream's sun_path margin
            folder = Path(tempfile.mkdtemp(prefix="standin-")) / f"hermes-gw-{_home_hash(self.home)}"
            folder.mkdir(mode=0o700)
            target = folder / "control.sock"
            self.serve_control(target)
            fd = os.open(self.home / "gateway.sock.path", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(str(target))
        else:
            self.serve_control(self.home / "gateway.sock")
        print(f"GATEWAY_STANDIN_READY port={self.port}", flush=True)
        threading.Event().wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--no-tickets", action="store_true")
    ap.add_argument("--not-authority", action="store_true")
    ap.add_argument("--pointer", action="store_true")
    ap.add_argument("--serve-profile", action="append", default=[])
    args = ap.parse_args(argv)
    Standin(Path(args.home), args.serve_profile, tickets=not args.no_tickets,
            authority=not args.not_authority).run(args.pointer)
    return 0


@contextlib.contextmanager
def running_gateway(sim_root: Path | str, home: Path | str, *args: str,
                    timeout: float = 30.0) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The stand-in for ``home`` run by the simulated Hermes at ``sim_root``; yields (process, port); SIGKILLed at
    the end, its socket files removed."""
    root = Path(sim_root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_TRAY_")}
    env["HERMES_HOME"] = str(home)
    proc = subprocess.Popen([str(python), __file__, "--home", str(home), *args],  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        deadline, port = time.monotonic() + timeout, 0
        while time.monotonic() < deadline and not port:
            line = proc.stdout.readline().decode("utf-8", "replace")
            if not line:
                raise RuntimeError("the gateway stand-in exited during start-up")
            if line.startswith("GATEWAY_STANDIN_READY port="):
                port = int(line.strip().split("=", 1)[1])
        if not port:
            raise RuntimeError("the gateway stand-in did not become ready")
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        for name in ("gateway.sock", "gateway.sock.path"):
            with contextlib.suppress(OSError):
                (Path(home) / name).unlink()


if __name__ == "__main__":
    sys.exit(main())
