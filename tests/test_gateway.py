"""hermes_tray_core.continuing.gateway against the simulated backend: real processes, real marker files, real pipes."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes_tray.demo import sim_state
from hermes_tray.demo.sim_backend import write_control
from hermes_tray.demo.sim_install import create_sim_install, sim_command
from hermes_tray_core.backend import capabilities
from hermes_tray_core.backend.capabilities import clear_capability_cache, probe_capabilities
from hermes_tray_core.backend.install import (
    HermesInstall,
    find_hermes,
    gateway_environment,
    install_from_command,
)
from hermes_tray_core.backend.rpc import HermesNotFound
from hermes_tray_core.backend.stdio import stdio_session
from hermes_tray_core.continuing import gateway
from hermes_tray_core.continuing.listener import Callbacks
from hermes_tray_core.hermes.note import continuation_note
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.vocab import Outcome, StopReason
from tests.support.sim_homes import make_home, pid_running, plant_marker, read_turns, turn_of

PROMPT = "Fix the flaky test in tests/test_io.py and run the suite."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3, progress_interval=0.1)




def run(home: Path, key: str, install: HermesInstall, *, attempts: int = 0, prompt: str = PROMPT,
        options: gateway.GatewayOptions = FAST, expected: dict | None = None, **kw) -> gateway.ContinuationResult:
    return gateway.continue_turn(turn_of(home, key, prompt, attempts=attempts, expected=expected), install,
                                 options=options, **kw)


# ── finding Hermes ──────────────────────────────────────────────────────────────────────────────


def test_finds_hermes_on_path_through_its_launcher_shebang(sims, tmp_path):
    launcher = create_sim_install(tmp_path / "inst", "legacy")
    found = find_hermes(None, path=str(launcher.parent))
    assert found.source == "PATH"
    assert found.argv == (str(tmp_path / "inst" / "bin" / "python"), "-m", "tui_gateway.entry")


def test_missing_hermes_says_what_to_do(tmp_path):
    with pytest.raises(HermesNotFound, match="hermes_command"):
        find_hermes(None, path=str(tmp_path))


def test_hermes_command_forms():
    py = sys.executable
    assert install_from_command([py]).argv == (py, "-m", "tui_gateway.entry")
    full = install_from_command([py, "-X", "utf8", "-m", "tui_gateway.entry"])
    assert full.argv == (py, "-X", "utf8", "-m", "tui_gateway.entry") and full.python == py
    odd = install_from_command(["/opt/wrapper.sh", "--gateway"])
    assert odd.python is None
    caps = probe_capabilities(odd)
    assert caps.auto_continue is None and "hermes_command" in caps.detail


def test_environment_sets_home_and_drops_tray_internals(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TUI_SIDECAR_URL", "ws://elsewhere")
    env = gateway_environment(tmp_path / "h")
    assert env["HERMES_HOME"] == str(tmp_path / "h")
    assert not [k for k in env if k.startswith("HERMES_TRAY_")]
    assert "HERMES_TUI_SIDECAR_URL" not in env


def test_frozen_app_gives_hermes_the_users_library_path(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    base = {"LD_LIBRARY_PATH": "/bundle/lib", "LD_LIBRARY_PATH_ORIG": "/usr/local/lib",
            "DYLD_LIBRARY_PATH": "/bundle", "PATH": "/usr/bin", "_PYI_APPLICATION_HOME_DIR": "/bundle"}
    env = gateway_environment(tmp_path, base)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/lib"
    assert "DYLD_LIBRARY_PATH" not in env  # set by the bootloader, the user had none
    assert "LD_LIBRARY_PATH_ORIG" not in env and "_PYI_APPLICATION_HOME_DIR" not in env


# ── capabilities ────────────────────────────────────────────────────────────────────────────────


def test_capability_is_asked_of_the_installation_and_cached(sims, tmp_path, monkeypatch):
    clear_capability_cache()
    assert probe_capabilities(sims["auto-continue"]).auto_continue is True
    assert probe_capabilities(sims["legacy"]).auto_continue is False
    calls = []
    real_run = capabilities.subprocess.run
    monkeypatch.setattr(capabilities.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    assert probe_capabilities(sims["legacy"]).auto_continue is False
    assert calls == []  # cached per interpreter


def test_an_upgrade_that_adds_the_feature_is_noticed(tmp_path):
    clear_capability_cache()
    create_sim_install(tmp_path / "inst", "legacy")
    inst = install_from_command(sim_command(tmp_path / "inst"))
    assert probe_capabilities(inst).auto_continue is False
    time.sleep(0.02)
    create_sim_install(tmp_path / "inst", "auto-continue")  # adds tui_gateway/turn_marker.py
    pkg = tmp_path / "inst" / "sim-packages" / "tui_gateway"
    os.utime(pkg, (time.time() + 5, time.time() + 5))
    assert probe_capabilities(inst).auto_continue is True


def test_the_demo_install_is_named_as_the_simulated_hermes_it_is(sims):
    """Before: the demo's About said "version unknown at …/hermes-install/bin/python"."""
    from hermes_tray.demo import SIMULATED_DISTRIBUTION, hermes_label

    clear_capability_cache()
    caps = probe_capabilities(sims["auto-continue"])
    assert caps.distribution == SIMULATED_DISTRIBUTION
    assert hermes_label(caps.version, caps.distribution) == "simulated Hermes (demo)"


def test_without_distribution_metadata_the_version_is_what_hermes_version_says(tmp_path):
    """A Hermes whose gateway no installed distribution declares (a source checkout on the path): the version
    comes from its own ``hermes --version``, run through the launcher of that very interpreter."""
    from hermes_tray.demo import hermes_label

    launcher = create_sim_install(tmp_path / "inst", "auto-continue")
    for info in (tmp_path / "inst" / "sim-packages").glob("*.dist-info"):
        import shutil

        shutil.rmtree(info)
    shebang = launcher.read_text().splitlines()[0]
    launcher.write_text(f"{shebang}\nimport sys\nif sys.argv[1:] == ['--version']:\n"
                        "    print('Hermes Agent v1.2.3 (2026.1.1)')\n    print('Python: 3.11.7')\n")
    clear_capability_cache()
    caps = probe_capabilities(install_from_command(sim_command(tmp_path / "inst")))
    assert caps.auto_continue is True and caps.distribution is None
    assert caps.version == "1.2.3" and hermes_label(caps.version, caps.distribution) == "Hermes 1.2.3"


def test_an_interpreter_without_hermes_is_not_guessed(tmp_path):
    caps = probe_capabilities(install_from_command([sys.executable]),
                                      env=gateway_environment(tmp_path), use_cache=False)
    assert caps.auto_continue is None
    res = gateway.continue_turn(turn_of(tmp_path, "s1", "x"), install_from_command([sys.executable]))
    assert res.outcome == Outcome.ERROR and not res.dispatched and "tui_gateway" in res.message


# ── continuations ───────────────────────────────────────────────────────────────────────────────


def test_legacy_backend_gets_the_note_and_the_tray_keeps_the_marker(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.6)
    plant_marker(home, key, PROMPT)
    during: list[dict] = []
    progress: list[gateway.Progress] = []

    def dispatched(res: gateway.ContinuationResult) -> None:
        during.append(dict(list_turn_markers(home)[key]))

    res = run(home, key, sims["legacy"], listener=Callbacks(on_dispatched=dispatched, on_progress=progress.append))
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.continued_by == "tray" and res.attempt == 1
    assert res.answer == "Simulated Hermes: the task is finished."
    # While it ran: attempts + 1, the ORIGINAL prompt (never the note), the gateway child as writer.
    (m,) = during
    assert m["attempts"] == 1 and m["prompt"] == PROMPT and m["writer_pid"] == res.gateway_pid
    # Concluded: the marker is gone, the gateway has exited, one turn carried the note.
    assert key not in list_turn_markers(home)
    assert not pid_running(res.gateway_pid)
    turns = read_turns(home)
    assert [t["kind"] for t in turns] == ["note"]
    msgs = sim_state.messages(home, key)
    assert msgs[0] == ("user", continuation_note(PROMPT))
    assert {p.phase for p in progress} >= {"starting", "resuming", "running"}
    assert any(p.last_frame == "message.delta" for p in progress)
    assert res.timings["ready"] > 0 and res.timings["first_frame"] > 0


def test_marker_kept_for_legacy_run_reads_running_while_it_runs(sims, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    plant_marker(home, key, PROMPT)
    states: list[str] = []
    res = run(home, key, sims["legacy"], listener=Callbacks(
        on_dispatched=lambda r: states.append(marker_writer_state(list_turn_markers(home)[key]))))
    assert res.outcome == Outcome.COMPLETED
    assert states == ["alive"]



def test_a_listener_that_fails_at_every_event_never_costs_the_turn(sims, tmp_path, caplog):
    """The shell's handlers are bookkeeping: each one raising is logged, and the turn still runs to its answer."""
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    plant_marker(home, key, PROMPT)
    heard: list[str] = []

    def fail(event: str):
        def handler(_arg: object) -> None:
            heard.append(event)
            raise RuntimeError(f"the shell broke on {event}")
        return handler

    res = run(home, key, sims["legacy"], listener=Callbacks(
        on_progress=fail("progress"), on_connected=fail("connected"), on_submitting=fail("submitting"),
        on_dispatched=fail("dispatched")))
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.answer == "Simulated Hermes: the task is finished."
    assert {"progress", "connected", "submitting", "dispatched"} <= set(heard)
    assert "the continuation's listener failed on dispatched" in caplog.text
    assert key not in list_turn_markers(home)

@pytest.mark.skipif(sys.platform == "win32", reason="the fake Hermes process uses the POSIX shebang form")
def test_backend_with_the_feature_that_declines_gets_nothing_submitted(sims, tmp_path, clock_step):
    home, key = make_home(tmp_path / "home")
    # A live writer (another Hermes process serving this home, mid-turn): the backend must leave it alone,
    # and so must the tray — also when the clock steps between the writer's start and the resume.
    from hermes_tray_core.process.identity import identity_of
    from tests.support.fake_hermes import fake_hermes

    with fake_hermes("gateway", tmp_path, env={"HERMES_HOME": str(home)}) as (writer, _port):
        plant_marker(home, key, PROMPT, writer=identity_of(writer.pid))
        before = dict(list_turn_markers(home)[key])
        clock_step.step()
        res = run(home, key, sims["auto-continue"])
    assert res.outcome == Outcome.DECLINED and not res.dispatched
    assert res.not_continued == "writer-alive" and "its writer" in res.message and "still running" in res.message
    assert read_turns(home) == []
    assert list_turn_markers(home)[key] == before


@pytest.mark.parametrize("cap", ["legacy", "auto-continue"])
def test_a_continuation_that_dies_leaves_its_marker_for_the_next_attempt(sims, tmp_path, cap):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    plant_marker(home, key, PROMPT)
    write_control(home, die_mid_turn=True)
    res = run(home, key, sims[cap])
    assert res.outcome == Outcome.CRASHED and res.dispatched
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and m["prompt"] == PROMPT
    assert m["writer_pid"] == res.gateway_pid and marker_writer_state(m) == "dead"


def test_the_continuation_marker_keeps_the_diagnostic_category_and_its_completion_mark(sims, tmp_path):
    from hermes_tray_core.continuing.completion import MARK_KEYS, mark_of, note_digest
    from hermes_tray_core.markers.entries import build_entry
    from hermes_tray_core.markers.store import MarkerStore

    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    diag = build_entry(PROMPT, notification_category="diagnostic", now=time.time() - 5)
    diag.update(writer_pid=2**22 + 7)  # a writer that is gone
    MarkerStore(home).record(key, PROMPT)  # so the file exists for the swap below
    entry = MarkerStore(home).list()[key]
    assert MarkerStore(home).replace_if_unchanged(key, entry, diag)
    before = max((mid for mid in _message_ids(home)), default=0)
    write_control(home, die_mid_turn=True)
    submitted: list[dict] = []
    res = run(home, key, sims["legacy"], expected=diag, listener=Callbacks(on_submitting=submitted.append))
    assert res.outcome == Outcome.CRASHED and res.dispatched
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and m["notification_category"] == "diagnostic"  # as Hermes' own marker carries it
    mark = mark_of(m)
    assert mark is not None and list(m)[-len(MARK_KEYS):] == list(MARK_KEYS)
    assert mark.state_session == key and mark.after_message_id == before
    assert mark.note_sha256 == note_digest(continuation_note(PROMPT))
    assert submitted == [m]  # handed to the caller (the journal) before the note went out


def _message_ids(home: Path) -> list[int]:
    import sqlite3

    conn = sqlite3.connect(home / "state.db")
    try:
        return [r[0] for r in conn.execute("SELECT id FROM messages")]
    finally:
        conn.close()


def test_a_long_continuation_that_keeps_streaming_is_not_cut_off(sims, tmp_path):
    # 3 s of steady frames against a 1 s inactivity limit: progress, so no stop (no total cap).
    home, key = make_home(tmp_path / "home")
    write_control(home, turn_seconds=3.0, deltas=15)
    plant_marker(home, key, PROMPT)
    res = run(home, key, sims["legacy"], options=gateway.GatewayOptions(idle_timeout=1.0, shutdown_grace=2))
    assert res.outcome == Outcome.COMPLETED, res.message
    assert key not in list_turn_markers(home)


def test_stop_interrupts_and_retires_the_marker(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    plant_marker(home, key, PROMPT)
    stop = threading.Event()
    seen: list[gateway.Progress] = []

    def progress(p: gateway.Progress) -> None:
        seen.append(p)
        if p.last_frame == "message.delta":
            stop.set()

    t0 = time.monotonic()
    res = run(home, key, sims["legacy"], stop=stop, listener=Callbacks(on_progress=progress))
    assert res.outcome == Outcome.INTERRUPTED and res.status == "interrupted"
    assert res.stopped_by == StopReason.USER  # the journal says "stopped by you", not "interrupted in Hermes"
    assert time.monotonic() - t0 < 10
    assert key not in list_turn_markers(home)  # a confirmed Stop is never continued again
    assert not pid_running(res.gateway_pid)
    assert any(p.phase == "stopping" for p in seen)


def test_stop_of_a_backend_continuation_retires_the_marker(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    plant_marker(home, key, PROMPT)
    stop = threading.Event()
    res = run(home, key, sims["auto-continue"], stop=stop,
              listener=Callbacks(on_progress=lambda p: stop.set() if p.last_frame == "message.delta" else None))
    assert res.outcome == Outcome.INTERRUPTED
    assert key not in list_turn_markers(home)


def test_backend_that_never_becomes_ready_times_out_and_nothing_is_left(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_ready=True)
    entry = plant_marker(home, key, PROMPT)
    opts = gateway.GatewayOptions(ready_timeout=1.0, shutdown_grace=1.0)
    t0 = time.monotonic()
    res = run(home, key, sims["legacy"], options=opts)
    assert res.outcome == Outcome.TIMED_OUT and not res.dispatched
    assert "did not become ready within 1s" in res.message and "still pending" in res.message
    assert time.monotonic() - t0 < 8
    assert not pid_running(res.gateway_pid)
    assert list_turn_markers(home)[key] == entry  # untouched: still actionable


def test_turn_that_never_finishes_times_out_and_is_stopped(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    plant_marker(home, key, PROMPT)
    opts = gateway.GatewayOptions(idle_timeout=1.5, stop_grace=3, shutdown_grace=2)
    res = run(home, key, sims["legacy"], options=opts)
    assert res.outcome == Outcome.TIMED_OUT and res.dispatched
    assert "no activity for 1.5s" in res.message
    assert not pid_running(res.gateway_pid)
    assert key not in list_turn_markers(home)


def test_unknown_session_is_an_error_not_a_turn(sims, tmp_path):
    home, _key = make_home(tmp_path / "home")
    res = run(home, "20200101_000000_nosuch", sims["legacy"])
    assert res.outcome == Outcome.ERROR and "session not found" in res.message
    assert read_turns(home) == []


def test_gateway_stderr_goes_to_a_private_log(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    plant_marker(home, key, PROMPT)
    res = run(home, key, sims["legacy"])
    log = Path(res.log_path or "")
    assert log.exists() and (log.stat().st_mode & 0o777) == 0o600
    assert PROMPT not in log.read_text(encoding="utf-8", errors="replace")


def test_your_stop_before_hermes_is_ready_ends_the_turn_for_good(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_ready=True)
    entry = plant_marker(home, key, PROMPT)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    res = run(home, key, sims["legacy"], stop=stop, options=gateway.GatewayOptions(shutdown_grace=1.0),
              expected=entry)
    assert res.outcome == Outcome.INTERRUPTED and not res.dispatched and "not resumed again" in res.message
    assert res.stopped_by == StopReason.USER  # History: "stopped before it started"
    assert not pid_running(res.gateway_pid)
    assert key not in list_turn_markers(home)  # a Stop is final: Hermes' own resume will not continue it either


def test_the_tray_quitting_before_hermes_is_ready_leaves_the_turn_waiting(sims, tmp_path):
    from hermes_tray_core import StopRequest

    home, key = make_home(tmp_path / "home")
    write_control(home, never_ready=True)
    entry = plant_marker(home, key, PROMPT)
    stop = StopRequest()
    threading.Timer(0.5, stop.request, args=(StopReason.SHUTDOWN,)).start()
    res = run(home, key, sims["legacy"], stop=stop, options=gateway.GatewayOptions(shutdown_grace=1.0))
    assert res.outcome == Outcome.INTERRUPTED and not res.dispatched and "still waiting" in res.message
    assert res.stopped_by == StopReason.SHUTDOWN  # never "stopped by you"
    assert not pid_running(res.gateway_pid)
    assert list_turn_markers(home)[key] == entry  # untouched: offered again


# ── the gateway's process group ─────────────────────────────────────────────────────────────────


def tool_pids(home: Path) -> list[int]:
    from hermes_tray.demo.sim_backend import TOOL_PIDS_FILE

    try:
        return [int(x) for x in (home / TOOL_PIDS_FILE).read_text().split()]
    except OSError:
        return []


def wait_gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(os.name == "nt", reason="POSIX process groups")
def test_shutdown_stops_hermes_tool_subprocesses_with_the_gateway(sims, tmp_path):
    # The turn runs a "tool" (a grandchild); the gateway does not exit at stdin EOF while it runs, so
    # shutdown escalates to SIGTERM — which must reach the tool too, not orphan it.
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2, tool_child_seconds=120)
    plant_marker(home, key, PROMPT)
    opts = gateway.GatewayOptions(idle_timeout=1.0, stop_grace=3, shutdown_grace=1.0)
    res = run(home, key, sims["legacy"], options=opts)
    assert res.outcome == Outcome.TIMED_OUT and res.dispatched
    tools = tool_pids(home)
    try:
        assert len(tools) == 1
        assert not pid_running(res.gateway_pid)
        assert wait_gone(tools), "Hermes' tool subprocess outlived the gateway"
    finally:
        for p in tools:
            with contextlib.suppress(OSError):
                os.kill(p, 9)


@pytest.mark.skipif(os.name == "nt", reason="POSIX process groups")
def test_kill_takes_the_gateways_tool_subprocesses_with_it(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2, tool_child_seconds=120)
    gw = stdio_session(sims["legacy"], home, log_path=tmp_path / "gw.log")
    gw.start()
    tools: list[int] = []
    try:
        gw.wait_ready(20)
        sid = gw.request("session.resume", {"session_id": key}, timeout=20)["session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": "hello"}, timeout=20)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not tools:
            tools = tool_pids(home)
            time.sleep(0.05)
        assert len(tools) == 1 and pid_running(tools[0])
        gw.transport.kill()
        assert gw.transport.proc is not None and gw.transport.proc.wait(timeout=10) is not None
        assert wait_gone(tools), "Hermes' tool subprocess outlived a killed gateway"
    finally:
        gw.shutdown(1.0)
        for p in tools:
            with contextlib.suppress(OSError):
                os.kill(p, 9)


# ── the gateway's stderr log ────────────────────────────────────────────────────────────────────


def test_an_unusable_log_folder_does_not_stop_the_continuation(sims, tmp_path, monkeypatch):
    # The tray's log folder cannot hold the gateway logs (here: "gateway" is a file — as good as EACCES or
    # ENOSPC): Hermes runs with its stderr discarded, the result says so; nothing raises.
    logs = tmp_path / "unusable-logs"
    logs.mkdir()
    (logs / "gateway").write_text("not a folder")
    monkeypatch.setenv("HERMES_TRAY_LOG_DIR", str(logs))
    home, key = make_home(tmp_path / "home")
    plant_marker(home, key, PROMPT)
    res = gateway.continue_turn(turn_of(home, key, PROMPT), sims["legacy"], options=FAST)
    assert res.outcome == Outcome.COMPLETED, res.message
    assert res.log_path is None and res.log_problem
    assert key not in list_turn_markers(home)


def test_a_symlinked_gateway_log_is_not_followed(sims, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "gw.log"
    link.symlink_to(victim)
    home, key = make_home(tmp_path / "home")
    plant_marker(home, key, PROMPT)
    res = run(home, key, sims["legacy"], log_path=link)
    assert res.outcome == Outcome.COMPLETED and res.log_path is None and "symlink" in (res.log_problem or "")
    assert victim.read_text() == "precious\n"


def test_gateway_logs_have_portable_names_and_only_the_newest_20_are_kept(sims, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    monkeypatch.setenv("HERMES_TRAY_LOG_DIR", str(logs))
    name = gateway.gateway_log_path("cron:nightly_20260101").name
    assert ":" not in name and "cron_nightly_20260101" in name
    # two continuations of one tray within the same second each get their own log
    assert gateway.gateway_log_path("same") != gateway.gateway_log_path("same")
    (logs / "gateway").mkdir(parents=True)
    for i in range(25):
        old = logs / "gateway" / f"20200101T0000{i:02d}-s-{i}.log"
        old.write_text("old")
        os.utime(old, (1_600_000_000 + i, 1_600_000_000 + i))
    home, key = make_home(tmp_path / "home")
    plant_marker(home, key, PROMPT)
    res = gateway.continue_turn(turn_of(home, key, PROMPT), sims["legacy"], options=FAST)
    assert res.outcome == Outcome.COMPLETED
    kept = sorted(p.name for p in (logs / "gateway").iterdir())
    assert len(kept) == 20 and Path(res.log_path or "").name in kept
    assert "20200101T000000-s-0.log" not in kept and "20200101T000024-s-24.log" in kept


def test_a_frozen_windows_tray_resets_its_dll_directory_around_the_spawn(sims, tmp_path, monkeypatch):
    # PyInstaller's bootloader calls SetDllDirectoryW(bundle), which children inherit: Hermes must be
    # spawned without it, and the tray gets it back afterwards. (Windows' kernel32 stood in by a recorder.)
    import ctypes
    import types

    calls: list = []
    kernel32 = types.SimpleNamespace(SetDllDirectoryW=lambda p: calls.append(p) or 1)
    monkeypatch.setattr(ctypes, "windll", types.SimpleNamespace(kernel32=kernel32), raising=False)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "bundle"), raising=False)
    monkeypatch.setattr(sys, "platform", "win32")
    home, _key = make_home(tmp_path / "home")
    gw = stdio_session(sims["legacy"], home, log_path=tmp_path / "gw.log",
                       env=gateway_environment(home, dict(os.environ)))
    gw.start()
    try:
        assert calls == [None, str(tmp_path / "bundle")]
    finally:
        gw.shutdown(2)
