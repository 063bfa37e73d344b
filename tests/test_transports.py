"""The same continuation driver tests on both transports: a spawned stdio gateway, and the running
backend's /api/ws (the simulated ``hermes dashboard``, a real process with a real WebSocket server).

Real processes, real marker files, a real SIGKILL of the backend mid-turn.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from hermes_tray.demo import sim_state
from hermes_tray.demo.sim_backend import write_control
from hermes_tray_core.backend.install import HermesInstall
from hermes_tray_core.backend.running import find_live_backend
from hermes_tray_core.continuing import gateway
from hermes_tray_core.hermes.note import NOTE_PREFIX, continuation_note
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.vocab import Outcome, RanIn
from tests.support.sim_homes import (
    make_home,
    pid_running,
    plant_marker,
    read_turns,
    running_sim_dashboard,
    turn_of,
)

PROMPT = "Rename the config loader and update its callers."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3, progress_interval=0.1)


TRANSPORTS = ["stdio", "websocket"]


def sim_root(install: HermesInstall) -> Path:
    assert install.python is not None
    return Path(install.python).parent.parent


class Driver:
    """Runs a continuation over one transport; ``writer_pid`` is the process that ran it."""

    def __init__(self, kind: str, sims: dict, stack: contextlib.ExitStack) -> None:
        self.kind, self.sims, self.stack = kind, sims, stack
        self.backend_proc = None

    def run(self, home: Path, key: str, cap: str, **kw) -> gateway.ContinuationResult:
        kw.setdefault("options", FAST)
        turn = turn_of(home, key, kw.pop("prompt", PROMPT), attempts=kw.pop("attempts", 0),
                       expected=kw.pop("expected", None))
        if self.kind == "stdio":
            return gateway.continue_turn(turn, self.sims[cap], **kw)
        if self.backend_proc is None:
            self.backend_proc, _port = self.stack.enter_context(running_sim_dashboard(sim_root(self.sims[cap]), home))
        backend, why = find_live_backend(home)
        assert backend is not None, why
        assert backend.pid == self.backend_proc.pid
        return gateway.continue_in_backend(turn, backend, **kw)

    def writer_pid(self, res: gateway.ContinuationResult) -> int | None:
        return res.gateway_pid if self.kind == "stdio" else res.backend_pid


@pytest.fixture(params=TRANSPORTS)
def driver(request, sims):
    with contextlib.ExitStack() as stack:
        yield Driver(request.param, sims, stack)


def test_legacy_backend_gets_the_note_and_the_tray_keeps_the_marker(driver, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.6)
    plant_marker(home, key, PROMPT)
    during: list[dict] = []
    res = driver.run(home, key, "legacy", listener=gateway.Callbacks(on_dispatched=lambda r: during.append(dict(list_turn_markers(home)[key]))))
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.continued_by == "tray" and res.attempt == 1
    (m,) = during  # attempts + 1, the ORIGINAL prompt, the process running the turn as writer (alive)
    assert m["attempts"] == 1 and m["prompt"] == PROMPT and m["writer_pid"] == driver.writer_pid(res)
    assert key not in list_turn_markers(home)
    assert [t["kind"] for t in read_turns(home)] == ["note"]
    assert sim_state.messages(home, key)[0] == ("user", continuation_note(PROMPT))
    assert res.timings["first_frame"] > 0
    if driver.kind == "websocket":
        assert res.ran_in == RanIn.RUNNING_BACKEND and res.gateway_pid is None
        assert res.where == f"in your running Hermes (pid {res.backend_pid})"
        assert pid_running(res.backend_pid)  # the user's backend is never stopped by the tray
    else:
        assert res.ran_in == RanIn.SEPARATE_PROCESS and res.where == "in a separate Hermes process"
        assert not pid_running(res.gateway_pid)


def test_backend_with_the_feature_continues_by_itself_and_no_note_is_sent(driver, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    plant_marker(home, key, PROMPT)
    res = driver.run(home, key, "auto-continue")
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.continued_by == "backend" and res.attempt == 1
    assert [t["kind"] for t in read_turns(home)] == ["auto-continue"]
    assert key not in list_turn_markers(home)
    user_msgs = [c for r, c in sim_state.messages(home, key) if r == "user"]
    assert len(user_msgs) == 1 and user_msgs[0].startswith(NOTE_PREFIX)


@pytest.mark.parametrize("cap", ["legacy", "auto-continue"])
def test_a_backend_that_dies_mid_continuation_leaves_the_marker_counted(driver, tmp_path, cap):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    plant_marker(home, key, PROMPT)
    write_control(home, die_mid_turn=True)  # the process running the turn SIGKILLs itself halfway
    res = driver.run(home, key, cap)
    assert res.outcome == Outcome.CRASHED and res.dispatched, res.message
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and m["prompt"] == PROMPT
    assert m["writer_pid"] == driver.writer_pid(res) and marker_writer_state(m) == "dead"
    assert "can be continued again" in res.message
    assert len(read_turns(home)) == 1


@pytest.mark.parametrize("cap", ["legacy", "auto-continue"])
def test_the_tray_quitting_leaves_the_continuation_as_it_would_be_without_the_tray(driver, tmp_path, cap):
    from hermes_tray_core import StopReason, StopRequest

    home, key = make_home(tmp_path / "home", turn_seconds=2.0)
    plant_marker(home, key, PROMPT)
    stop = StopRequest()
    res = driver.run(home, key, cap, stop=stop, listener=gateway.Callbacks(on_dispatched=lambda r: stop.request(StopReason.SHUTDOWN)))
    assert res.stopped_by == StopReason.SHUTDOWN, res.message
    # in the running backend or in the Hermes the tray started (behind its keeper): the tray only stops following;
    # the turn finishes there, once
    assert res.outcome == Outcome.DETACHED and pid_running(driver.writer_pid(res)), res.message
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and [r for r, _c in sim_state.messages(home, key)][-1:] != ["assistant"]:
        time.sleep(0.05)
    assert [r for r, _c in sim_state.messages(home, key)][-2:] == ["user", "assistant"]
    if cap == "auto-continue":  # Hermes retires its own marker at the end of the turn (just after its answer)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and key in list_turn_markers(home):
            time.sleep(0.05)
        assert key not in list_turn_markers(home)
    else:  # the tray's marker names the process that ran it; the next scan settles it from state.db
        assert list_turn_markers(home)[key]["writer_pid"] == driver.writer_pid(res)
    assert len(read_turns(home)) == 1
    if driver.kind == "stdio":  # once the turn is over its keeper ends it: nothing is left behind
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and pid_running(res.gateway_pid):
            time.sleep(0.05)
        assert not pid_running(res.gateway_pid)


def test_stop_interrupts_and_retires_the_marker(driver, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    plant_marker(home, key, PROMPT)
    stop = threading.Event()
    res = driver.run(home, key, "legacy", stop=stop, listener=gateway.Callbacks(on_dispatched=lambda r: stop.set()))
    assert res.outcome == Outcome.INTERRUPTED, res.message
    assert key not in list_turn_markers(home)
    assert len(read_turns(home)) == 1


def test_a_skip_that_lands_first_wins_and_nothing_is_submitted(driver, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    shown = plant_marker(home, key, PROMPT)
    plant_marker(home, key, PROMPT, attempts=1)  # changed since it was shown (another attempt, a skip…)
    res = driver.run(home, key, "legacy", expected=shown)
    assert res.outcome == Outcome.DECLINED and res.marker_changed and not res.dispatched
    assert read_turns(home) == []


def _window(home):
    from hermes_tray_core.backend.rpc import RpcSession
    from hermes_tray_core.backend.websocket import WebSocketTransport

    backend, _ = find_live_backend(home)
    assert backend is not None
    s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid))
    s.start()
    s.wait_ready(5)
    return s


def test_a_session_only_the_tray_held_is_let_go_by_hermes_once_idle_after_the_tray_leaves(driver, tmp_path, sims):
    # The tray sends no session.close and no close_on_disconnect: Hermes parks the session the tray leaves and lets
    # it go once idle after its grace (here 0.5 s), as it does for any client that goes away.
    home, key = make_home(tmp_path / "home", turn_seconds=0.2)
    write_control(home, dashboard_orphan_grace=0.5)
    plant_marker(home, key, PROMPT)
    res = driver.run(home, key, "legacy")
    assert res.outcome == Outcome.COMPLETED
    if driver.kind != "websocket":
        return
    s = _window(home)
    try:
        deadline = time.monotonic() + 5
        while s.request("session.active_list", {}, 5)["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.request("session.active_list", {}, 5)["sessions"] == []
    finally:
        s.shutdown()


def test_a_window_that_took_the_session_during_the_continuation_keeps_it(driver, tmp_path, sims):
    home, key = make_home(tmp_path / "home", turn_seconds=1.5)
    plant_marker(home, key, PROMPT)
    if driver.kind != "websocket":
        return
    held: list = []

    def window_opens(_res: object) -> None:
        s = _window(home)
        held.append((s, s.request("session.resume", {"session_id": key}, 5)["session_id"]))

    res = driver.run(home, key, "legacy", listener=gateway.Callbacks(on_dispatched=window_opens))
    assert res.outcome == Outcome.COMPLETED and res.finish == "state-db", res.message
    (s, sid), = held
    try:
        assert s.request("prompt.submit", {"session_id": sid, "text": "and one more thing"}, 5)["status"] == "streaming"
    finally:
        s.shutdown()


def test_stop_leaves_alone_a_session_a_window_took_and_says_so(driver, tmp_path, sims):
    # Stop asked after a window resumed the session: the tray cannot tell its turn is its own alone any more, so
    # it sends no session.interrupt; the turn runs on to its end in the window.
    home, key = make_home(tmp_path / "home", turn_seconds=2.0)
    plant_marker(home, key, PROMPT)
    if driver.kind != "websocket":
        return
    stop = threading.Event()
    held: list = []

    def window_opens_then_stop(_res: object) -> None:
        s = _window(home)
        held.append((s, s.request("session.resume", {"session_id": key}, 5)["session_id"]))
        stop.set()

    res = driver.run(home, key, "legacy", stop=stop, listener=gateway.Callbacks(on_dispatched=window_opens_then_stop))
    (s, _sid), = held
    try:
        assert res.finish == "left-alone" and "another client" in (res.left_alone or ""), res.message
        assert "Not stopped by the tray" in res.message
        deadline = time.monotonic() + 10
        while sim_state.messages(home, key)[-1][0] != "assistant" and time.monotonic() < deadline:
            time.sleep(0.05)
        role, text = sim_state.messages(home, key)[-1]
        assert role == "assistant" and "[interrupted]" not in text  # the turn ran to its end: never interrupted
    finally:
        s.shutdown()
