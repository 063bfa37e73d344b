"""The gateway that owns every session (upstream Hermes v0.23.x), through the stand-in in
``tests/support/gateway_standin.py`` (a real process; its docstring names the upstream files and commits each
behaviour comes from): seeing it, continuing a turn through it exactly once with single-use tickets, following it
to its end or a Stop, and refusing — never starting a second Hermes beside it — when it grants no tickets."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from hermes_tray_core.backend import tickets
from hermes_tray_core.backend.control_channel import (
    ControlUnavailable,
    UnixControlChannel,
    WindowsPipeChannel,
    home_hash,
    pipe_name,
)
from hermes_tray_core.backend.gateway_discovery import find_gateway, identify, session_ticket
from hermes_tray_core.backend.rpc import RpcError, RpcSession
from hermes_tray_core.backend.running import find_live_backend
from hermes_tray_core.backend.websocket import BackendRefused, BackendUnusable, WebSocketTransport
from hermes_tray_core.continuing import gateway
from hermes_tray_core.continuing.resume import resume_turn
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import BackendKind, Outcome, RanIn, Refusal
from tests.support.gateway_standin import running_gateway
from tests.support.sim_homes import make_home, plant_marker, read_turns

PROMPT = "Rename the billing module and fix its imports."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3, progress_interval=0.1)


def journal(key: str) -> list[dict]:
    from hermes_tray_core.stores.ledger import ledger

    return [e for e in reversed(ledger().history(500)) if e.get("session_key") == key]


# ── seeing it ───────────────────────────────────────────────────────────────────────────────────


def test_the_gateway_is_seen_through_its_control_socket_with_what_it_says_of_itself(sim_roots, tmp_path):
    """Upstream gateway/control_socket.py @ 00067189dfecf833d4d009c2dd977ae85cf800e0 (socket 0600, one line each
    way) and its readiness test (``identify``: ready, instance_id, served_profiles, session-authority-v1)."""
    home, _key = make_home(tmp_path / "h")
    assert find_gateway(home) == (None, f"no gateway control socket in {home}")
    with running_gateway(sim_roots["auto-continue"], home) as (proc, port):
        gw, why = find_gateway(home)
        assert gw is not None, why
        assert gw.pid == proc.pid and gw.authority and gw.state == "ready" and gw.version == "0.23.6"
        assert gw.api_origin == f"http://127.0.0.1:{port}" and gw.instance_id
        assert gw.profile_for(home) is not None
        assert (home / "gateway.sock").stat().st_mode & 0o777 == 0o600


def test_a_profile_served_by_the_roots_gateway_is_found_there(sim_roots, tmp_path):
    """Upstream hermes_cli/gateway_client.py @ 25e44a5cb89cb1420ccdcb7000544a2eee817c60: a served profile has no
    socket of its own; the multiplexer (the root's gateway) lists it and mints its tickets."""
    root, _ = make_home(tmp_path / "r")
    profile, _ = make_home(root / "profiles" / "work")
    with running_gateway(sim_roots["auto-continue"], root, "--serve-profile", "work") as (proc, _port):
        gw, why = find_gateway(profile)
        assert gw is not None and gw.pid == proc.pid and gw.control_home == root, why
        assert session_ticket(gw, profile)  # minted by the root's socket, bound to the profile
    other, _ = make_home(root / "profiles" / "other")
    with running_gateway(sim_roots["auto-continue"], root) as _:
        assert find_gateway(other)[0] is None


def test_the_pointer_file_socket_is_used_only_in_its_private_folder(sim_roots, tmp_path):
    """Upstream tests/hermes_cli/test_gateway_runtime_discovery.py @ 6ec419058ae4f0df42a8bed906e55b97587eda9d:
    ``gateway.sock.path`` names ``hermes-gw-<hash>/control.sock``; another folder, or one others can enter, is
    refused."""
    home, _ = make_home(tmp_path / "h")
    with running_gateway(sim_roots["auto-continue"], home, "--pointer") as (proc, _port):
        target = Path((home / "gateway.sock.path").read_text())
        assert target.parent.name == f"hermes-gw-{home_hash(home)}"
        assert identify(home).pid == proc.pid
        target.parent.chmod(0o755)
        with pytest.raises(ControlUnavailable, match="can be used by others"):
            identify(home)
        target.parent.chmod(0o700)
        (home / "gateway.sock.path").write_text(str(target.parent.with_name("hermes-gw-wrong") / "control.sock"))
        with pytest.raises(ControlUnavailable, match="does not name this home's control socket"):
            identify(home)


def test_a_socket_others_can_use_is_not_spoken_to(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    served: list[bytes] = []
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(home / "gateway.sock"))
        server.listen(1)
        server.settimeout(0.5)
        (home / "gateway.sock").chmod(0o666)

        def accept() -> None:
            try:
                peer, _ = server.accept()
                served.append(peer.recv(100))
                peer.close()
            except OSError:
                pass

        t = threading.Thread(target=accept)
        t.start()
        with pytest.raises(ControlUnavailable, match="can be used by others"):
            identify(home)
        t.join()
    assert served == []  # never connected: nothing was sent to it


def test_the_windows_pipe_is_named_as_upstream_names_it_and_spoken_to_one_line_each_way(tmp_path):
    """Upstream gateway/control_socket.py @ 00067189dfecf833d4d009c2dd977ae85cf800e0: ``windows_pipe_name`` is
    ``\\\\.\\pipe\\hermes-gateway-`` + sha256(normcase(resolved home))[:16]; a busy pipe is retried until the
    deadline. The pipe itself is Windows'; here a socket pair stands in for the opened pipe."""
    import hashlib
    import os

    home = tmp_path / "Home"
    want = hashlib.sha256(os.path.normcase(str(home.resolve())).encode()).hexdigest()[:16]
    assert pipe_name(home) == rf"\\.\pipe\hermes-gateway-{want}"
    ours, theirs = socket.socketpair()
    opened, busy = [], [2]

    def opener(name: str):
        opened.append(name)
        if busy[0]:
            busy[0] -= 1
            raise OSError(231, "All pipe instances are busy")
        return ours.makefile("rwb", buffering=0)

    def gateway_side() -> None:
        request = theirs.makefile("rb").readline()
        theirs.sendall(json.dumps({"ok": True, "protocol": 1, "id": 1, "result": {"seen": json.loads(request)}}
                                  ).encode() + b"\n")

    t = threading.Thread(target=gateway_side)
    t.start()
    channel = WindowsPipeChannel(home, opener=opener, server_pid=lambda _h: 4242)
    line, pid = channel.exchange(b'{"protocol":1,"id":1,"verb":"identify"}\n', 2.0)
    t.join()
    assert json.loads(line)["result"]["seen"]["verb"] == "identify" and pid == 4242
    assert opened == [pipe_name(home)] * 3  # twice busy, then open
    gone = WindowsPipeChannel(home, opener=lambda _n: (_ for _ in ()).throw(FileNotFoundError()))
    with pytest.raises(ControlUnavailable, match="no gateway pipe"):
        gone.exchange(b"{}\n", 0.5)
    ours.close()
    theirs.close()


def test_unix_channel_says_when_nothing_is_published(tmp_path):
    assert not UnixControlChannel(tmp_path).published()


# ── tickets ─────────────────────────────────────────────────────────────────────────────────────


def test_tickets_are_single_use_and_ride_in_the_subprotocols(sim_roots, tmp_path):
    """The readiness test's handshake (upstream, stored copy): no ticket → refused before the upgrade; a granted
    ticket with ``hermes-gateway-v1`` → accepted and ``hermes-gateway-v1`` echoed; ``session.resume`` of an
    unknown id → ``not_found``; the same ticket again → refused."""
    home, _ = make_home(tmp_path / "h")
    with running_gateway(sim_roots["auto-continue"], home) as (proc, port):
        gw, _ = find_gateway(home)
        assert gw is not None
        with pytest.raises(BackendRefused, match="HTTP 401"):
            WebSocketTransport("127.0.0.1", port, None, pid=proc.pid).open()
        ticket = session_ticket(gw, home)
        s = RpcSession(WebSocketTransport("127.0.0.1", port, None, pid=proc.pid, tickets=lambda: ticket))
        s.start()
        try:
            s.wait_ready(5)
            with pytest.raises(RpcError, match="not_found"):
                s.request("session.resume", {"session_id": "not-registered"}, 5)
        finally:
            s.shutdown()
        with pytest.raises(BackendRefused):
            WebSocketTransport("127.0.0.1", port, None, pid=proc.pid, tickets=lambda: ticket).open()


def test_a_server_that_does_not_echo_the_gateway_protocol_is_not_used():
    from websockets.sync.server import serve

    seen: list[str] = []

    def process_request(_connection, request):
        seen.append(request.headers.get("Sec-WebSocket-Protocol") or "")

    with serve(lambda c: c.close(), "127.0.0.1", 0, process_request=process_request,
               select_subprotocol=lambda _c, _offered: None) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        t = WebSocketTransport("127.0.0.1", port, None, tickets=lambda: tickets.Secret("one-use"))
        with pytest.raises(BackendUnusable, match="did not confirm its gateway protocol"):
            t.open()
        server.shutdown()
    assert seen == ["hermes-gateway-v1, hermes-gateway-ticket.one-use"]


# ── continuing through it ───────────────────────────────────────────────────────────────────────


def test_a_turn_is_continued_through_the_gateway_exactly_once(sim_roots, sims, tmp_path):
    home, key = make_home(tmp_path / "h", turn_seconds=0.3)
    entry = plant_marker(home, key, PROMPT)
    with running_gateway(sim_roots["auto-continue"], home) as (proc, _port):
        backend, why = find_live_backend(home)
        assert backend is not None and backend.kind == BackendKind.GATEWAY, why
        assert backend.token is None and backend.pid == proc.pid
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test")
        assert res.outcome == Outcome.COMPLETED, res.message
        again = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test")
        assert proc.poll() is None
    c = res.continuation
    assert c is not None and c.ran_in == RanIn.RUNNING_BACKEND and c.backend_pid == proc.pid and not c.gateway_pid
    assert c.continued_by == "backend"  # the gateway continued it itself: no note from the tray
    assert [t["pid"] for t in read_turns(home)] == [proc.pid]  # one turn, inside the gateway's process
    assert again.outcome == Outcome.REFUSED and again.code == Refusal.GONE
    assert key not in list_turn_markers(home)
    assert [e["event"] for e in journal(key)][:3] == ["approved", "dispatched", "completed"]


def test_without_tickets_the_resume_is_refused_in_one_line_and_nothing_starts_beside_it(sim_roots, sims, tmp_path):
    home, key = make_home(tmp_path / "h", turn_seconds=0.3)
    entry = plant_marker(home, key, PROMPT)
    with running_gateway(sim_roots["auto-continue"], home, "--no-tickets") as (proc, _port):
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test")
        fast = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test",
                           prefer_running_backend=False)  # even when told not to use a running Hermes
    for r in (res, fast):
        assert r.outcome == Outcome.REFUSED and r.code == Refusal.GATEWAY_OWNS, r.message
        assert "\n" not in r.message and r.message.endswith("Continue it in Hermes.")
        assert f"your Hermes gateway (pid {proc.pid}" in r.message and "owns this home's sessions" in r.message
        assert r.continuation is None
    assert read_turns(home) == []  # no turn ran: not in the gateway, not in a spawned Hermes
    assert list_turn_markers(home)[key] == entry
    assert journal(key)[-1]["event"] == "refused"


def test_a_gateway_that_owns_nothing_is_passed_over(sim_roots, sims, tmp_path):
    home, key = make_home(tmp_path / "h", turn_seconds=0.2)
    entry = plant_marker(home, key, PROMPT)
    with running_gateway(sim_roots["auto-continue"], home, "--no-tickets", "--not-authority"):
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test")
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.continuation is not None and res.continuation.ran_in == RanIn.SEPARATE_PROCESS


def test_stop_ends_the_continuation_in_the_gateway(sim_roots, sims, tmp_path):
    home, key = make_home(tmp_path / "h", turn_seconds=30)
    entry = plant_marker(home, key, PROMPT)
    stop = threading.Event()
    with running_gateway(sim_roots["auto-continue"], home) as (proc, _port):
        listener = gateway.Callbacks(on_dispatched=lambda _r: threading.Timer(0.5, stop.set).start())
        t0 = time.monotonic()
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST, via="test",
                          listener=listener, stop=stop)
        took = time.monotonic() - t0
        assert proc.poll() is None
    assert res.outcome == Outcome.INTERRUPTED, res.message
    assert res.continuation is not None and res.continuation.stopped_by == "you"
    assert took < 20
    assert [t["pid"] for t in read_turns(home)] == [proc.pid]
    assert journal(key)[-1]["event"] == "interrupted"


# ── doctor and status say which Hermes serves the home ─────────────────────────────────────────


def _cli(*args: str) -> str:
    import subprocess

    from tests.support.product import product_env, tray_argv

    return subprocess.run(tray_argv(*args), env=product_env(), capture_output=True, text=True, timeout=120).stdout


@pytest.mark.parametrize("tickets_on", [True, False], ids=["tickets", "no-tickets"])
def test_doctor_and_status_say_the_gateway_serves_the_home(sim_roots, tmp_path, tickets_on):
    home, _ = make_home(tmp_path / "h")
    text = _cli("status", "--home", str(home))
    assert "served by" not in text  # nothing serves it: nothing said per home
    none = json.loads(_cli("doctor", "--json", "--no-probe", "--home", str(home)))["homes"][0]["running_backend"]
    assert none["kind"] is None and none["line"].startswith("none — resumes start a separate Hermes process")
    args = () if tickets_on else ("--no-tickets",)
    with running_gateway(sim_roots["auto-continue"], home, *args) as (proc, _port):
        doctor = _cli("doctor", "--home", str(home), "--no-probe")
        status = _cli("status", "--home", str(home))
        doc = json.loads(_cli("status", "--json", "--home", str(home)))
    for text in (doctor, status):
        line = next(x for x in text.splitlines() if "served by:" in x)
        assert f"the gateway that owns its sessions, pid {proc.pid} (Hermes 0.23.6; session-authority-v1)" in line
        if tickets_on:
            assert line.endswith("resumes continue there, with single-use tickets")
        else:
            assert "resumes are refused, and no other Hermes is started beside it" in line
    served = doc["homes"][0]["served_by"]
    assert served["kind"] == "gateway" and served["pid"] == proc.pid and served["usable"] is tickets_on
    assert served["version"] == "0.23.6" and served["capabilities"] == ["session-authority-v1"]


# ── a dashboard that mints tickets ──────────────────────────────────────────────────────────────


class _TicketDashboard:
    """A dashboard front as newer Hermes serves it (upstream ``hermes_cli/dashboard_auth/routes.py``
    @ 04dcb30a82e8e4d46f5d11b6c4a748003ea07421: ``POST /api/auth/ws-ticket`` answers ``{ticket, ttl_seconds: 30}``;
    ``hermes_cli/web_server_chat.py`` @ fe13bb37a33d2206036d82ed101e989eb018f5f7: the ticket rides in the
    subprotocols, ``hermes-gateway-v1`` is echoed, the query token is not taken). One port: a POST is answered
    here, anything else is passed to a WebSocket server behind it."""

    def __init__(self, token: str) -> None:
        from websockets.sync.server import serve

        self.token, self.tickets, self.offered, self.minted = token, set(), [], 0

        def process_request(_connection, request):
            from websockets.datastructures import Headers
            from websockets.http11 import Response

            raw = request.headers.get("Sec-WebSocket-Protocol") or ""
            self.offered.append((request.path, raw))
            parts = [p.strip() for p in raw.split(",")]
            ticket = next((p[len(tickets.TICKET_PREFIX):] for p in parts if p.startswith(tickets.TICKET_PREFIX)), "")
            if tickets.PROTOCOL not in parts or ticket not in self.tickets:
                return Response(401, "Unauthorized", Headers([("Content-Length", "0")]), b"")
            self.tickets.discard(ticket)
            return None

        def handler(conn):
            conn.send(json.dumps({"jsonrpc": "2.0", "method": "event", "params": {"type": "gateway.ready"}}))
            for message in conn:
                req = json.loads(message)
                conn.send(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"sessions": []}}))

        self.ws = serve(handler, "127.0.0.1", 0, process_request=process_request,
                        select_subprotocol=lambda _c, offered: tickets.PROTOCOL if tickets.PROTOCOL in offered else None)
        threading.Thread(target=self.ws.serve_forever, daemon=True).start()
        self.front = socket.create_server(("127.0.0.1", 0))
        self.port = self.front.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                peer, _ = self.front.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _serve(self, peer: socket.socket) -> None:
        if peer.recv(5, socket.MSG_PEEK) == b"POST ":
            head = b""
            while b"\r\n\r\n" not in head:
                head += peer.recv(4096)
            given = [ln.split(b":", 1)[1].strip().decode() for ln in head.split(b"\r\n")
                     if ln.lower().startswith(b"x-hermes-session-token:")]
            if given == [self.token]:
                self.minted += 1
                ticket = f"t{self.minted}-one-use"
                self.tickets.add(ticket)
                body = json.dumps({"ticket": ticket, "ttl_seconds": 30}).encode()
                peer.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            else:
                peer.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            peer.close()
            return
        back = socket.create_connection(("127.0.0.1", self.ws.socket.getsockname()[1]))

        def pump(a: socket.socket, b: socket.socket) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(peer, back), daemon=True).start()
        pump(back, peer)

    def close(self) -> None:
        self.front.close()
        self.ws.shutdown()


def test_a_dashboard_that_mints_tickets_is_entered_with_one_never_with_its_token_in_the_url():
    from hermes_tray_core.backend.websocket import Secret

    dash = _TicketDashboard("dash-token-" + "z" * 20)
    try:
        s = RpcSession(WebSocketTransport("127.0.0.1", dash.port, Secret(dash.token)))
        s.start()
        try:
            s.wait_ready(5)
            assert s.request("session.active_list", {}, 5) == {"sessions": []}
        finally:
            s.shutdown()
        with pytest.raises(BackendRefused):  # a wrong token mints nothing; the query token is not taken either
            WebSocketTransport("127.0.0.1", dash.port, Secret("wrong")).open()
    finally:
        dash.close()
    assert dash.minted == 1
    (path, offered), (path2, _) = dash.offered
    assert path == "/api/ws" and offered == "hermes-gateway-v1, hermes-gateway-ticket.t1-one-use"
    assert dash.token not in path + offered and path2 == "/api/ws?token=wrong"
