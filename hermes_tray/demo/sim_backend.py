"""A simulated Hermes backend: a stand-in for ``python -m tui_gateway.entry`` on stdio.

It speaks the same newline-delimited JSON-RPC (``gateway.ready``, ``session.resume``,
``prompt.submit``, ``session.interrupt``, ``session.create``/``close`` and the event frames),
keeps markers through ``core.markers.store`` and a Hermes-format session turn lease in its own
``state.db`` (see ``sim_state``), and runs turns of configurable length — so ``hermes-tray demo``
and the fast tests have a backend that starts in a fraction of a second. It is not a substitute
for testing against the real gateway (``tests/integration`` does that).

``--capability auto-continue`` plays a backend with the feature (markers at turn start, clears at
conclusion, continues an interrupted turn on ``session.resume`` by Hermes' rules);
``--capability legacy`` plays ``hermes-agent`` 0.19.0 (no markers, resume never continues).

Knobs, read at start and before each turn from ``<HERMES_HOME>/sim_backend.json`` (all optional):
``turn_seconds`` (3), ``deltas`` (6), ``reply``, ``die_mid_turn`` (SIGKILL itself halfway
through the next turn), ``never_ready``, ``ready_delay``, ``never_finish``, ``resume_delay``,
``tool_child_seconds`` (each turn starts a "tool" subprocess sleeping that long, its pid appended to
``<HERMES_HOME>/sim_tool_pids.txt``, and at stdin EOF the gateway waits for it — as Hermes blocked on a
tool would — so only signals to its process group stop both).
Every turn it runs is appended to ``<HERMES_HOME>/sim_turns.jsonl`` (kind, attempt, pid; a hash
of the text, never the text) so tests can count turns exactly.

``run-turn`` mode runs one turn on its own, without a client: the "backend that crashes" of the
demo (``--die-after S`` SIGKILLs it mid-turn, leaving a marker from a dead writer).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

from hermes_tray.demo import sim_state
from hermes_tray_core import (
    RESUMING_STATUS_TEXT,
    MarkerStore,
    clear_turn_marker,
    continuation_note,
    is_continuation_note,
    marker_writer_state,
    normalize_marker,
    record_turn_start,
)

AUTO = "auto-continue"
LEGACY = "legacy"
CONTROL_FILE = "sim_backend.json"
TURNS_FILE = "sim_turns.jsonl"
TOOL_PIDS_FILE = "sim_tool_pids.txt"

DEFAULTS: dict[str, Any] = {
    "turn_seconds": 3.0,
    "deltas": 6,
    "reply": "Simulated Hermes: the task is finished.",
    "die_mid_turn": False,
    "never_ready": False,
    "ready_delay": 0.0,
    "never_finish": False,
    "resume_delay": 0.0,
    "tool_child_seconds": 0.0,
    # the tests' simulated running backend (tests/support/sim_dashboard.py): sign-in required, token in its page, list hides live sessions
    "dashboard_gated": False,
    "dashboard_page_token": True,
    "dashboard_hide_live": False,
    # seconds a session left without a client stays live before Hermes lets it go (once idle); a running turn goes on
    "dashboard_orphan_grace": 20.0,
}


def load_control(home: Path) -> dict[str, Any]:
    """Knobs from ``sim_backend.json`` over the defaults (a broken file means defaults)."""
    out = dict(DEFAULTS)
    with suppress(OSError, ValueError):
        data = json.loads((home / CONTROL_FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            out.update({k: v for k, v in data.items() if k in DEFAULTS})
    return out


def write_control(home: Path | str, **knobs: Any) -> None:
    """Set knobs for the next simulated backend started on ``home`` (tests, demo)."""
    path = Path(home) / CONTROL_FILE
    data: dict[str, Any] = {}
    with suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
    data.update(knobs)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _log_turn(home: Path, **fields: Any) -> None:
    fd = os.open(home / TURNS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(json.dumps({"at": time.time(), "pid": os.getpid(), **fields}) + "\n")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class SimGateway:
    """One simulated gateway process: sessions, turns and frames."""

    def __init__(self, home: Path, capability: str) -> None:
        self.home = home
        self.capability = capability
        self.sessions: dict[str, dict[str, Any]] = {}
        self._out_lock = threading.Lock()
        self.tool_children: list[subprocess.Popen[bytes]] = []

    # frames

    def write(self, obj: dict[str, Any], sid: str | None = None) -> None:
        """One frame out (``sid``: the session an event belongs to; the stdio gateway has one client)."""
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        with self._out_lock:
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    @staticmethod
    def log(message: str) -> None:
        """A line on stderr, as Hermes' gateway logs there: the tray keeps it as the gateway log
        (identity and progress only, never prompt text)."""
        with suppress(BrokenPipeError, ValueError, OSError):
            print(f"[sim-gateway {os.getpid()}] {message}", file=sys.stderr, flush=True)

    def emit(self, etype: str, sid: str | None, payload: dict[str, Any] | None = None) -> None:
        params: dict[str, Any] = {"type": etype}
        if sid is not None:
            params["session_id"] = sid
        if payload is not None:
            params["payload"] = payload
        self.write({"jsonrpc": "2.0", "method": "event", "params": params}, sid)

    # dispatch

    def serve(self) -> None:
        ctl = load_control(self.home)
        if ctl["never_ready"]:
            while sys.stdin.readline():
                pass
            return
        if ctl["ready_delay"]:
            time.sleep(float(ctl["ready_delay"]))
        self.emit("gateway.ready", None, {"skin": {"name": "sim"}})
        self.log(f"ready (home {self.home}, capability {self.capability})")
        for raw in sys.stdin:
            self.handle_line(raw)
        # stdin EOF: exit like Hermes, leaving any running turn's marker behind (after its tools, if any).
        self.log("[gateway-exit] stdin EOF")
        for child in self.tool_children:
            child.wait()

    def handle_line(self, raw: str) -> None:
        """One request line: dispatch it, write the response, then run what follows it (a turn)."""
        raw = raw.strip()
        if not raw:
            return
        try:
            req = json.loads(raw)
        except ValueError:
            self.write({"jsonrpc": "2.0", "error": {"code": -32700, "message": "parse error"}, "id": None})
            return
        if not isinstance(req, dict):
            return
        rid, method = req.get("id"), req.get("method")
        params = req.get("params") if isinstance(req.get("params"), dict) else {}
        self.log(f"request {method}")
        handler = getattr(self, "m_" + str(method).replace(".", "_"), None)
        if handler is None:
            self.write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"unknown method: {method}"}})
            return
        try:
            result, after = handler(params)
        except _RpcError as exc:
            self.write({"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": str(exc)}})
            return
        self.write({"jsonrpc": "2.0", "id": rid, "result": result})
        if after is not None:
            after()

    def _session(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        sid = str(params.get("session_id") or "")
        session = self.sessions.get(sid)
        if session is None:
            raise _RpcError(4001, "session not found")
        return sid, session

    def m_session_create(self, params: dict[str, Any]) -> tuple[dict, None]:
        key = sim_state.create_session(self.home)
        sid = uuid.uuid4().hex[:8]
        self.sessions[sid] = self._new_session(key)
        return {"session_id": sid, "stored_session_id": key, "message_count": 0, "messages": []}, None

    def _new_session(self, key: str) -> dict[str, Any]:
        now = time.time()
        return {"key": key, "running": False, "interrupt": threading.Event(), "thread": None,
                "created_at": now, "last_active": now}

    def m_session_resume(self, params: dict[str, Any]) -> tuple[dict, Any]:
        key = str(params.get("session_id") or "")
        if not key:
            raise _RpcError(4006, "session_id required")
        if not sim_state.session_exists(self.home, key):
            raise _RpcError(4007, "session not found")
        ctl = load_control(self.home)
        if ctl["resume_delay"]:
            time.sleep(float(ctl["resume_delay"]))
        for sid, s in self.sessions.items():
            if s["key"] == key:
                s["last_active"] = time.time()  # a resume touches the live session, as Hermes does
                return self._resume_payload(sid, s, live=True), None
        sid = uuid.uuid4().hex[:8]
        session = self._new_session(key)
        self.sessions[sid] = session
        result = self._resume_payload(sid, session)
        after = None
        if self.capability == AUTO:
            plan = self._auto_continue_plan(key)
            if plan is not None:
                attempt, prompt, interrupted_at = plan
                result["auto_continue"] = {"attempt": attempt, "interrupted_at": interrupted_at}
                session["running"] = True
                # Like a threaded backend, the first frame may beat the response to the client.
                self.emit("status.update", sid, {"kind": "status", "text": RESUMING_STATUS_TEXT})

                def after() -> None:
                    self._start_turn(sid, session, continuation_note(prompt), attempt=attempt,
                                     original=prompt, kind="auto-continue")
        return result, after

    def _resume_payload(self, sid: str, session: dict[str, Any], *, live: bool = False) -> dict[str, Any]:
        """Hermes' two reply shapes: a fresh runtime says ``inflight: null``; a live one (0.19.0) sends its live
        payload, with no ``inflight`` key unless a turn is in flight."""
        msgs = [{"role": r, "text": c} for r, c in sim_state.messages(self.home, session["key"])]
        out = {"session_id": sid, "resumed": session["key"], "session_key": session["key"],
               "message_count": len(msgs), "messages": msgs, "running": bool(session["running"]),
               "status": "streaming" if session["running"] else "idle", "info": {"model": "sim"},
               "started_at": session.get("created_at", 0.0)}
        if not live:
            out["inflight"] = None
        return out

    def _auto_continue_plan(self, key: str) -> tuple[int, str, float] | None:
        """Hermes' own decision on resume: continue, clear, or leave the marker (its order)."""
        from hermes_tray_core import Marker, Seen, decide, read_backend_config

        raw = MarkerStore(self.home).list().get(key)
        marker = normalize_marker(raw)
        if raw is None or marker is None:
            return None
        cfg = read_backend_config(self.home).auto_continue
        verdict = decide(Marker.read(raw), config=cfg, now=time.time(),
                         seen=Seen(marker_writer_state(raw, self.home))).verdict
        if verdict in ("not-ours", "running"):
            return None  # another mechanism / a live writer owns it: leave it
        if verdict != "actionable":
            clear_turn_marker(self.home, key)  # disabled, stale or exhausted: retire it
            return None
        interrupted_at = float(raw.get("interrupted_at") or marker["started_at"])
        return marker["attempts"] + 1, marker["prompt"], interrupted_at

    def m_prompt_submit(self, params: dict[str, Any]) -> tuple[dict, Any]:
        sid, session = self._session(params)
        text = params.get("text")
        if not isinstance(text, str) or not text:
            raise _RpcError(4002, "text required")
        if session["running"]:
            raise _RpcError(4009, "session busy")
        session["running"] = True
        session["last_active"] = time.time()
        kind = "note" if is_continuation_note(text) else "prompt"
        return {"status": "streaming"}, lambda: self._start_turn(sid, session, text, attempt=0, original=text,
                                                                 kind=kind)

    def m_session_interrupt(self, params: dict[str, Any]) -> tuple[dict, None]:
        sid, session = self._session(params)
        if session["running"]:
            session["interrupt"].set()
            if self.capability == AUTO:
                clear_turn_marker(self.home, session["key"])  # a confirmed Stop retires the marker
        return {"status": "interrupted"}, None

    def m_session_active_list(self, params: dict[str, Any]) -> tuple[dict, None]:
        """Live sessions in this process, as Hermes lists them (id, session_key, status)."""
        rows = [{"id": sid, "session_key": s["key"], "status": "working" if s["running"] else "idle",
                 "started_at": s.get("created_at", 0.0), "last_active": s.get("last_active", 0.0)}
                for sid, s in list(self.sessions.items())]
        return {"sessions": rows}, None

    def m_session_close(self, params: dict[str, Any]) -> tuple[dict, None]:
        sid = str(params.get("session_id") or "")
        return {"closed": self.sessions.pop(sid, None) is not None}, None

    # turns

    def _start_turn(self, sid: str, session: dict[str, Any], text: str, *, attempt: int, original: str,
                    kind: str) -> None:
        session["running"] = True
        session["interrupt"].clear()
        t = threading.Thread(target=self._run_turn, args=(sid, session, text, attempt, original, kind), daemon=True)
        session["thread"] = t
        t.start()

    def _run_turn(self, sid: str, session: dict[str, Any], text: str, attempt: int, original: str, kind: str) -> None:
        key = session["key"]
        ctl = load_control(self.home)
        self.log(f"turn started on session {key} ({kind}, attempt {attempt})"
                 + ("; will crash mid-turn (die_mid_turn in sim_backend.json)" if ctl["die_mid_turn"] else ""))
        _log_turn(self.home, session_key=key, kind=kind, attempt=attempt, capability=self.capability,
                  text_sha=_digest(text), original_sha=_digest(original))
        if float(ctl["tool_child_seconds"] or 0) > 0:
            tool = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))",  # noqa: S603
                                     str(ctl["tool_child_seconds"])], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.tool_children.append(tool)
            with open(self.home / TOOL_PIDS_FILE, "a", encoding="utf-8") as f:
                f.write(f"{tool.pid}\n")
        if self.capability == AUTO:
            # A continuation's marker carries attempts + 1 and the ORIGINAL prompt, never the note.
            record_turn_start(self.home, key, original, attempts=attempt)
        holder = sim_state.acquire_turn_lease(self.home, key, uuid.uuid4().hex[:8]) if self.capability == AUTO else None
        self.emit("message.start", sid)
        status, reply = run_turn_body(self.home, key, text, ctl, session["interrupt"], lambda d: self.emit(
            "message.delta", sid, {"text": d}), holder)
        if self.capability == AUTO:
            clear_turn_marker(self.home, key)
        if holder:
            sim_state.release_turn_lease(self.home, key, holder)
        session["running"] = False
        session["last_active"] = time.time()
        self.log(f"turn on session {key} ended: {status}")
        self.emit("message.complete", sid, {"text": reply, "usage": {"calls": 1}, "status": status})
        self.emit("session.info", sid, {"model": "sim", "running": False})


def run_turn_body(home: Path, key: str, text: str, ctl: dict[str, Any], interrupt: threading.Event,
                  on_delta: Any, holder: str | None) -> tuple[str, str]:
    """The turn itself: stream the reply over ``turn_seconds`` (or forever), honouring interrupt/die."""
    sim_state.append_message(home, key, "user", text)
    turn_seconds = max(0.0, float(ctl["turn_seconds"]))
    words = str(ctl["reply"]).split(" ")
    steps = max(1, int(ctl["deltas"]))
    step = turn_seconds / steps
    die_at = time.monotonic() + turn_seconds / 2 if ctl["die_mid_turn"] else None
    sent: list[str] = []
    i = 0
    last_refresh = time.monotonic()
    while ctl["never_finish"] or i < steps:
        if interrupt.wait(step if step > 0 else 0):
            sim_state.append_message(home, key, "assistant", " ".join(sent) + " [interrupted]")
            return "interrupted", " ".join(sent)
        if die_at is not None and time.monotonic() >= die_at:
            SimGateway.log("simulated crash: SIGKILL mid-turn")
            os.kill(os.getpid(), signal.SIGKILL)
        if holder and time.monotonic() - last_refresh > sim_state.LEASE_TTL / 5:
            sim_state.refresh_turn_lease(home, key, holder)
            last_refresh = time.monotonic()
        if i < steps:
            chunk = " ".join(words[i * len(words) // steps:(i + 1) * len(words) // steps])
            if chunk:
                sent.append(chunk)
                on_delta(chunk if len(sent) == 1 else " " + chunk)
        i += 1
    reply = " ".join(sent)
    sim_state.append_message(home, key, "assistant", reply, finish_reason="stop")  # as Hermes ends a turn
    return "complete", reply


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def run_standalone_turn(home: Path, key: str, prompt: str, *, turn_seconds: float, die_after: float | None,
                        attempts: int = 0) -> int:
    """``run-turn``: one turn with no client, marker + lease held, as a backend mid-turn would."""
    if not sim_state.session_exists(home, key):
        sim_state.create_session(home, session_id=key, title="Demo session")
    record_turn_start(home, key, prompt, attempts=attempts)
    holder = sim_state.acquire_turn_lease(home, key, uuid.uuid4().hex[:8])
    _log_turn(home, session_key=key, kind="standalone", attempt=attempts, capability=AUTO,
              text_sha=_digest(prompt), original_sha=_digest(prompt))
    print(f"sim-backend pid {os.getpid()} running a turn on {key}", flush=True)
    if die_after is not None:
        threading.Timer(die_after, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    ctl = dict(load_control(home), turn_seconds=turn_seconds, die_mid_turn=False)
    status, _ = run_turn_body(home, key, prompt, ctl, threading.Event(), lambda d: None, holder)
    clear_turn_marker(home, key)
    if holder:
        sim_state.release_turn_lease(home, key, holder)
    print(f"turn {status}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sim_backend", description="Simulated Hermes backend (stdio gateway).")
    ap.add_argument("--capability", choices=(AUTO, LEGACY), default=AUTO)
    ap.add_argument("--home", type=Path, default=None, help="Hermes home (default: $HERMES_HOME)")
    sub = ap.add_subparsers(dest="mode")
    rt = sub.add_parser("run-turn", help="run one turn without a client (the backend that crashes)")
    rt.add_argument("--session", required=True)
    rt.add_argument("--prompt", required=True)
    rt.add_argument("--turn-seconds", type=float, default=3600.0)
    rt.add_argument("--die-after", type=float, default=None)
    rt.add_argument("--attempts", type=int, default=0)
    args = ap.parse_args(argv)
    home = args.home or Path(os.environ.get("HERMES_HOME") or "")
    if not str(home) or not home.is_dir():
        print("sim_backend: HERMES_HOME (or --home) must name an existing directory", file=sys.stderr)
        return 2
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # like Hermes: a terminal Ctrl-C is the client's to handle
    if args.mode == "run-turn":
        return run_standalone_turn(home, args.session, args.prompt, turn_seconds=args.turn_seconds,
                                   die_after=args.die_after, attempts=args.attempts)
    SimGateway(home, args.capability).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
