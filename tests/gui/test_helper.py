"""The headless helper: same watcher and engine without a GUI. Unattended ``auto`` mode resumes a
crashed turn by itself; with no session bus its notifications go to the log — never prompt text."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def demo(tmp_path):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, continuation_seconds=0.5)
    yield d
    d.cleanup()


def _events(path: Path) -> list[dict]:
    """The events file's complete lines: one still being appended (no newline yet) is read next time."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(x) for x in text[: text.rfind("\n") + 1].splitlines() if x.strip()]


def _wait(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out: {what}")


def test_auto_mode_resumes_unattended_and_logs_without_prompt(demo, tmp_path) -> None:
    from hermes_tray_core.markers.turn_marker import read_turn_marker
    from hermes_tray_core.stores.settings import load_settings, save_settings, with_changes

    cfg = Path(demo.env["HERMES_TRAY_CONFIG_DIR"]) / "config.toml"
    save_settings(with_changes(load_settings(cfg), mode="auto"), cfg)
    events = tmp_path / "events.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env.update(demo.env, HERMES_TRAY_EVENTS=str(events), XDG_RUNTIME_DIR=str(tmp_path / "xdg"))
    helper = subprocess.Popen([sys.executable, "-m", "hermes_tray", "helper", "--home", str(demo.home)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        key = demo.session_key
        _wait(lambda: any(e["event"] == "scan" and e["verdicts"].get(key) == "running" for e in _events(events)),
              20, "helper sees the running turn")
        demo.crash_backend()
        _wait(lambda: any(e["event"] == "scan" and e["verdicts"].get(key) == "actionable" for e in _events(events)),
              10, "helper sees it interrupted")
        _wait(lambda: read_turn_marker(demo.home, key) is None and any(
            e["event"] == "scan" and key not in e["verdicts"] for e in _events(events)[-3:]), 30,
            "continuation ran and cleared the marker")
        log = Path(demo.env["HERMES_TRAY_LOG_DIR"]) / "hermes-tray-helper.log"
        text = _wait(lambda: (log.read_text() if log.exists() and "finished" in log.read_text() else ""), 10,
                     "finished note in the log")
        assert "notification: finished" in text
        assert "Refactor the config parser" not in text, "prompt text must never reach the log"
        assert oct(log.stat().st_mode & 0o777) == "0o600"
    finally:
        helper.terminate()
        helper.wait(timeout=15)
    assert helper.returncode == 0, helper.stderr.read()[-1500:]


def test_second_helper_refuses(demo, tmp_path) -> None:
    env = {**os.environ, **demo.env}
    first = subprocess.Popen([sys.executable, "-m", "hermes_tray", "helper", "--home", str(demo.home),
                              "--no-notifications"], env={**env, "HERMES_TRAY_EVENTS": str(tmp_path / "e1")},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: (tmp_path / "e1").exists(), 20, "first helper up")
        second = subprocess.run([sys.executable, "-m", "hermes_tray", "helper", "--home", str(demo.home)], env=env,
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 1
        assert "already running" in second.stdout
    finally:
        first.terminate()
        first.wait(timeout=15)


def test_helper_without_a_home_says_so_and_picks_the_home_up(demo, tmp_path) -> None:
    """Before: the helper said nothing at all. Now it says where it watches, and notices the home."""
    missing = tmp_path / "later" / ".hermes"
    env = {**os.environ, **demo.env, "HERMES_TRAY_EVENTS": str(tmp_path / "ev")}
    out = tmp_path / "helper.out"
    with open(out, "w") as f:
        p = subprocess.Popen([sys.executable, "-m", "hermes_tray", "helper", "--home", str(missing),
                              "--no-notifications"], env=env, stdout=f, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: "No Hermes home found yet" in out.read_text(), 20, "the helper saying there is no home")
        assert str(missing) in out.read_text()
        missing.mkdir(parents=True)  # Hermes runs for the first time
        (missing / "config.yaml").write_text("model: {}\n")
        _wait(lambda: [e for e in _events(tmp_path / "ev") if e.get("event") == "scan"][-1]["homes_found"],
              45, "the new home picked up by the watcher (no restart)")
    finally:
        p.terminate()
        p.wait(timeout=15)



def _dead_writer() -> tuple[int, float]:
    """(pid, start time) of a process that ran and is gone: a foreign writer that crashed."""
    import psutil

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    start = psutil.Process(p.pid).create_time() if p.poll() is None else time.time()
    p.wait()
    return p.pid, start


def test_a_storm_of_10000_turns_is_one_note_one_ledger_write_and_sigterm_ends_it_within_a_second(
        tmp_path: Path) -> None:
    """Issue 24.6. Before: on a 10,000-entry marker file (a foreign writer's) the helper journalled one
    "notified" event per entry at ~22/s and ignored SIGTERM for over 5 minutes (it waited for that backlog).
    Now the storm is one notification and one ledger write, and SIGTERM ends the helper within a second."""
    from hermes_tray_core.stores.ledger import Ledger, ledger
    from tests.support.product import product_env, tray_argv

    home = tmp_path / "hermes-home"
    (home / "desktop").mkdir(parents=True)
    pid, start = _dead_writer()
    now = time.time()
    entries = {f"storm-{i:05d}": {"attempts": 0, "prompt": f"step {i}", "started_at": now - i * 0.01,
                                  "auto_continue": True, "writer_pid": pid, "writer_start_time": start}
               for i in range(10_000)}
    marker = home / "desktop" / "interrupted_turns.json"
    marker.write_text(json.dumps(entries))
    marker.chmod(0o600)
    journal = ledger().path
    log = Path(os.environ["HERMES_TRAY_LOG_DIR"]) / "hermes-tray-helper.log"
    env = product_env({k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"})
    helper = subprocess.Popen(tray_argv("helper", "--home", home, "--no-notifications"), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def notified() -> list[dict]:
            return [e for e in Ledger(journal).history(20_000) if e.get("event") == "notified"] \
                if journal.exists() else []

        seen = _wait(lambda: len(notified()) >= 10_000 and notified(), 120, "every turn recorded as notified")
        t0 = time.monotonic()
        helper.send_signal(signal.SIGTERM)
        helper.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    assert helper.returncode == 0, helper.stderr.read()[-1500:]
    assert took < 1.0, f"SIGTERM took {took:.2f} s to end the helper"
    assert len(seen) == 10_000 and len({e["session_key"] for e in seen}) == 10_000
    assert len({e["created_at"] for e in seen}) == 1, "one ledger write for the storm, not one per turn"
    notes = [line for line in log.read_text().splitlines() if "notification:" in line]
    assert len(notes) == 1 and "10000 Hermes turns interrupted" in notes[0], notes
    assert len(notes[0]) < 2000, "the log line names a few turns and counts the rest"


def test_a_resume_the_helper_quit_before_hermes_took_it_is_resumed_at_the_next_start(tmp_path: Path,
                                                                                      sim_roots) -> None:
    """Issue 41.3. Before: the helper SIGTERMed 2–3.5 s after it started a resume, before Hermes took the marker,
    left the journal reading "asked or answered": after a restart it neither resumed nor notified, and the turn sat
    actionable until it went stale. A resume that never reached Hermes is no answer: the next start resumes it,
    and it is continued exactly once."""
    from hermes_tray.demo.sim_backend import write_control
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.continuing.orphans import settle_orphaned_runs
    from hermes_tray_core.markers.store import list_turn_markers
    from hermes_tray_core.stores.ledger import ledger
    from hermes_tray_core.stores.paths import settings_file
    from hermes_tray_core.stores.settings import TraySettings, save_settings
    from hermes_tray_core.turn import Turn
    from tests.support.product import product_env, tray_argv
    from tests.support.sim_homes import make_home, plant_marker, read_turns

    save_settings(TraySettings(mode="auto", hermes_command=tuple(sim_command(sim_roots["auto-continue"]))),
                  settings_file())
    home, key = make_home(tmp_path / "home", turn_seconds=0.5)
    write_control(home, ready_delay=8.0)  # the Hermes the helper starts is slow to get ready
    shown = plant_marker(home, key, "Refactor the config parser")
    env = product_env({k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"})

    def helper() -> subprocess.Popen:
        return subprocess.Popen(tray_argv("helper", "--home", home, "--no-notifications"), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def events() -> list[str]:
        return [e["event"] for e in reversed(ledger().history(100, session_key=key))]

    first = helper()
    try:
        _wait(lambda: "approved" in events(), 30, "the helper resuming the turn on its own")
        time.sleep(1.0)
        first.send_signal(signal.SIGTERM)  # a logout, before Hermes took the marker
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, first.stderr.read()[-1500:]
    assert list_turn_markers(home)[key] == shown and read_turns(home) == []  # Hermes never began it
    # The quitting helper either recorded the run as ended before it reached Hermes, or left it open as a crash
    # would (its Hermes, behind the keeper, never got the resume): the next scan settles such a run from Hermes'
    # facts first. Either way the turn reads unanswered: it waits for an answer.
    settle_orphaned_runs(home)
    assert not ledger().status(Turn.of(home, key, shown).ident).asked

    write_control(home, ready_delay=0.0)
    second = helper()
    try:
        _wait(lambda: "completed" in events(), 60, "the next start resuming it to its end")
    finally:
        second.terminate()
        second.wait(timeout=30)
    assert [t.get("kind") for t in read_turns(home)] == ["auto-continue"]  # continued exactly once
    assert key not in list_turn_markers(home)


class _Terminal:
    """A process whose output goes to a terminal (a pseudo-terminal), as when a person starts it in one."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import pty

        self.leader, follower = pty.openpty()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
        os.close(follower)
        self.text = ""

    def until(self, done, timeout: float = 30.0) -> str:
        """Read its output until ``done(text)`` holds (or the time is up); the output so far."""
        import select

        end = time.monotonic() + timeout
        while time.monotonic() < end and not done(self.text):
            if select.select([self.leader], [], [], 0.2)[0]:
                try:
                    self.text += os.read(self.leader, 65536).decode("utf-8", "replace")
                except OSError:
                    break
        return self.text

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)
        os.close(self.leader)


def _on_a_terminal(argv: list[str], env: dict[str, str], until, timeout: float = 30.0) -> str:
    """Run the helper on a terminal until ``until(text)`` holds."""
    term = _Terminal(argv, env)
    try:
        return term.until(until, timeout)
    finally:
        term.close()


def test_on_a_terminal_auto_mode_says_it_resumes_a_turn_and_nothing_more_while_it_runs(demo, tmp_path) -> None:
    from hermes_tray_core.markers.turn_marker import read_turn_marker
    from hermes_tray_core.stores.settings import load_settings, save_settings, with_changes

    cfg = Path(demo.env["HERMES_TRAY_CONFIG_DIR"]) / "config.toml"
    save_settings(with_changes(load_settings(cfg), mode="auto"), cfg)
    events = tmp_path / "events.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env.update(demo.env, HERMES_TRAY_EVENTS=str(events), XDG_RUNTIME_DIR=str(tmp_path / "xdg"))
    term = _Terminal([sys.executable, "-m", "hermes_tray", "helper", "--home", str(demo.home)], env)
    try:
        key = demo.session_key
        _wait(lambda: any(e["event"] == "scan" and e["verdicts"].get(key) == "running" for e in _events(events)),
              20, "helper sees the running turn")
        demo.crash_backend()
        term.until(lambda t: "resuming: " in t)
        _wait(lambda: read_turn_marker(demo.home, key) is None, 30, "the continuation ran and cleared the marker")
        text = term.until(lambda t: False, 2)  # what it said meanwhile
    finally:
        term.close()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("hermes-tray helper: ")]
    turn_lines = lines[2:]
    assert len(turn_lines) == 1 and turn_lines[0].startswith("hermes-tray helper: resuming: "), lines
    assert re.search(r"(interrupted|last saved|started) \d+ s ago\.$", turn_lines[0]), turn_lines


def test_on_a_terminal_the_helper_says_what_it_watches_and_what_happens_to_each_turn(tmp_path) -> None:
    """Auto mode, on a terminal: a turn it was told of before is not resumed by itself, and it says so and how to
    resume it; a turn too old and one held by auto-continue off are left alone, each with why. Named as the tray
    names them; never the engine's words."""
    from hermes_tray_core.stores.settings import load_settings, save_settings, with_changes
    from tests.support import book
    from tests.support.fixture_homes import FixtureHome, env_for, gone_writer, marker_entry

    env = env_for(tmp_path)  # the tray's files where this test's own ledger and settings are (conftest.user_dirs)
    now = time.time()
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s-told", title="Fix the flaky test")
    home.add_session("s-old", title="Write the release notes")
    home.write_markers({"s-told": marker_entry("fix it", started_at=now - 30, writer=gone_writer()),
                        "s-old": marker_entry("notes", started_at=now - 7200, writer=gone_writer())})
    home.close()
    held = FixtureHome(tmp_path / "held")
    held.write_config("desktop:\n  auto_continue:\n    enabled: false\n")
    held.add_session("s-held", title="Tidy the docs")
    held.write_markers({"s-held": marker_entry("tidy", started_at=now - 30, writer=gone_writer())})
    held.close()
    book.record("notified", home=str(home.path), session_key="s-told", started_at=now - 30, attempts=0,
                via="desktop-notifier")
    cfg = Path(env["HERMES_TRAY_CONFIG_DIR"]) / "config.toml"
    save_settings(with_changes(load_settings(cfg), mode="auto"), cfg)
    out = _on_a_terminal([sys.executable, "-m", "hermes_tray", "helper", "--home", str(home.path), "--home",
                          str(held.path), "--no-notifications"], env, lambda t: t.count("\n") >= 5)
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    assert lines[0] == f"hermes-tray helper: watching 2 Hermes homes: {home.path}, {held.path}", out
    assert lines[1].startswith("hermes-tray helper: mode auto: each interrupted turn is resumed at once"), out
    said = {key: next(ln for ln in lines[2:] if name in ln)
            for key, name in (("s-told", "Fix the flaky test"), ("s-old", "Write the release notes"),
                              ("s-held", "Tidy the docs"))}
    assert said["s-told"] == ("hermes-tray helper: not resumed automatically: Fix the flaky test, started 30 s ago. "
                              "You were asked about it before, or it was answered. Resume it by hand: "
                              "hermes-tray resume s-told")
    assert said["s-old"].startswith("hermes-tray helper: not resumed: Write the release notes, started 2 h ago. "
                                    "Too old to resume. It is older than this home's freshness window."), said
    assert said["s-held"].startswith("hermes-tray helper: not resumed: Tidy the docs, started 30 s ago. Held: "
                                     "auto-continue is off."), said
    for word in ("actionable", "verdict", "stale", "marker"):
        assert word not in out.lower(), word
