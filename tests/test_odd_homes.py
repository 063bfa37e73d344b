"""One home's trouble stays in that home.

A home the user cannot enter, one whose name is too long for the file system, one on a drive that no longer
answers, a FIFO where a file belongs, a marker file over the size limit: each becomes that home's problem
line, while every other home is read as usual — by ``status`` (still valid JSON), by ``config set homes``
(refused when set), and by the helper, which goes on noticing turns in the good home. Real files, real
permissions (an unprivileged child: tests.support.unprivileged), a real mount that never answers
(tests.support.dead_mount: a FUSE file system whose daemon never replies, as a dead network drive), and a
real FUSE drive that answers, then stops answering mid-session (tests.support.stalling_drive: fusepy on libfuse2).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support import dead_mount as dm
from tests.support import stalling_drive as sd
from tests.support.fixture_homes import FixtureHome, env_for, marker_entry
from tests.support.unprivileged import locked_dir, no_file_privileges, unlock

REPO = Path(__file__).resolve().parents[1]


def cli(env: dict, *args: str, unprivileged: bool = False, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=no_file_privileges() if unprivileged else None)


@pytest.fixture()
def odd(tmp_path):
    """A good home with an interrupted turn, a home the test's child cannot enter (holding a marker of its
    own, so "nothing interrupted" would be a lie) and a home whose name is 256 characters long."""
    good = FixtureHome(tmp_path / "good")
    good.add_session("s-good", title="Good turn")
    good.write_markers({"s-good": marker_entry("fix the parser", started_at=time.time() - 60)})
    good.close()
    hidden = json.dumps({"s-hidden": marker_entry("hidden")})
    locked = locked_dir(tmp_path / "locked", content={"desktop/interrupted_turns.json": hidden, "config.yaml": ""})
    long = tmp_path / ("h" * 256)
    env = env_for(tmp_path, HERMES_HOME=str(good.path))
    yield good, locked, long, env
    unlock(locked)


def test_status_reads_the_good_home_beside_an_unreadable_and_a_too_long_one(odd):
    good, locked, long, env = odd
    homes = ["--home", str(good.path), "--home", str(locked), "--home", str(long)]
    proc = cli(env, "status", "--json", *homes, unprivileged=True)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)  # valid JSON, whatever the other homes did
    assert [t["session_key"] for t in doc["turns"]] == ["s-good"]
    by_path = {h["path"]: h for h in doc["homes"]}
    assert by_path[str(locked)]["markers"] == "unreadable"  # never "none": its marker could not be seen
    assert any("permission denied" in p for p in by_path[str(locked)]["problems"])
    assert by_path[str(long)]["markers"] == "unreadable"
    assert any("too long" in p for p in by_path[str(long)]["problems"])

    human = cli(env, "status", *homes, unprivileged=True)
    assert human.returncode == 0 and "Traceback" not in human.stderr
    assert "Good turn" in human.stdout and "permission denied" in human.stdout and "too long" in human.stdout


def test_homes_from_the_settings_that_cannot_be_read_hide_nothing(odd, tmp_path):
    """The same homes added through the tray settings (discovery, not --home): the root's turn is listed."""
    good, locked, long, env = odd
    conf = Path(env["HERMES_TRAY_CONFIG_DIR"])
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.toml").write_text(f"homes = [{json.dumps(str(locked))}, {json.dumps(str(long))}]\n")
    proc = cli(env, "status", "--json", unprivileged=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [t["session_key"] for t in doc["turns"]] == ["s-good"]
    assert len(doc["homes"]) == 3 and all(h["problems"] for h in doc["homes"][1:])


def test_config_set_homes_refuses_what_cannot_be_read(odd):
    good, locked, long, env = odd
    for bad, words in ((locked, "permission denied"), (long, "too long"), (good.path / "nope", "does not exist")):
        proc = cli(env, "config", "set", "homes", str(bad), unprivileged=True)
        assert proc.returncode == 1, proc.stderr
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (Path(env["HERMES_TRAY_CONFIG_DIR"]) / "config.toml").exists()  # nothing was set
    ok = cli(env, "config", "set", "homes", str(good.path), unprivileged=True)
    assert ok.returncode == 0, ok.stderr


def test_a_fifo_where_a_file_belongs_hangs_nothing(tmp_path):
    """config.yaml and the active-session registry as FIFOs: read without blocking, reported, never waited on."""
    home = FixtureHome(tmp_path / "fifo")
    home.add_session("s-1")
    home.write_markers({"s-1": marker_entry("go on", started_at=time.time() - 30)})
    home.close()
    os.mkfifo(home.path / "config.yaml")
    (home.path / "runtime").mkdir()
    os.mkfifo(home.path / "runtime" / "active_sessions.json")
    proc = cli(env_for(tmp_path), "status", "--json", "--home", str(home.path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [t["session_key"] for t in doc["turns"]] == ["s-1"]
    assert any("config.yaml" in p and "not a regular file" in p for p in doc["homes"][0]["problems"])


def test_a_marker_file_over_the_limit_is_too_large_not_corrupt(tmp_path):
    home = FixtureHome(tmp_path / "big")
    home.write_markers({"s-big": marker_entry("x" * (17 * 1024 * 1024))})  # valid JSON, over 16 MiB
    proc = cli(env_for(tmp_path), "status", "--home", str(home.path))
    assert proc.returncode == 0, proc.stderr
    assert "too large to read (over 16 MiB)" in proc.stdout
    assert "corrupt" not in proc.stdout
    doc = json.loads(cli(env_for(tmp_path), "status", "--json", "--home", str(home.path)).stdout)
    assert doc["homes"][0]["markers"] == "unreadable"


# --- a drive that no longer answers --------------------------------------------------------------------------


needs_dead_mount = pytest.mark.skipif(dm.available() is not None, reason=f"no dead mount here: {dm.available()}")


@needs_dead_mount
def test_a_home_on_a_drive_that_hangs_is_given_up_on_in_time(odd, tmp_path):
    """The scanner's look at each home is bounded; the good home's turn comes back, the hanging one is a
    problem line, and the next scan does not wait again (nor start another thread for it)."""
    from hermes_tray_core import Home, Scanner, discover_homes

    good, _locked, _long, _env = odd
    with dm.dead_mount(tmp_path / "mnt") as mnt:
        dead = mnt / "hermes"
        t0 = time.monotonic()
        scanner = Scanner([Home(good.path, origin="cli"), Home(dead, origin="cli")], home_timeout=1.0)
        result = scanner.scan()
        took = time.monotonic() - t0
        assert took < 5, took  # given up on within 2 x 1 s (the slack is for a loaded machine)
        assert [t.session_key for t in result.turns] == ["s-good"]
        stuck = result.homes[1]
        assert stuck.path == dead and stuck.markers == "unreadable" and not stuck.reachable
        assert "did not answer within 1 s" in stuck.problems[0]
        t1 = time.monotonic()
        again = scanner.scan()
        assert time.monotonic() - t1 < 1.0  # the stuck look is remembered: no second wait
        assert again.homes[1].problems == stuck.problems  # the same words: the tray's list does not flicker
        assert [t.session_key for t in again.turns] == ["s-good"]
        t2 = time.monotonic()
        assert [h.path for h in discover_homes(explicit=[good.path, dead])] == [good.path, dead]
        assert time.monotonic() - t2 < 1.0  # discovery does not wait on it either


@needs_dead_mount
def test_status_answers_beside_a_drive_that_hangs(odd, tmp_path):
    good, _locked, _long, env = odd
    with dm.dead_mount(tmp_path / "mnt") as mnt:
        t0 = time.monotonic()
        proc = cli(env, "status", "--json", "--home", str(good.path), "--home", str(mnt / "hermes"), timeout=120)
        took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [t["session_key"] for t in doc["turns"]] == ["s-good"]
    assert "did not answer within 10 s" in doc["homes"][1]["problems"][0]
    assert took < 2 * 10 + 20, took  # at most twice the 10 s limit, plus start-up on a loaded machine


needs_stalling_drive = pytest.mark.skipif(sd.available() is not None,
                                          reason=f"no FUSE drive here: {sd.available()}")


def test_with_no_process_to_spare_the_look_is_made_in_a_thread(odd, monkeypatch):
    """A look runs in a child; when none can be started (the user's process limit reached), it runs in a thread
    rather than not at all: every home still gets its answer."""
    from hermes_tray_core.hermes import reach

    good, locked, long, _env = odd

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setattr(reach, "_readable", {})
    found = reach.look([good.path, long], find_profiles=True)
    assert [r.access for r in found] == [reach.Access.OK, reach.Access.UNREADABLE]
    assert "too long" in found[1].problem


def _read_to_end(proc: subprocess.Popen, timeout: float) -> str:
    """Everything ``proc`` writes on its standard output, up to the end of it (as ``| jq`` reads it)."""
    out, end = b"", time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        if select.select([proc.stdout], [], [], min(left, 0.5))[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return out.decode()
            out += chunk
    raise AssertionError(f"its output did not end within {timeout:.0f} s; it had written: {out.decode()[:300]}")


@needs_stalling_drive
def test_status_ends_beside_a_drive_that_stops_answering(odd, tmp_path):
    """sshfs, rclone or gvfs whose server goes away: the drive has taken the look's request and never answers it,
    so whatever looks sleeps in the kernel where no signal reaches it. Before, that was a thread of ``status``:
    its output was complete after 10 s but the process could not end, holding its output open (``| jq`` never
    ended) until the drive answered. Now the look runs in a child left behind holding nothing of ours."""
    good, _locked, _long, env = odd
    far = FixtureHome(tmp_path / "backing" / "hermes")
    far.add_session("s-far", title="Far turn")
    far.close()
    far.write_markers({"s-far": marker_entry("sum the logs", started_at=time.time() - 60)})
    argv = [sys.executable, "-m", "hermes_tray", "status", "--json", "--home", str(good.path)]
    with sd.StallingDrive(tmp_path / "backing", tmp_path / "mnt") as drive:
        home = drive.mount / "hermes"
        doc = json.loads(cli(env, *argv[3:], "--home", str(home)).stdout)
        assert [t["session_key"] for t in doc["turns"]] == ["s-good", "s-far"]  # while it answers, it is read
        drive.stall()
        t0 = time.monotonic()
        proc = subprocess.Popen([*argv, "--home", str(home)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            out = _read_to_end(proc, 10 + 30)  # the 10 s bound, plus start-up on a loaded machine
            took = time.monotonic() - t0
            assert proc.wait(10) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
        doc = json.loads(out)  # complete JSON
        assert [t["session_key"] for t in doc["turns"]] == ["s-good"]
        (stuck,) = [h for h in doc["homes"] if h["path"] == str(home)]
        assert stuck["problems"] == [f"{home} did not answer within 10 s (a network drive that is not responding?); "
                                     "its turns cannot be seen until it answers"]
        assert took < 10 + 30, took
        left = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == [*argv, "--home", str(home)]]
    # the look left behind ends once the drive is gone (the connection aborted: its call failed)
    psutil.wait_procs(left, timeout=20)
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


# --- the helper -------------------------------------------------------------------------------------------


class Terminal:
    """The helper's output on a real pseudo-terminal (it talks only to a terminal)."""

    def __init__(self, argv: list[str], env: dict, **kw) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, **kw)
        os.close(slave)
        self.text = ""

    def wait_for(self, needle: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while needle not in self.text:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"{needle!r} not seen; the helper said:\n{self.text}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.text += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    pass
        return self.text

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.close(self.master)


def _new_turn(home: FixtureHome, key: str, title: str) -> None:
    home.add_session(key, title=title)
    home.close()
    entries = home.read_markers()
    entries[key] = marker_entry("carry on", started_at=time.time() - 5)
    home.write_markers(entries)


def _helper_env(env: dict, tmp_path: Path) -> dict:
    out = {k: v for k, v in env.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    out["XDG_RUNTIME_DIR"] = str(tmp_path / "xdg-run")
    return out


def test_the_helper_on_a_terminal_keeps_watching_the_good_home(odd, tmp_path):
    """Started in a terminal: two lines on what it watches, a line per problem home, then one line for a turn
    interrupted in the good home — the unreadable and the too-long home stop nothing."""
    good, locked, long, env = odd
    term = Terminal([sys.executable, "-m", "hermes_tray", "helper", "--no-notifications", "--home", str(good.path),
                     "--home", str(locked), "--home", str(long)], _helper_env(env, tmp_path),
                    preexec_fn=no_file_privileges())
    try:
        term.wait_for("watching 3 Hermes homes", 60)
        term.wait_for("mode ask", 10)
        term.wait_for("Good turn", 20)  # the turn already there
        term.wait_for("permission denied", 10)
        term.wait_for("too long", 10)
        _new_turn(good, "s-new", "Second turn")
        text = term.wait_for("Second turn", 30)
        line = next(ln for ln in text.splitlines() if "Second turn" in ln)
        assert line.startswith("hermes-tray helper: waiting for you: Second turn, started ") and \
            line.endswith("To resume it: hermes-tray resume s-new"), line  # the tray's words, not the engine's
        assert "Traceback" not in text and "carry on" not in text  # show_prompts never needed for a title
    finally:
        term.close()


@needs_dead_mount
def test_the_helper_keeps_watching_beside_a_drive_that_hangs(odd, tmp_path):
    good, _locked, _long, env = odd
    with dm.dead_mount(tmp_path / "mnt") as mnt:
        term = Terminal([sys.executable, "-m", "hermes_tray", "helper", "--no-notifications", "--home",
                         str(good.path), "--home", str(mnt / "hermes")], _helper_env(env, tmp_path))
        try:
            term.wait_for("Good turn", 90)  # after at most one wait on the dead drive
            term.wait_for("did not answer", 30)
            _new_turn(good, "s-new", "Second turn")
            term.wait_for("Second turn", 30)  # the good home is still watched
        finally:
            term.close()


def test_the_helper_without_a_terminal_prints_no_turn_lines(odd, tmp_path):
    """Under systemd or an autostart entry (no terminal): no intro, no line per turn — the log has them."""
    good, _locked, _long, env = odd
    events = tmp_path / "events.jsonl"
    out = tmp_path / "helper.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "hermes_tray", "helper", "--no-notifications", "--home",
                                 str(good.path)], env={**_helper_env(env, tmp_path), "HERMES_TRAY_EVENTS": str(events)},
                                cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (events.exists() and '"s-good"' in events.read_text()):
            time.sleep(0.1)
        assert events.exists() and '"s-good"' in events.read_text(), "the helper never scanned"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    text = out.read_text()
    assert "watching" not in text and "waiting for you" not in text and "Good turn" not in text, text
