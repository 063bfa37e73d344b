"""Continuing inside the user's running backend (the simulated ``hermes dashboard``, a real process with a
real WebSocket server): finding it, its token, gated mode and refusals, the fallback and its reason, a
session open in another client, and the token never leaving memory."""

from __future__ import annotations

import json
import logging
import queue
import time
from pathlib import Path

import pytest

from hermes_tray.demo.sim_backend import write_control
from hermes_tray_core.backend.endpoint import args_endpoint, read_page
from hermes_tray_core.backend.install import HermesInstall
from hermes_tray_core.backend.rpc import RpcSession
from hermes_tray_core.backend.running import NO_BACKEND, find_live_backend
from hermes_tray_core.backend.websocket import BackendRefused, BackendUnusable, Secret, WebSocketTransport
from hermes_tray_core.continuing import gateway
from hermes_tray_core.continuing.resume import resume_turn
from hermes_tray_core.hermes.processes import ProcessKind, classify
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Outcome, RanIn
from tests.support.sim_homes import make_home, plant_marker, read_turns, running_sim_dashboard

PROMPT = "Migrate the settings page to the new form component."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3, progress_interval=0.1)
TOKEN = "tok-" + "x7" * 20



def root_of(install: HermesInstall) -> Path:
    assert install.python is not None
    return Path(install.python).parent.parent


def journal(key: str) -> list[dict]:
    from tests.support import book

    return [e for e in reversed(book.history(500)) if e.get("session_key") == key]


def client(backend) -> RpcSession:
    s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid))
    s.start()
    s.wait_ready(5)
    return s


# ── finding it ──────────────────────────────────────────────────────────────────────────────────


def test_the_desktop_backend_forms_are_recognised_and_their_arguments_read():
    assert classify(["/v/bin/python", "/v/bin/hermes", "dashboard", "--port", "0"]) == ProcessKind.DASHBOARD
    assert classify(["/v/bin/hermes", "serve", "--host", "127.0.0.1"]) == ProcessKind.DASHBOARD  # Desktop spawns serve
    assert classify(["/v/bin/hermes", "chat"]) == ProcessKind.CLI
    assert args_endpoint(["hermes", "dashboard"]) == ("127.0.0.1", 9119)
    assert args_endpoint(["hermes", "serve", "--host=::1", "--port", "8001"]) == ("::1", 8001)


def test_a_non_loopback_address_is_never_connected_to():
    with pytest.raises(BackendUnusable, match="not a loopback"):
        WebSocketTransport("192.168.1.20", 9119, Secret("t"))
    with pytest.raises(BackendUnusable, match="not a loopback"):
        read_page("10.0.0.1", 9119)


def test_no_backend_for_the_home_says_so(tmp_path):
    home, _key = make_home(tmp_path / "home")
    assert find_live_backend(home) == (None, NO_BACKEND)


def test_token_from_the_page(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (proc, port):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        assert (backend.pid, backend.port, backend.token_source) == (proc.pid, port, "page")
        assert backend.python == sims["legacy"].python  # the venv's interpreter, for the capability probe
        assert "<secret>" in repr(backend.token) and backend.token.reveal() not in repr(backend)
        s = client(backend)
        try:
            assert s.request("session.active_list", {}, 5) == {"sessions": []}
        finally:
            s.shutdown()


def test_token_from_the_environment(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    write_control(home, dashboard_page_token=False)  # the page carries none: only the environment has it
    with running_sim_dashboard(root_of(sims["legacy"]), home, env={"HERMES_DASHBOARD_SESSION_TOKEN": TOKEN}):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        assert backend.token_source == "environment" and backend.token.reveal() == TOKEN
        client(backend).shutdown()


def test_a_wrong_token_is_refused_before_the_upgrade(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (proc, port):
        t = WebSocketTransport("127.0.0.1", port, Secret("not-the-token"), pid=proc.pid)
        with pytest.raises(BackendRefused, match="HTTP 403"):
            t.open()


def test_a_gated_backend_is_not_used_and_the_resume_falls_back_saying_why(sims, tmp_path, monkeypatch):
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    write_control(home, dashboard_gated=True)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home):
        backend, why = find_live_backend(home)
        assert backend is None and "gated mode" in (why or "")
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
    assert res.outcome == Outcome.COMPLETED, res.message
    c = res.continuation
    assert c is not None and c.ran_in == RanIn.SEPARATE_PROCESS and c.gateway_pid
    assert res.fallback_reason and "gated mode" in res.fallback_reason
    d = res.to_dict()
    assert d["ran_in"] == "separate-process" and "gated mode" in d["fallback_reason"]
    assert "Not in your running Hermes" in res.message and "in a separate Hermes process" in res.message
    done = [e for e in journal(key) if e["event"] == "completed"]
    assert done and "gated mode" in done[-1]["fallback_reason"] and done[-1]["ran_in"] == "separate-process"
    assert len(read_turns(home)) == 1


def test_an_env_token_refused_by_a_gated_backend_falls_back_with_the_http_status(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    write_control(home, dashboard_gated=True)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home, env={"HERMES_DASHBOARD_SESSION_TOKEN": TOKEN}):
        res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.fallback_reason and "HTTP 403" in res.fallback_reason
    assert res.continuation is not None and res.continuation.ran_in == RanIn.SEPARATE_PROCESS
    assert len(read_turns(home)) == 1


# ── resume through it ───────────────────────────────────────────────────────────────────────────


def test_resume_prefers_the_running_backend_and_never_leaks_the_token(sims, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home, env={"HERMES_DASHBOARD_SESSION_TOKEN": TOKEN}) as (
            proc, _port):
        res = resume_turn(Turn.of(home, key, entry), options=FAST, via="test")
        assert proc.poll() is None  # still running: the tray never stops the user's backend
    assert res.outcome == Outcome.COMPLETED, res.message
    c = res.continuation
    assert c is not None and c.ran_in == RanIn.RUNNING_BACKEND and c.backend_pid == proc.pid
    assert c.gateway_pid is None and res.fallback_reason is None
    assert f"It ran in your running Hermes (pid {proc.pid})." in res.message
    from hermes_tray.engine import run_result

    shown = run_result(res)  # what the tray's windows and History are handed
    assert shown.ran_in == "running-backend" and shown.where == f"in your running Hermes (pid {proc.pid})"
    assert [t["pid"] for t in read_turns(home)] == [proc.pid]  # the turn ran inside the backend process
    assert key not in list_turn_markers(home)
    events = journal(key)
    assert [e["event"] for e in events] == ["approved", "continuing", "dispatched", "completed"]
    assert events[2]["ran_in"] == "running-backend" and events[2]["backend_pid"] == proc.pid
    # The token is nowhere: not in a log record (websockets' debug log included), the result, the ledger.
    from hermes_tray_core.stores.paths import state_dir

    journal_text = "".join(p.read_bytes().decode(errors="replace") for p in Path(state_dir()).rglob("*")
                           if p.is_file())
    assert TOKEN not in caplog.text and TOKEN not in json.dumps(res.to_dict()) and TOKEN not in repr(res)
    assert TOKEN not in journal_text


def test_a_session_open_in_another_client_is_left_alone_and_keeps_its_events(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        window = client(backend)  # stands in for the Desktop window that has the session open
        try:
            sid = window.request("session.resume", {"session_id": key}, 5)["session_id"]
            res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
            assert res.outcome == "refused" and res.verdict == "running", res.message
            assert "open in your Hermes app" in res.message
            assert res.continuation is not None and res.continuation.live_elsewhere
            assert read_turns(home) == []  # no continuation: neither through the backend nor spawned
            assert list_turn_markers(home)[key] == entry
            refused = [e for e in journal(key) if e["event"] == "refused"]
            assert refused and "open in your Hermes app" in refused[-1]["reason"]
            # The window still gets its own turn's events.
            window.request("prompt.submit", {"session_id": sid, "text": "and one more thing"}, 5)
            seen = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "message.complete" not in seen:
                try:
                    ev = window.events.get(timeout=0.5)
                except queue.Empty:
                    continue
                if isinstance(ev, dict) and ev.get("session_id") == sid:
                    seen.append(ev.get("type"))
            assert "message.start" in seen and "message.complete" in seen
        finally:
            window.shutdown()


@pytest.mark.parametrize("cap", ["legacy", "auto-continue"])
def test_the_session_the_tray_left_there_is_waited_for_not_read_as_a_window(sims, tmp_path, cap):
    # The tray leaves its session to Hermes (a turn running there must outlive the tray), which lets it go once
    # idle after its grace: a second resume of the same session right after sees it live, knows it for its own
    # leftover (the same runtime id, untouched since the tray left) and waits for Hermes to let it go.
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    write_control(home, dashboard_orphan_grace=2.0)
    with running_sim_dashboard(root_of(sims[cap]), home):
        first = resume_turn(Turn.of(home, key, plant_marker(home, key, PROMPT)), options=FAST, via="test")
        assert first.outcome == Outcome.COMPLETED, first.message
        phases: list[str] = []
        again = resume_turn(Turn.of(home, key, plant_marker(home, key, PROMPT)), options=FAST, via="test",
                            listener=gateway.Callbacks(on_progress=lambda p: phases.append(p.phase)))
        assert again.outcome == Outcome.COMPLETED, again.message
        assert "waiting-for-release" in phases
        assert again.continuation is not None and again.continuation.ran_in == RanIn.RUNNING_BACKEND
    assert len(read_turns(home)) == 2


def test_the_session_the_tray_left_is_a_windows_once_a_window_took_it(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    write_control(home, dashboard_orphan_grace=30.0)
    with running_sim_dashboard(root_of(sims["legacy"]), home):
        first = resume_turn(Turn.of(home, key, plant_marker(home, key, PROMPT)), options=FAST, via="test")
        assert first.outcome == Outcome.COMPLETED, first.message
        backend, why = find_live_backend(home)
        assert backend is not None, why
        window = client(backend)
        try:
            time.sleep(0.05)
            window.request("session.resume", {"session_id": key}, 5)  # the user opens it: it is the window's now
            t0 = time.monotonic()
            res = resume_turn(Turn.of(home, key, plant_marker(home, key, PROMPT)), options=FAST, via="test")
            assert res.outcome == "refused" and "open in your Hermes app" in res.message, res.message
            assert time.monotonic() - t0 < 10  # not waited for: a window has it
        finally:
            window.shutdown()
    assert len(read_turns(home)) == 1


def test_the_backend_stopped_before_the_resume_means_a_spawned_gateway(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (proc, _port):
        pass  # started and SIGKILLed: gone before the resume
    assert proc.poll() is not None
    res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.continuation is not None and res.continuation.ran_in == RanIn.SEPARATE_PROCESS
    assert res.fallback_reason == NO_BACKEND
    assert len(read_turns(home)) == 1


# ── doctor ──────────────────────────────────────────────────────────────────────────────────────


def _doctor(home: Path) -> tuple[dict, str]:
    import os
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "hermes_tray", "doctor", "--no-probe", "--home", str(home)],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    pj = subprocess.run([sys.executable, "-m", "hermes_tray", "doctor", "--json", "--no-probe", "--home", str(home)],
                        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    (row,) = json.loads(pj.stdout)["homes"]
    return row["running_backend"], p.stdout + pj.stdout


def test_doctor_says_where_resumes_run_and_why_not_in_the_running_hermes(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    rb, text = _doctor(home)
    assert (rb["kind"], rb["usable"], rb["reason"]) == (None, False, NO_BACKEND)
    assert "served by: none — resumes start a separate Hermes process" in text
    with running_sim_dashboard(root_of(sims["legacy"]), home, env={"HERMES_DASHBOARD_SESSION_TOKEN": TOKEN}) as (
            proc, port):
        rb, text = _doctor(home)
        assert (rb["kind"], rb["usable"], rb["pid"], rb["port"], rb["token_source"]) == (
            "dashboard", True, proc.pid, port, "environment")
        assert f"running Hermes: pid {proc.pid} on 127.0.0.1:{port}" in text and TOKEN not in text
    write_control(home, dashboard_gated=True)
    with running_sim_dashboard(root_of(sims["legacy"]), home):
        rb, text = _doctor(home)
        assert rb["usable"] is False and "gated mode" in rb["reason"]
        assert "resumes start a separate Hermes process" in text


def test_a_backend_found_once_is_reused_while_it_lives_and_looked_for_again_after(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (first, _port):
        a, _ = find_live_backend(home)
        b, _ = find_live_backend(home)
        assert a is not None and b is a  # the same process: not looked up again
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (second, port):
        c, why = find_live_backend(home)  # the remembered one is dead: found anew
        assert c is not None and c.pid == second.pid != first.pid and c.port == port, why
    assert find_live_backend(home) == (None, NO_BACKEND)


def test_a_live_session_the_list_misses_is_still_not_taken_over(sims, tmp_path):
    # Defence in depth: the backend's active_list misses the session (e.g. it is live under a compression
    # child's id); session.resume then answers with the window's live copy, started before the tray asked.
    home, key = make_home(tmp_path / "home", turn_seconds=3.0)
    write_control(home, dashboard_hide_live=True)
    entry = plant_marker(home, key, PROMPT)
    with running_sim_dashboard(root_of(sims["legacy"]), home):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        window = client(backend)
        try:
            sid = window.request("session.resume", {"session_id": key}, 5)["session_id"]
            time.sleep(1.2)  # the window has had it open a while
            res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
            assert res.outcome == "refused" and "open in your Hermes app" in res.message, res.message
            assert read_turns(home) == []  # the tray submitted nothing
            assert list_turn_markers(home)[key] == entry
            # Not closed by the tray: the window's session still takes a turn.
            assert window.request("prompt.submit", {"session_id": sid, "text": "still mine"}, 5)["status"] == \
                "streaming"
        finally:
            window.shutdown()


def test_an_open_session_on_a_backend_that_continues_turns_itself_says_it_will_continue_there(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    with running_sim_dashboard(root_of(sims["auto-continue"]), home):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        window = client(backend)
        try:
            window.request("session.resume", {"session_id": key}, 5)  # open in the window, idle
            entry = plant_marker(home, key, PROMPT)  # then a turn of it is found interrupted
            res = resume_turn(Turn.of(home, key, entry), options=FAST)
        finally:
            window.shutdown()
    assert res.outcome == "refused" and "open in your Hermes app" in res.message, res.message
    assert "continues the interrupted turn there itself" in res.message
    assert read_turns(home) == []  # the tray started nothing


# ── a live writer that runs no turn ─────────────────────────────────────────────────────────────


def test_a_marker_handed_to_a_backend_that_runs_no_turn_is_offered_again_unless_a_resume_holds_it(sims, tmp_path):
    """The marker names the running dashboard as its writer (a resume handed it over and died before its submit):
    asked, the dashboard holds no turn for the session, so the turn is not ``running`` — while a hermes-tray
    process holds the turn's claim (it is between its hand-over and its submit) the live writer stands."""
    from hermes_tray_core.backend.sessions import forget as forget_answers
    from hermes_tray_core.continuing import claim as exactly_once
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.process.identity import identity_of
    from hermes_tray_core.scanning.scanner import Scanner

    home, key = make_home(tmp_path / "home")
    with running_sim_dashboard(root_of(sims["legacy"]), home) as (proc, _port):
        plant_marker(home, key, PROMPT, attempts=1, writer=identity_of(proc.pid))

        def verdict() -> tuple[str, str]:
            forget_answers()
            (t,) = [t for t in Scanner([Home(home, "default", "test")]).scan().turns if t.session_key == key]
            return t.verdict, t.reason

        held = exactly_once.claim(Turn.of(home, key, None), purpose="resume", via="test", ttl=60)
        assert isinstance(held, exactly_once.Claim)
        try:
            assert verdict()[0] == "running"
        finally:
            exactly_once.release(held, key)
        v, reason = verdict()
        assert v == "actionable" and "does not hold the session" in reason, reason
        # A turn running there for the session keeps it running.
        backend, _why = find_live_backend(home)
        s = client(backend)
        try:
            write_control(home, turn_seconds=5.0)
            sid = s.request("session.resume", {"session_id": key}, 5)["session_id"]
            s.request("prompt.submit", {"session_id": sid, "text": "the user's own turn"}, 5)
            assert verdict()[0] == "running"
        finally:
            s.shutdown()
