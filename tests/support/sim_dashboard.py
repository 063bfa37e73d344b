"""A simulated running Hermes backend (``hermes dashboard``), test-only: the demo's simulated gateway in-process
behind ``/api/ws``, for the fast tests of the WebSocket transport (``tests/integration`` runs the real one).

What it copies from hermes-agent 0.19.0 (``hermes_cli/web_server.py``, ``tui_gateway/ws.py``):

* ``GET /`` serves a page with ``window.__HERMES_SESSION_TOKEN__="…"`` and
  ``window.__HERMES_AUTH_REQUIRED__=false`` injected (gated mode: no token, ``true``);
* ``/api/ws`` accepts ``?token=`` equal to ``$HERMES_DASHBOARD_SESSION_TOKEN`` (else a random token
  made at start), loopback peers only, and an ``Origin`` (when sent) naming the bound host; anything
  else is refused with HTTP 403 before the upgrade; gated mode refuses every token;
* ``gateway.ready`` on accept, then the same newline JSON-RPC as the stdio gateway; one process, one
  set of live sessions for all connections; each session's events go to the connection that
  created or last resumed it (a resume of a live session moves them to the newcomer, as 0.19.0
  does); when a connection closes, the sessions whose events still go to it are closed if they were
  resumed with ``close_on_disconnect``, else they stay live, detached: a running turn goes on, and the session
  is let go once it is idle ``dashboard_orphan_grace`` seconds after the disconnect (Hermes' 20 s grace; 0.22
  checks again every grace while the turn runs).

Start: :func:`tests.support.sim_homes.running_sim_dashboard` (``<sim python> <a hermes launcher> dashboard --port
0``, as Hermes runs), which waits for ``HERMES_DASHBOARD_READY port=<n>``. Knobs in ``<HERMES_HOME>/sim_backend.json``:
``dashboard_gated`` (bool), ``dashboard_page_token`` (bool, default true), ``dashboard_hide_live``
(``session.active_list`` answers with no sessions, as for a session live under another id).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from hermes_tray.demo.sim_backend import AUTO, LEGACY, SimGateway, load_control

_PAGE = ("<!doctype html><html><head><title>Hermes (simulated)</title>{script}</head>"
         "<body><div id=root></div></body></html>")


class SimDashboard(SimGateway):
    """The simulated gateway with per-connection event routing."""

    def __init__(self, home: Path, capability: str) -> None:
        super().__init__(home, capability)
        self.local = threading.local()

    def write(self, obj: dict[str, Any], sid: str | None = None) -> None:
        conn = None
        if sid is not None:
            session = self.sessions.get(sid)
            if session is not None:
                conn = session.get("conn")
                if conn is None:
                    return  # detached: its events go nowhere, as on 0.19.0
        if conn is None:
            conn = getattr(self.local, "conn", None)
        if conn is None:
            return
        try:
            conn.send(json.dumps(obj, ensure_ascii=False))
        except Exception:  # boundary: the demo's client went away
            return

    def _new_session(self, key: str) -> dict[str, Any]:
        session = super()._new_session(key)
        session["conn"] = getattr(self.local, "conn", None)
        return session

    def m_session_resume(self, params: dict[str, Any]) -> tuple[dict, Any]:
        fresh = not any(s["key"] == str(params.get("session_id") or "") for s in self.sessions.values())
        result, after = super().m_session_resume(params)
        session = self.sessions.get(result["session_id"])
        if session is not None:
            session["conn"] = getattr(self.local, "conn", None)  # the newcomer gets its events
            if fresh:
                session["close_on_disconnect"] = bool(params.get("close_on_disconnect"))
        return result, after

    def m_session_active_list(self, params: dict[str, Any]) -> tuple[dict, None]:
        if load_control(self.home)["dashboard_hide_live"]:  # a backend whose list misses a live session
            return {"sessions": []}, None
        return super().m_session_active_list(params)

    def handle_connection(self, conn: Any) -> None:
        self.local.conn = conn
        self.emit("gateway.ready", None, {"skin": {"name": "sim-dashboard"}})
        try:
            for message in conn:
                text = message if isinstance(message, str) else message.decode("utf-8", "replace")
                for line in text.split("\n"):
                    self.handle_line(line)
        except Exception:  # boundary: the demo's client went away
            pass
        finally:
            for sid, session in list(self.sessions.items()):
                if session.get("conn") is conn:
                    session["conn"] = None
                    if session.get("close_on_disconnect"):
                        self.sessions.pop(sid, None)
                    else:
                        self._reap_later(sid, session)

    def _reap_later(self, sid: str, session: dict[str, Any]) -> None:
        """Let a session left without a client go once it is idle, after the grace (as Hermes' orphan reaper)."""
        grace = float(load_control(self.home)["dashboard_orphan_grace"])

        def reap() -> None:
            if self.sessions.get(sid) is not session or session.get("conn") is not None:
                return  # resumed again meanwhile: a client holds it
            if session.get("running"):
                self._reap_later(sid, session)  # a running turn goes on: look again after another grace
                return
            self.sessions.pop(sid, None)

        t = threading.Timer(max(0.0, grace), reap)
        t.daemon = True
        t.start()


def serve(home: Path, capability: str, host: str, port: int) -> None:
    from websockets.datastructures import Headers
    from websockets.http11 import Response
    from websockets.sync.server import serve as ws_serve

    token = os.environ.get("HERMES_DASHBOARD_SESSION_TOKEN") or secrets.token_urlsafe(32)
    gateway = SimDashboard(home, capability)
    bound: dict[str, int] = {}

    def respond(status: int, reason: str, body: str, ctype: str = "text/html; charset=utf-8") -> Response:
        data = body.encode("utf-8")
        return Response(status, reason, Headers([("Content-Type", ctype), ("Content-Length", str(len(data)))]),
                        data)

    def process_request(connection: Any, request: Any) -> Response | None:
        ctl = load_control(home)
        gated = bool(ctl["dashboard_gated"])
        url = urllib.parse.urlsplit(request.path)
        if url.path in ("/", "/index.html"):
            if gated:
                script = "<script>window.__HERMES_AUTH_REQUIRED__=true;</script>"
            elif ctl["dashboard_page_token"]:
                script = (f'<script>window.__HERMES_SESSION_TOKEN__="{token}";'
                          "window.__HERMES_AUTH_REQUIRED__=false;</script>")
            else:
                script = "<script>window.__HERMES_AUTH_REQUIRED__=false;</script>"
            return respond(200, "OK", _PAGE.format(script=script))
        if url.path != "/api/ws":
            return respond(404, "Not Found", '{"error":"not found"}', "application/json")
        offered = urllib.parse.parse_qs(url.query).get("token", [""])[0]
        origin = request.headers.get("Origin")
        allowed = {f"http://127.0.0.1:{bound['port']}", f"http://localhost:{bound['port']}"}
        peer = connection.remote_address[0] if connection.remote_address else ""
        if (gated or not secrets.compare_digest(offered.encode(), token.encode())
                or (origin is not None and origin not in allowed) or peer not in ("127.0.0.1", "::1")):
            return respond(403, "Forbidden", "")
        return None

    with ws_serve(gateway.handle_connection, host, port, process_request=process_request,
                  compression=None, max_size=None) as server:
        bound["port"] = server.socket.getsockname()[1]
        print(f"HERMES_DASHBOARD_READY port={bound['port']}", flush=True)
        server.serve_forever()


def main(argv: list[str] | None = None, capability: str = AUTO) -> int:
    ap = argparse.ArgumentParser(prog="hermes", description="Simulated Hermes web backend.")
    ap.add_argument("subcommand", choices=("dashboard", "serve"))
    ap.add_argument("--port", type=int, default=9119)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--no-open", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--capability", choices=(AUTO, LEGACY), default=capability)
    args = ap.parse_args(argv)
    home = Path(os.environ.get("HERMES_HOME") or "")
    if not str(home) or not home.is_dir():
        print("sim dashboard: HERMES_HOME must name an existing directory", file=sys.stderr)
        return 2
    serve(home, args.capability, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
