"""``hermes-tray resume`` inside the real running backend: ``hermes dashboard`` from hermes-agent 0.19.0 on a
random loopback port, against the loopback mock model, with a session made through Hermes.

One dashboard is shared by the tests that leave it running (start-up ~2 s); the tests that stop or kill
a dashboard start their own. 0.19.0 predates auto-continue: the tray submits the note over /api/ws and
keeps the marker for the run with the dashboard as its writer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from mock_openai import MockOpenAI
from real_dashboard import running_dashboard, start_dashboard, stop_dashboard
from real_session import SEED_PROMPT
from test_real_gateway import cli, continuations, journal_events, status_of, transcript, turn_requests

from hermes_tray_core.backend.rpc import RpcSession
from hermes_tray_core.backend.running import NO_BACKEND, find_live_backend
from hermes_tray_core.backend.websocket import WebSocketTransport
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from tests.support.sim_homes import pid_running, plant_marker, settings_for

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process table")

TOKEN = "integration-" + "k3" * 16


@pytest.fixture
def env(user_dirs: dict[str, str], hermes_python: Path) -> dict[str, str]:
    dirs = user_dirs  # tests/conftest.py: the test's private tray dirs
    settings_for(str(hermes_python), Path(dirs["HERMES_TRAY_CONFIG_DIR"]))
    return dirs


#: Hermes lets a session go once no client holds it and it is idle, after this grace (20 s by default): the
#: tray leaves its session to Hermes (it never asks Hermes to close it at disconnect: a turn still running there
#: must outlive the tray), so back-to-back resumes of one session wait for it; short here to keep the tests quick.
REAP_GRACE = {"HERMES_TUI_WS_ORPHAN_REAP_GRACE_S": "3"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, seeded_home: tuple[Path, str], hermes_python: Path):
    """One real dashboard for a copy of the seeded home: (home, key, dashboard process, port)."""
    src, key = seeded_home
    home = tmp_path_factory.mktemp("dash") / "hermes-home"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock", "logs"))
    with running_dashboard(hermes_python, home, env=REAP_GRACE) as (proc, port):
        yield home, key, proc, port


class GatewayWatch:
    """Samples the process table while a resume runs: any ``python -m tui_gateway.entry`` serving ``home``
    (the capability probe, ``python -c`` naming the module in its code, is not a gateway).

    A gateway's own children (git probes, the slash worker, ``ps``) carry its command line and
    environment between fork and exec, so a sample can catch one looking like a second gateway
    (CI saw it once). Only gateways whose parent is not a gateway count: that is the number the
    tray started (or anything else started), never a gateway's half-born child.
    """

    def __init__(self, home: Path) -> None:
        self.home = os.path.realpath(home)
        self.parents: dict[int, int] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    @property
    def seen(self) -> set[int]:
        return {pid for pid, ppid in self.parents.items() if ppid not in self.parents}

    def _loop(self) -> None:
        while not self._stop.is_set():
            for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
                try:
                    argv = p.info["cmdline"] or []
                    is_gateway = any(a == "-m" and argv[i + 1:i + 2] == ["tui_gateway.entry"] for i, a in enumerate(argv))
                    if is_gateway and \
                            os.path.realpath(p.environ().get("HERMES_HOME", "")) == self.home:
                        self.parents.setdefault(p.info["pid"], p.info["ppid"])
                except (psutil.Error, OSError):
                    continue
            self._stop.wait(0.05)

    def __enter__(self) -> GatewayWatch:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(5)


def window_client(home: Path) -> tuple[RpcSession, int]:
    backend, why = find_live_backend(home)
    assert backend is not None, why
    s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid))
    s.start()
    s.wait_ready(10)
    return s, backend.pid


def live_copies(home: Path, key: str) -> list[dict]:
    s, _pid = window_client(home)
    try:
        return [r for r in s.request("session.active_list", {}, 10)["sessions"] if r.get("session_key") == key]
    finally:
        s.shutdown()


def wait_released(home: Path, key: str, timeout: float = 40.0) -> None:
    """Until the dashboard holds no live copy of the session (an earlier test's, let go after Hermes' grace)."""
    deadline = time.monotonic() + timeout
    while live_copies(home, key):
        assert time.monotonic() < deadline, "Hermes never let go of the session nobody holds"
        time.sleep(0.5)


def test_resume_runs_once_inside_the_dashboard_and_starts_no_gateway(shared, mock_llm: MockOpenAI, env):
    home, key, dash, port = shared
    backend, why = find_live_backend(home)
    assert backend is not None and backend.pid == dash.pid and backend.port == port, why
    assert backend.token_source == "page"  # the launcher set no token: the page's
    before = transcript(home, key)
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with GatewayWatch(home) as watch:
        p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
        out, err = p.communicate(timeout=150)
    assert p.returncode == 0, err
    result = json.loads(out)
    assert result["outcome"] == "completed" and result["continued_by"] == "tray" and result["attempt"] == 1
    assert result["ran_in"] == "running-backend" and result["backend_pid"] == dash.pid
    assert result["where"] == f"in your running Hermes (pid {dash.pid})" and result["fallback_reason"] is None
    assert watch.seen == set(), f"a tui_gateway.entry process was started for the home: {watch.parents}"
    (req,) = continuations(mock_llm, since)
    assert req.last_user_text() == continuation_note(SEED_PROMPT)
    assert len(turn_requests(mock_llm, since)) == 1
    after = transcript(home, key)
    assert after[:len(before)] == before
    assert after[len(before)] == ("user", continuation_note(SEED_PROMPT))
    assert after[len(before) + 1][0] == "assistant"
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]
    assert dash.poll() is None  # the user's backend keeps running
    # The tray leaves the session to Hermes, which lets it go once idle with no client: after its grace the
    # dashboard holds no live copy of the session (the tray never closes it for everyone).
    wait_released(home, key, timeout=30)


def test_two_racing_resumes_run_one_continuation_in_the_dashboard(shared, mock_llm: MockOpenAI, env):
    home, key, dash, _port = shared
    wait_released(home, key)
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    procs = [cli("resume", key, "--home", str(home), "--wait", env=env) for _ in range(2)]
    outs = [p.communicate(timeout=150) for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 1], outs
    assert len(continuations(mock_llm, since)) == 1
    assert len(turn_requests(mock_llm, since)) == 1
    assert key not in list_turn_markers(home)


def test_a_window_holding_the_session_keeps_its_events_and_the_tray_starts_nothing(shared, mock_llm, env):
    home, key, dash, _port = shared
    wait_released(home, key)
    entry = plant_marker(home, key, SEED_PROMPT)
    window, _pid = window_client(home)  # stands in for the Desktop window that has the session open
    try:
        sid = window.request("session.resume", {"session_id": key}, 30)["session_id"]
        since = len(mock_llm.completions())
        with GatewayWatch(home) as watch:
            p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
            out, err = p.communicate(timeout=150)
        assert p.returncode == 1, (out, err)
        result = json.loads(out)
        assert result["outcome"] == "refused" and "open in your Hermes app" in result["message"]
        assert watch.seen == set() and turn_requests(mock_llm, since) == []  # nothing, anywhere
        assert list_turn_markers(home)[key] == entry
        # The window's own turn still streams to the window.
        window.request("prompt.submit", {"session_id": sid, "text": "One more check, please."}, 30)
        seen: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and "message.complete" not in seen:
            try:
                ev = window.events.get(timeout=0.5)
            except Exception:
                continue
            if isinstance(ev, dict) and ev.get("session_id") == sid:
                seen.append(str(ev.get("type")))
        assert "message.start" in seen and "message.complete" in seen
        window.request("session.close", {"session_id": sid}, 30)
    finally:
        window.shutdown()


def test_the_dashboard_killed_mid_continuation_is_interrupted_counted_and_never_doubled(shared, mock_llm, env,
                                                                                       hermes_python):
    # Last user of the shared dashboard: it is SIGKILLed here.
    home, key, dash, _port = shared
    wait_released(home, key)
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    mock_llm.hold()  # the model "thinks" until released: the turn is reliably mid-run
    try:
        p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not continuations(mock_llm, since):
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        assert continuations(mock_llm, since), "the continuation never reached the model"
        running = list_turn_markers(home)[key]
        assert running["attempts"] == 1 and running["writer_pid"] == dash.pid
        assert marker_writer_state(running) == "alive"
        os.kill(dash.pid, signal.SIGKILL)  # the backend dies mid-turn
        out, err = p.communicate(timeout=60)
    finally:
        mock_llm.release()
    assert p.returncode == 3, (out, err)
    result = json.loads(out)
    assert result["outcome"] == "crashed" and result["ran_in"] == "running-backend"
    assert f"running Hermes (pid {dash.pid}) exited mid-turn" in result["message"]
    dash.wait(timeout=10)
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and m["prompt"] == SEED_PROMPT and marker_writer_state(m) == "dead"
    st = status_of(home, key, env)
    assert st["verdict"] == "actionable" and st["attempts"] == 1
    assert journal_events(key) == ["approved", "continuing", "dispatched", "failed"]
    time.sleep(1.0)
    assert len(continuations(mock_llm, since)) == 1  # never doubled
    # The user restarts their Hermes: the next resume continues once, inside the new one, as attempt 2.
    with running_dashboard(hermes_python, home) as (again, _port2):
        p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
        out, err = p.communicate(timeout=150)
        assert p.returncode == 0, (out, err)
        result = json.loads(out)
        assert result["ran_in"] == "running-backend" and result["backend_pid"] == again.pid != dash.pid
        assert result["attempt"] == 2
    assert len(continuations(mock_llm, since)) == 2
    assert key not in list_turn_markers(home)


def test_token_from_the_environment_then_the_dashboard_stopped_means_one_spawned_continuation(
        real_home, hermes_python, mock_llm, env):
    home, key = real_home
    proc, _port = start_dashboard(hermes_python, home, env={"HERMES_DASHBOARD_SESSION_TOKEN": TOKEN})
    try:
        backend, why = find_live_backend(home)
        assert backend is not None and backend.token_source == "environment", why
        assert backend.token.reveal() == TOKEN
        s, _pid = window_client(home)
        s.shutdown()
    finally:
        stop_dashboard(proc)  # stopped before the resume
    assert not pid_running(proc.pid)
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with GatewayWatch(home) as watch:
        p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
        out, err = p.communicate(timeout=150)
    assert p.returncode == 0, err
    result = json.loads(out)
    assert result["ran_in"] == "separate-process" and result["fallback_reason"] == NO_BACKEND
    assert len(watch.seen) == 1, watch.parents  # the watch sees a spawned gateway when there is one
    assert len(continuations(mock_llm, since)) == 1
    assert TOKEN not in out + err


def test_a_gated_page_means_a_spawned_continuation_and_says_why(real_home, mock_llm, env, sims):
    # A process that looks like `hermes dashboard` for this home but serves a gated page (sign-in required).
    from hermes_tray.demo.sim_backend import write_control
    from tests.support.sim_homes import running_sim_dashboard

    home, key = real_home
    write_control(home, dashboard_gated=True)
    assert sims["legacy"].python is not None
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_sim_dashboard(Path(sims["legacy"].python).parent.parent, home):
        p = cli("resume", key, "--home", str(home), "--wait", "--json", env=env)
        out, err = p.communicate(timeout=150)
    assert p.returncode == 0, err
    result = json.loads(out)
    assert result["ran_in"] == "separate-process" and "gated mode" in result["fallback_reason"]
    assert "Not in your running Hermes" in result["message"]
    assert len(continuations(mock_llm, since)) == 1
    assert key not in list_turn_markers(home)
