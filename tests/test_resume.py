"""hermes_tray_core.continuing.resume and ``hermes-tray resume`` against the simulated backend: exactly once, never over a live turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes_tray.demo import sim_state
from hermes_tray.demo.sim_backend import write_control
from hermes_tray.demo.sim_install import sim_command
from hermes_tray_core.backend.install import HermesInstall, install_from_command, settings_hermes_command
from hermes_tray_core.continuing import gateway
from hermes_tray_core.continuing.claim import claim_name
from hermes_tray_core.continuing.resume import resume_turn
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.lease import LeaseStore
from hermes_tray_core.turn import Turn
from tests.support.sim_homes import make_home, pid_running, plant_marker, read_turns, settings_for

PROMPT = "Migrate the settings loader to TOML and keep the old keys working."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3)


@pytest.fixture
def env(user_dirs: dict[str, str]) -> dict[str, str]:
    """The test's private tray dirs (tests/conftest.py), for subprocess environments."""
    return user_dirs


def install(sim_roots: dict[str, Path], cap: str = "legacy") -> HermesInstall:
    return install_from_command(sim_command(sim_roots[cap]))


def journal_events(key: str) -> list[str]:
    from tests.support import book

    return [e["event"] for e in reversed(book.history(500)) if e.get("session_key") == key]


def test_resume_completes_once_and_journals_each_step(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "completed" and res.exit_code == 0, res.message
    assert key not in list_turn_markers(home)
    assert [t["kind"] for t in read_turns(home)] == ["note"]
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]
    # Never prompt text in the journal.
    journal_dir = Path(env["HERMES_TRAY_STATE_DIR"])
    blob = "".join(p.read_text(encoding="utf-8") for p in journal_dir.rglob("*.jsonl"))
    assert PROMPT not in blob and "Migrate" not in blob
    # The claim is released (and its epoch kept) for the next time.
    from hermes_tray_core.stores.paths import ledger_db as lease_db

    assert LeaseStore(lease_db()).current(claim_name(home, key)) is None


def test_refuses_while_the_writer_is_alive(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        from hermes_tray_core.process.identity import identity_of

        entry = plant_marker(home, key, PROMPT, writer=identity_of(writer.pid))
        res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    finally:
        writer.kill()
        writer.wait()
    assert res.outcome == "refused" and res.exit_code == 1 and res.verdict == "running"
    assert "still running" in res.message and "Continue it in the Hermes window" in res.message
    assert read_turns(home) == []


def test_refuses_when_a_live_hermes_holds_the_turn_lease(sim_roots, env, tmp_path, clock_step):
    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    assert sim_state.acquire_turn_lease(home, key, "t1")  # held by this (live) process
    clock_step.step()
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "refused" and res.verdict == "running"
    assert "turn lease" in res.message
    assert read_turns(home) == []


def test_refuses_when_a_live_hermes_has_the_session_open(sim_roots, env, tmp_path, clock_step):
    from hermes_tray_core.process.identity import own_identity

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    me = own_identity()
    (home / "runtime").mkdir()
    (home / "runtime" / "active_sessions.json").write_text(json.dumps({"entries": [
        {"session_id": key, "pid": me.pid, "process_start_time": me.start_time, "surface": "tui"}]}))
    clock_step.step()
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "refused" and res.verdict == "running"
    assert "has this session open" in res.message and "Continue it in the Hermes window" in res.message
    assert read_turns(home) == []


def test_refuses_a_marker_that_changed_since_it_was_shown(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    shown = plant_marker(home, key, PROMPT)
    plant_marker(home, key, PROMPT, attempts=1)  # another attempt ran meanwhile
    res = resume_turn(Turn.of(home, key, shown), install=install(sim_roots), options=FAST)
    assert res.outcome == "refused" and "changed since it was shown" in res.message
    assert res.code == "changed" and res.to_dict()["code"] == "changed"
    assert read_turns(home) == []


def test_refuses_a_turn_no_longer_marked_with_the_gone_code(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    shown = plant_marker(home, key, PROMPT)
    from hermes_tray_core.markers.store import remove_marker_if_unchanged

    assert remove_marker_if_unchanged(home, key, shown)  # someone else dealt with it meanwhile
    res = resume_turn(Turn.of(home, key, shown), install=install(sim_roots), options=FAST)
    assert res.outcome == "refused" and res.code == "gone" and res.exit_code == 1


def test_refuses_when_another_tray_process_holds_the_claim(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    from hermes_tray_core.stores.paths import ledger_db as lease_db

    store = LeaseStore(lease_db())
    lease = store.acquire(claim_name(home, key), "other-tray", ttl=60)
    assert lease is not None
    try:
        res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    finally:
        store.release(lease)
    assert res.outcome == "refused" and "already resuming" in res.message
    assert res.code == "claimed-elsewhere"  # the tray tells a routine refusal by this code, not the text
    assert read_turns(home) == []


def test_exhausted_budget_gives_up_and_says_so(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", max_attempts=2)
    entry = plant_marker(home, key, PROMPT, attempts=2)
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "gave-up" and res.exit_code == 1
    assert "budget is 2" in res.message
    assert journal_events(key) == ["gave-up"]
    assert read_turns(home) == []


def test_a_crash_at_the_budget_is_reported_as_the_last_attempt(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", max_attempts=1, turn_seconds=1.0)
    entry = plant_marker(home, key, PROMPT)
    write_control(home, die_mid_turn=True)
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "crashed" and res.exit_code == 3
    assert "retry budget is used up" in res.message
    assert journal_events(key) == ["approved", "continuing", "dispatched", "failed", "gave-up"]
    m = list_turn_markers(home)[key]
    assert m["attempts"] == 1 and marker_writer_state(m) == "dead"


# ── the command line ────────────────────────────────────────────────────────────────────────────


def cli(*args: str, env: dict[str, str], **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hermes_tray", *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_cli_two_resumes_at_the_same_instant_run_one_turn(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    procs = [cli("resume", key, "--home", str(home), "--wait", env=env) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], outs
    loser = outs[[p.returncode for p in procs].index(1)]
    winner = outs[[p.returncode for p in procs].index(0)]
    assert "Not resumed" in loser[1]
    # issue 25.7: the loser never said "Resuming … Ctrl-C stops it …" before "Not resumed"
    assert "Resuming" not in loser[0] + loser[1] and "Ctrl-C" not in loser[0] + loser[1], loser
    assert "Resuming" in winner[0] and "Resumed and finished." in winner[0], winner
    assert len(read_turns(home)) == 1
    assert key not in list_turn_markers(home)


def test_cli_without_wait_returns_once_started_and_a_helper_finishes(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=2.0)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    t0 = time.monotonic()
    p = cli("resume", key, "--home", str(home), "--json", env=env)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    info = json.loads(out)
    assert info["outcome"] == "started"
    assert time.monotonic() - t0 < 2.0 + 3.0  # did not wait for the 2 s turn... much
    assert list_turn_markers(home)[key]["writer_pid"] == info["gateway_pid"]  # running now
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and key in list_turn_markers(home):
        time.sleep(0.1)
    assert key not in list_turn_markers(home)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pid_running(info["pid"]):
        time.sleep(0.1)
    assert not pid_running(info["pid"]) and not pid_running(info["gateway_pid"])
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]


def test_cli_ctrl_c_stops_the_continuation_cleanly(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    lines: list[str] = []
    assert p.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any("Hermes is answering…" in ln for ln in lines):
        time.sleep(0.05)
    gw_pid = list_turn_markers(home)[key]["writer_pid"]
    assert any("Ctrl-C stops it for good" in ln for ln in lines)  # said before
    # progress in plain words, never the engine's phases or frame names
    assert any(ln.strip() == "Hermes is answering…" for ln in lines), lines
    assert not any("message.start" in ln or "last frame" in ln or "resuming " in ln for ln in lines), lines
    p.send_signal(signal.SIGINT)
    assert p.stderr is not None
    err = p.stderr.read()
    p.wait(timeout=30)
    reader.join(timeout=5)
    assert p.returncode == 4  # "stopped": its own exit status, not 3 ("failed")
    assert "Stopped. You stopped it. It is not resumed again." in err  # said after
    assert key not in list_turn_markers(home)  # stopped by the user: not continued again
    assert not pid_running(gw_pid)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "interrupted"]
    from tests.support import book

    stop = next(e for e in book.history(500) if e.get("session_key") == key and e["event"] == "interrupted")
    assert stop["stopped_by"] == "you"  # History says "stopped by you", not "interrupted in Hermes"


def _wait(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _roles(home: Path, key: str) -> list[str]:
    return [r for r, _c in sim_state.messages(home, key)]


def _status_turns(home: Path, key: str, env: dict[str, str]) -> list[dict]:
    out, err = cli("status", "--json", "--home", str(home), env=env).communicate(timeout=60)
    return [t for t in json.loads(out)["turns"] if t["session_key"] == key]


@pytest.mark.skipif(os.name == "nt", reason="POSIX job-control signals")
def test_cli_stopped_then_killed_after_hermes_finished_is_settled_from_state_db(sim_roots, env, tmp_path):
    # The kill window: Ctrl-Z (here SIGSTOP, which cannot be refused) after the note reached Hermes, Hermes
    # finishes meanwhile, then `kill -9`. The gateway exits at stdin EOF; its marker (attempts + 1, a dead
    # writer) would read actionable — but state.db has the note and its reply: settled, never run twice.
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    try:
        assert _wait(lambda: _roles(home, key)[-1:] == ["user"]), "the note never reached Hermes"
        os.kill(p.pid, signal.SIGSTOP)
        gw_pid = list_turn_markers(home)[key]["writer_pid"]
        assert _wait(lambda: _roles(home, key)[-1:] == ["assistant"]), "Hermes did not finish"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
    assert _wait(lambda: not pid_running(gw_pid)), "the gateway outlived its client"
    assert key in list_turn_markers(home)  # nobody retired it yet
    assert _status_turns(home, key, env) == []  # status settles it: no row, never actionable
    assert key not in list_turn_markers(home)
    again = cli("resume", key, "--home", str(home), "--wait", env=env)
    _out, err = again.communicate(timeout=60)
    assert again.returncode == 1 and "no interrupted turn" in err
    assert [t["kind"] for t in read_turns(home)] == ["note"]  # Hermes ran exactly one continuation
    # "dispatched" is journalled once Hermes acknowledged the submit; the stop can land before that (a loaded
    # machine), and the journal then says only what the tray saw. Settled as completed either way: the run the
    # killed process left open (core.continuing.orphans) and the marker it kept (core.continuing.completion).
    assert journal_events(key) in (["approved", "continuing", "dispatched", "completed", "completed"],
                                   ["approved", "continuing", "completed"])


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_cli_sigterm_or_sighup_stops_the_continuation_cleanly(sim_roots, env, tmp_path, sig):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    assert _wait(lambda: "assistant" in _roles(home, key) or _roles(home, key)[-1:] == ["user"])
    gw_pid = list_turn_markers(home)[key]["writer_pid"]
    p.send_signal(getattr(signal, sig))
    _out, err = p.communicate(timeout=40)
    assert p.returncode == 4 and f"{sig}: stopping…" in err
    # one message, agreeing with the result: stopped for good (no "Details" contradicting it)
    assert [ln for ln in err.splitlines() if ln.startswith("hermes-tray:")] == [
        "hermes-tray: Stopped. You stopped it. It is not resumed again. Go on in Hermes by hand."], err
    assert key not in list_turn_markers(home)  # stopped: its marker retired, not continued again
    assert not pid_running(gw_pid)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "interrupted"]
    assert _status_turns(home, key, env) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/stat")
def test_cli_refuses_ctrl_z_while_a_continuation_runs(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=2.0)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    assert _wait(lambda: _roles(home, key)[-1:] == ["user"])
    p.send_signal(signal.SIGTSTP)
    time.sleep(0.3)
    state = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state != "T"  # not stopped
    _out, err = p.communicate(timeout=40)
    assert p.returncode == 0 and "cannot be paused" in err
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]


def test_a_crashed_continuation_is_resumed_again_but_never_while_state_db_cannot_tell(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    entry = plant_marker(home, key, PROMPT)
    write_control(home, die_mid_turn=True)
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    assert res.outcome == "crashed"
    left = list_turn_markers(home)[key]  # attempts 1, its completion mark, a dead writer; no reply in state.db
    write_control(home, die_mid_turn=False)
    (home / "state.db").rename(home / "state.db.away")
    try:
        unsure = resume_turn(Turn.of(home, key, left), install=install(sim_roots), options=FAST)
    finally:
        (home / "state.db.away").rename(home / "state.db")
    assert unsure.outcome == "refused" and "cannot tell whether" in unsure.message, unsure.message
    assert list_turn_markers(home)[key] == left
    again = resume_turn(Turn.of(home, key, left), install=install(sim_roots), options=FAST)
    assert again.outcome == "completed", again.message  # pending in state.db: a real retry, within budget
    assert [t["kind"] for t in read_turns(home)] == ["note", "note"]
    from hermes_tray_core.stores.ledger import ledger

    (row,) = [r for r in ledger().turns() if r["turn"] is not None and r["turn"].key == key]  # History: one row
    assert row["turn"] == Turn.of(home, key, entry).ident and row["last"] == Turn.of(home, key, left).ident


def test_the_inactivity_timeout_setting_stops_a_silent_continuation(sim_roots, env, tmp_path):
    from hermes_tray_core.stores.settings import update_settings

    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)  # a few frames, then silence
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    update_settings({"continuation_idle_timeout": 1.5})
    entry = plant_marker(home, key, PROMPT)
    t0 = time.monotonic()
    res = resume_turn(Turn.of(home, key, entry))  # options from the tray settings
    assert res.outcome == "timed-out" and "no activity for 1.5s" in res.message, res.message
    assert time.monotonic() - t0 < 25
    assert key not in list_turn_markers(home)


def test_cli_refusal_says_why(sim_roots, env, tmp_path):
    home, _key = make_home(tmp_path / "home")
    p = cli("resume", "20200101_000000_nosuch", "--home", str(home), env=env)
    _out, err = p.communicate(timeout=30)
    assert p.returncode == 1 and "no interrupted turn for session 20200101_000000_nosuch" in err


def test_cli_status_after_a_crashed_continuation_shows_it_actionable(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    settings_for(sim_command(sim_roots["auto-continue"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    write_control(home, die_mid_turn=True)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and "exited mid-turn" in err
    s = cli("status", "--json", "--home", str(home), env=env)
    out, err = s.communicate(timeout=30)
    turns = [t for t in json.loads(out)["turns"] if t["session_key"] == key]
    assert len(turns) == 1
    assert turns[0]["verdict"] == "actionable" and turns[0]["attempts"] == 1 and turns[0]["writer"] == "dead"


def test_a_malformed_session_key_is_a_caller_error(env, tmp_path):
    from hermes_tray_core.keys import InvalidIdError

    with pytest.raises(InvalidIdError):
        resume_turn(Turn.of(tmp_path, "../../etc/passwd", {}))


# ── review fixes ────────────────────────────────────────────────────────────────────────────────


def test_unreadable_tray_settings_refuse_instead_of_running_hermes_from_path(sim_roots, env, tmp_path,
                                                                              monkeypatch):
    # A `hermes` on PATH that would happily run the turn — but the user's settings (which may name another
    # Hermes) cannot be read: nothing is guessed, the resume is refused with the settings error.
    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    monkeypatch.setenv("PATH", str(sim_roots["legacy"] / "bin") + os.pathsep + os.environ.get("PATH", ""))
    cfg = Path(env["HERMES_TRAY_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text('hermes_command = ["/opt/my-hermes/bin/python"\n', encoding="utf-8")
    res = resume_turn(Turn.of(home, key, entry), options=FAST)
    assert res.outcome == "refused" and res.exit_code == 1, res.message
    assert "settings" in res.message and "config.toml" in res.message
    assert read_turns(home) == []
    assert list_turn_markers(home)[key] == entry
    # Unset (no settings file at all) still means "the hermes on PATH".
    (cfg / "config.toml").unlink()
    assert settings_hermes_command() is None
    assert resume_turn(Turn.of(home, key, entry), options=FAST).outcome == "completed"


def test_a_claim_that_cannot_be_read_back_is_still_a_refusal(sim_roots, env, tmp_path):
    import sqlite3

    from hermes_tray_core.stores.lease import shared as lease_store
    from hermes_tray_core.stores.paths import ledger_db as lease_db

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    other = LeaseStore(lease_db())
    held = other.acquire(claim_name(home, key), "pid=1:via=other", ttl=60)
    assert held is not None
    store = lease_store(None)

    def broken(_name: str) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    store.current = broken  # the store failed between the refused acquire and the look at its holder
    try:
        res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    finally:
        del store.current
        other.release(held)
    assert res.outcome == "refused" and "already resuming" in res.message
    assert read_turns(home) == []


@pytest.fixture
def small_desktop_dir(tmp_path):
    """``<home>/desktop`` (where the marker file lives) on a real 1 MB tmpfs, when we may mount one (root);
    else None (the test simulates the full disk instead). Yields (home, fill) — fill() makes it ENOSPC."""
    import contextlib
    import errno

    home = tmp_path / "home"
    mnt = home / "desktop"
    mnt.mkdir(parents=True)
    real = False
    if os.name == "posix" and os.geteuid() == 0:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)],
                           capture_output=True)
        real = r.returncode == 0
    patched: list = []

    def fill() -> None:
        if real:
            fd = os.open(mnt / "zz-filler", os.O_WRONLY | os.O_CREAT, 0o600)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 4096)
            os.close(fd)
            for i in range(10_000):  # tiny files into any slack
                try:
                    with open(mnt / f"zz-f{i}", "wb") as f:
                        f.write(b"x")
                except OSError:
                    break
        else:  # every write of ours into desktop/ goes through write_temp: it fails there, as on a full disk
            from hermes_tray_core.stores import fsutil

            write = fsutil.write_temp

            def full(target, *args, **kwargs):
                if Path(target).parent.resolve() == mnt.resolve():
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return write(target, *args, **kwargs)

            patched.append(write)
            fsutil.write_temp = full

    try:
        yield home, fill
    finally:
        if patched:
            from hermes_tray_core.stores import fsutil

            fsutil.write_temp = patched[0]
        if real:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_completed_continuation_whose_marker_cannot_be_removed_is_never_resumed_again(
        sim_roots, env, small_desktop_dir):
    from hermes_tray_core.stores.ledger import ledger
    from tests.support import book

    home, fill = small_desktop_dir
    home, key = make_home(home, turn_seconds=1.5)
    entry = plant_marker(home, key, PROMPT)
    plant_marker(home, "20261129_000000_other", "another turn")  # so removing ours rewrites the file
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST,
                      listener=gateway.Callbacks(on_dispatched=lambda _r: fill()))  # the disk fills up meanwhile
    assert res.outcome == "completed", res.message
    assert "The marker could not be removed" in res.message and res.to_dict()["marker_left"]
    left = list_turn_markers(home)[key]  # the tray's own entry: attempts + 1, a writer that has exited
    assert left["attempts"] == 1 and marker_writer_state(left) == "dead"
    assert res.continuation is not None and res.continuation.marker_left_started_at == left["started_at"]
    assert book.events(home, key, left["started_at"])[-1] == "completed"
    assert ledger().status(Turn.of(home, key, left).ident).asked  # ask-once / auto mode: answered
    # Resuming the leftover is refused: that turn already completed. Exactly one continuation ran.
    again = resume_turn(Turn.of(home, key, left), install=install(sim_roots), options=FAST)
    assert again.outcome == "refused" and "already continued and completed" in again.message, again.message
    assert [t["kind"] for t in read_turns(home)] == ["note"]


def test_legacy_continuation_rechecks_hermes_right_before_submitting(sim_roots, env, tmp_path, clock_step):
    # Checked before Hermes was spawned (fine then); a Hermes backend takes the session's turn lease
    # while ours is still starting up: nothing is submitted, the turn is left to it.
    from hermes_tray_core.process.identity import own_identity

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    write_control(home, ready_delay=1.5)
    own_identity()  # the lease holder's identity was read before the clock steps

    def take() -> None:
        sim_state.acquire_turn_lease(home, key, "t1")
        clock_step.step()  # NTP steps the clock while the lease is held and ours is starting up

    took = threading.Timer(0.5, take)
    took.start()
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    took.join()
    assert res.outcome == "refused" and res.verdict == "running", res.message
    assert "turn lease" in res.message and "nothing was submitted" in res.message
    assert read_turns(home) == []
    assert list_turn_markers(home)[key] == entry  # untouched: the backend that has it keeps its marker
    assert journal_events(key)[-1] == "refused" and "dispatched" not in journal_events(key)


def test_legacy_recheck_also_sees_an_active_session_owner_but_not_our_own_gateway(sim_roots, env, tmp_path,
                                                                                 clock_step):
    from hermes_tray_core.hermes.state_db import active_session_owner
    from hermes_tray_core.process.identity import own_identity

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    write_control(home, ready_delay=1.5)
    me = own_identity()
    registry = home / "runtime" / "active_sessions.json"

    def register() -> None:
        registry.parent.mkdir(exist_ok=True)
        registry.write_text(json.dumps({"entries": [
            {"session_id": key, "pid": me.pid, "process_start_time": me.start_time, "surface": "tui"}]}))
        clock_step.step()  # NTP steps the clock while the session is open and ours is starting up

    t = threading.Timer(0.5, register)
    t.start()
    res = resume_turn(Turn.of(home, key, entry), install=install(sim_roots), options=FAST)
    t.join()
    assert res.outcome == "refused" and "has this session open" in res.message, res.message
    assert read_turns(home) == []
    # The gateway the tray started registers the session it resumed (Hermes does, with a session cap):
    # that entry is ours, not another owner.
    assert active_session_owner(home, key).state == "alive"
    assert active_session_owner(home, key, ignore_pids=(me.pid,)).state == "none"


def test_cli_resume_wait_with_an_unusable_log_folder_runs_and_journals(sim_roots, env, tmp_path):
    home, key = make_home(tmp_path / "home")
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    logs = Path(env["HERMES_TRAY_LOG_DIR"])
    logs.mkdir(parents=True)
    (logs / "gateway").write_text("not a folder")  # as good as a full disk or no permission
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "Traceback" not in err, err
    assert key not in list_turn_markers(home)
    assert journal_events(key) == ["approved", "continuing", "dispatched", "completed"]


@pytest.mark.parametrize(("field", "value"), [("started_at", float("nan")), ("prompt", 1234),
                                              ("prompt", ["step 1", "step 2"])])
def test_a_junk_valued_marker_hermes_would_continue_is_continued_as_hermes_would(sim_roots, env, tmp_path,
                                                                                 field, value):
    """Values Hermes never writes, which its own code still continues (tests/test_marker_parity_hermes.py):
    the tray continues them once, with the prompt as Hermes reads it (``str(prompt)``), and says so. (A +Infinity
    ``started_at`` is more than 5 minutes in the future: newer Hermes' reader drops it, and the tray does not offer
    it: tests/test_newer_hermes_homes.py.)"""
    from hermes_tray.demo.sim_backend import _digest
    from hermes_tray_core.hermes.note import continuation_note
    from hermes_tray_core.markers.file import marker_path

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    entry[field] = value
    marker_path(home).write_text(json.dumps({key: entry}))  # NaN / Infinity as Python writes them
    res = resume_turn(Turn.of(home, key, list_turn_markers(home)[key]), install=install(sim_roots), options=FAST)
    assert res.outcome == "completed", res.message
    turns = read_turns(home)
    assert [t["kind"] for t in turns] == ["note"]
    text = str(entry["prompt"])
    assert turns[0]["text_sha"] == _digest(continuation_note(text))
    assert key not in list_turn_markers(home)
    assert journal_events(key)[-1] == "completed"


# ── a home Hermes cannot write; a Stop that cannot be written to Hermes' file ─────────────────────────


def test_a_home_hermes_cannot_write_is_refused_up_front_in_one_line(sim_roots, env, tmp_path):
    from tests.support.readonly import is_read_only, read_only

    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    with read_only(home / "desktop"):
        assert is_read_only(home / "desktop")
        t0 = time.monotonic()
        p = cli("resume", key, "--home", str(home), "--wait", env=env)
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    assert p.returncode == 1, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err  # one line, saying what and what to do
    assert f"Hermes cannot write in {home / 'desktop'}" in lines[0] and "Make it writable" in lines[0], lines
    assert "read-only file system" in lines[0] or "no permission" in lines[0]
    assert "Errno" not in err and "Resuming" not in out  # nothing started, nothing to stop
    assert took < 20  # not a continuation that runs for a minute and records nothing
    assert read_turns(home) == []
    assert list_turn_markers(home)[key]["attempts"] == 0  # untouched: offered again once the home can be written


def test_a_stop_that_cannot_be_written_to_hermes_file_is_still_final_and_said(sim_roots, env, tmp_path):
    from tests.support.readonly import read_only

    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.2)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--wait", env=env)
    lines: list[str] = []
    assert p.stdout is not None and p.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    assert _wait(lambda: any("Hermes is answering…" in ln for ln in lines), 30), lines
    with read_only(home / "desktop"):  # Hermes' file cannot be changed any more
        p.send_signal(signal.SIGINT)
        err = p.stderr.read()
        p.wait(timeout=40)
        said = [ln for ln in err.splitlines() if ln.startswith("hermes-tray:")]
        assert p.returncode == 4, err
        assert len(said) == 1 and said[0].startswith("hermes-tray: Stopped. You stopped it."), err
        assert "Hermes' file could not be changed (" in said[0] and f"hermes-tray skip {key}" in said[0], said
        assert "Errno" not in err
        left = list_turn_markers(home)[key]
        assert left["attempts"] == 1 and marker_writer_state(left) == "dead"  # it reads actionable to Hermes…
        (turn,) = _status_turns(home, key, env)  # …but the tray's journal holds the Stop, and every reader honours it
        assert turn["verdict"] == "stopped" and turn["reason_code"] == "stopped", turn
        again = cli("resume", key, "--home", str(home), "--wait", env=env)
        _out, err2 = again.communicate(timeout=60)
        assert again.returncode == 1 and "you stopped it earlier" in err2, err2
    assert [t["kind"] for t in read_turns(home)] == ["note"]  # one continuation, never a second
    assert _status_turns(home, key, env)[0]["verdict"] == "stopped"  # writable again: this scan removes it…
    assert key not in list_turn_markers(home)
    assert _status_turns(home, key, env) == []  # …and nothing is offered


def test_a_killed_resume_worker_is_settled_from_hermes_at_the_next_scan(sim_roots, env, tmp_path):
    from hermes_tray.model.history import group_turns
    from hermes_tray_core.stores.ledger import ledger

    home, key = make_home(tmp_path / "home", turn_seconds=3.0)
    settings_for(sim_command(sim_roots["legacy"])[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli("resume", key, "--home", str(home), "--json", env=env)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    info = json.loads(out)
    os.kill(info["pid"], signal.SIGKILL)  # the background worker, mid-continuation
    assert _wait(lambda: not pid_running(info["pid"]) and not pid_running(info["gateway_pid"]), 30)

    def row() -> str:
        (t,) = [t for t in group_turns(ledger().turns(500)) if t.session_key == key]
        return t.outcome()

    assert row() == "Running"  # what the ledger alone says: the worker never recorded how it ended
    turns = _status_turns(home, key, env)  # the next scan asks Hermes
    finished = [r for r, _c in sim_state.messages(home, key)][-1:] == ["assistant"] and \
        sim_state.messages(home, key)[-1][1].endswith(".")
    assert row() == ("Resumed and finished" if finished else "Interrupted again"), (row(), turns)
    if not finished:  # not finished: its marker (attempt 1, its writer gone) is offered again
        assert [t["verdict"] for t in turns] == ["actionable"] and turns[0]["attempts"] == 1
    assert row() == row()  # settled once
