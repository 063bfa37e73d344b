"""Deciding with the facts: how far an interrupted turn got (Hermes' own ``state.db``), why it stopped (only
when a fact on this machine shows it), and "remind me later" (the ledger, honoured by ask-once).

Real files throughout: homes with Hermes' marker file and a real SQLite ``state.db`` laid out as Hermes lays it
out, the real ledger, real child processes SIGKILLed, the real ``/proc``. The real Hermes backends
are in tests/integration/test_real_progress.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hermes_tray_core import AskOnce, Scanner, discover_homes, waiting
from hermes_tray_core.continuing.claim import claim, release
from hermes_tray_core.deciding.ask_once import record_notified
from hermes_tray_core.deciding.causes import CAUSE_WORDS, stop_cause
from hermes_tray_core.deciding.snooze import MORNING_HOUR, remind_at, snooze_turn
from hermes_tray_core.deciding.witness import ExitWitness
from hermes_tray_core.process import machine
from hermes_tray_core.stores.ledger import ledger
from hermes_tray_core.turn import Marker, Turn
from hermes_tray_core.vocab import StopCause, Verdict
from tests.support.fixture_homes import FixtureHome, env_for, gone_writer, marker_entry

PROMPT = "Run the test suite and fix what fails"


def scan_one(home: FixtureHome, now: float | None = None, **kw):
    (turn,) = Scanner(discover_homes(explicit=[str(home.path)]), **kw).scan(now).turns
    return turn


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], env=env_for(tmp_path, **env),
                          capture_output=True, text=True, timeout=120)


# ── how far it got ──────────────────────────────────────────────────────────────────────────────


def interrupted_home(tmp_path: Path, *, started: float) -> FixtureHome:
    """A session whose earlier turn was answered and whose current turn made two tool calls, as Hermes
    persists them: the user's message stamped when it was submitted (before the marker), each tool call before
    its tool ran, each result after; the answer being streamed when it died is not there."""
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Flaky tests")
    home.add_message("s1", "user", "an earlier question", at=started - 600)
    home.add_message("s1", "assistant", "An earlier answer.\n\nIn two paragraphs.", at=started - 590, finish="stop")
    home.add_message("s1", "user", PROMPT, at=started - 8)  # submitted before Hermes wrote its marker
    home.add_message("s1", "assistant", "", at=started + 2, calls=[("terminal", {"command": "pytest -x\nexit"})])
    home.add_message("s1", "tool", '{"output": "1 failed"}', at=started + 5, tool="terminal")
    home.add_message("s1", "assistant", "The failure is in test_io.\n\nReading it now.", at=started + 6,
                     calls=[("read_file", {"path": "tests/test_io.py"})])
    home.add_message("s1", "tool", '{"content": "..."}', at=started + 7, tool="read_file")
    home.add_message("s1", "assistant", "rewound", at=started + 8, active=0)  # rewound by Hermes: not the turn's
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    return home


def test_progress_counts_what_hermes_recorded_after_the_prompt_and_names_the_last_thing_it_did(tmp_path):
    started = time.time() - 120
    turn = scan_one(interrupted_home(tmp_path, started=started))
    p = turn.progress
    assert p is not None and p.kept
    assert (p.messages, p.tool_calls) == (4, 2)  # two tool calls and their two results; no prompt, no earlier turn
    assert [s.phrase() for s in p.recent] == ["ran terminal", "wrote 2 paragraphs", "ran read_file"]
    assert p.last_excerpt == "read_file: tests/test_io.py"
    assert p.ran_for_s == pytest.approx(7.0, abs=0.01)
    j = turn.to_json()["progress"]
    assert j == {"messages": 4, "tool_calls": 2, "last_kind": "tool", "last_excerpt": "read_file: tests/test_io.py",
                 "ran_for_s": 7.0, "recent": [{"kind": "tool", "tool": "terminal", "running": False},
                                              {"kind": "text", "paragraphs": 2},
                                              {"kind": "tool", "tool": "read_file", "running": False}]}
    assert "read_file" not in repr(p) and "test_io" not in repr(turn)  # never in a log line


def test_the_last_text_or_the_first_line_of_the_last_call_is_the_excerpt(tmp_path):
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1")
    home.add_message("s1", "user", PROMPT, at=started - 1)
    home.add_message("s1", "assistant", "", at=started + 1, calls=[("terminal", {"command": "\n  make test\nmake"})])
    home.add_message("s1", "tool", "ok", at=started + 2, tool="terminal")
    home.add_message("s1", "assistant", "All green.\n\nNow I am writing the summary", at=started + 3,
                     finish="verify_hook_continue")
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    p = scan_one(home).progress
    assert p.last_excerpt == "Now I am writing the summary" and p.last_kind == "text"
    assert p.line() == ("3 messages, 1 tool call; then ran terminal, wrote 2 paragraphs "
                        "— last: Now I am writing the summary")


def test_long_text_and_large_tool_arguments_are_read_whole(tmp_path):
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1")
    home.add_message("s1", "assistant", "First.\n\n" + "word " * 2000 + "\n\nThird and last line", at=started + 1)
    home.add_message("s1", "assistant", "", at=started + 2,
                     calls=[("terminal", {"command": "ls"}), ("write_file", {"path": "src/big.py", "content": "x" * 9000})])
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    p = scan_one(home).progress
    # two calls saved, no result: the first was running when the turn stopped; the second may never have started
    assert [s.phrase() for s in p.recent] == ["wrote 3 paragraphs", "was running terminal when it stopped"]
    assert p.last_excerpt == "write_file: src/big.py" and p.tool_calls == 2


def test_a_call_saved_without_its_result_was_running_when_the_turn_stopped(tmp_path):
    """Hermes saves the calls before their tools run and each result as its tool ends, in order: the first call
    without a result was running; the calls after it may never have started, and are not said to have run."""
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1")
    home.add_message("s1", "assistant", "", at=started + 1, calls=[("read_file", {"path": "a.txt"})])
    home.add_message("s1", "tool", "a", at=started + 2, tool="read_file")
    home.add_message("s1", "assistant", "Building it now.", at=started + 3,
                     calls=[("terminal", {"command": "make"}), ("terminal", {"command": "make test"}),
                            ("write_file", {"path": "log.txt"})])
    home.add_message("s1", "tool", "built", at=started + 9, tool="terminal")
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    p = scan_one(home).progress
    assert [s.phrase() for s in p.recent] == ["wrote 1 paragraph", "ran terminal",
                                              "was running terminal when it stopped"]
    assert p.recent[-1].to_json() == {"kind": "tool", "tool": "terminal", "running": True}
    assert p.tool_calls == 4  # what it asked for, all of it


def test_a_turn_hermes_kept_nothing_of_says_so_and_an_unreadable_one_says_nothing(tmp_path):
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1")
    home.add_message("s1", "user", "earlier", at=started - 300)
    home.add_message("s1", "assistant", "An earlier answer.", at=started - 290, finish="stop")
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    p = scan_one(home).progress
    assert p is not None and not p.kept and p.messages == 0 and p.last_kind is None
    assert p.line() == "Hermes kept nothing of this turn's progress"
    assert p.to_json()["last_excerpt"] is None
    # no state.db at all, or one without Hermes' messages table: unknown, never "nothing"
    bare = FixtureHome(tmp_path / "bare")
    bare.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    assert scan_one(bare).progress is None
    (bare.path / "state.db").write_bytes(b"this is not a database")
    assert scan_one(bare).progress is None


def test_a_session_compression_closed_is_unknown_not_zero(tmp_path):
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1")
    home.db().execute("UPDATE sessions SET end_reason = 'compression' WHERE id = 's1'")
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    assert scan_one(home).progress is None


def test_progress_is_read_in_the_same_look_for_every_marker_of_a_home(tmp_path):
    started = time.time() - 60
    home = FixtureHome(tmp_path / "hermes")
    entries = {}
    for i in range(40):
        key = f"s{i}"
        home.add_session(key)
        for j in range(i % 4):
            home.add_message(key, "assistant", "", at=started + j, calls=[(f"tool{j}", {"x": "y"})])
        entries[key] = marker_entry(PROMPT, started_at=started)
    home.write_markers(entries)
    home.close()
    turns = {t.session_key: t for t in Scanner(discover_homes(explicit=[str(home.path)])).scan().turns}
    assert {k: t.progress.tool_calls for k, t in turns.items()} == {f"s{i}": i % 4 for i in range(40)}
    off = Scanner(discover_homes(explicit=[str(home.path)]), read_progress=False).scan().turns
    assert all(t.progress is None and t.cause is None for t in off)


def long_turn(tmp_path: Path, rows: int, *, started: float) -> FixtureHome:
    """A turn of ``rows`` rows (tool calls, every third two at once, and their results) in a ``state.db`` in
    rollback-journal mode, as Hermes 0.22 keeps it on SQLite before 3.51.3 (where a reader blocks a commit)."""
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Long loop")
    home.add_session("other")
    home.db().execute("BEGIN")
    home.add_message("s1", "user", PROMPT, at=started - 1)
    at, i = started, 0
    while i < rows:
        calls = [("terminal", {"command": f"step {i}"})] * (2 if i % 3 == 0 else 1)
        home.add_message("s1", "assistant", "", at=(at := at + 0.001), calls=calls)
        home.add_message("s1", "tool", "ok", at=(at := at + 0.001), tool="terminal")
        i += 2
    home.db().execute("COMMIT")
    home.db().execute("PRAGMA journal_mode=DELETE")
    home.write_markers({"s1": marker_entry(PROMPT, started_at=started)})
    home.close()
    return home


def test_hermes_commits_while_status_reads_a_long_turn(tmp_path, monkeypatch):
    """In rollback-journal mode a reader's lock makes Hermes' commits wait, for as long as one read lasts: reading
    a 200,000-row turn in one statement made Hermes' writes wait up to 734 ms. Now a turn's rows are read in short
    statements, letting go between them: a Hermes commit tried whenever a read of ``messages`` starts goes through
    every time, many times within one turn's reading (before: once, before its one long read); the facts are
    exact."""
    import sqlite3

    rows = 50_000
    home = long_turn(tmp_path, rows, started=time.time() - 600)
    writer = sqlite3.connect(home.path / "state.db", timeout=0, isolation_level=None)
    commits: list[bool] = []

    def hermes_commits(sql: str) -> None:
        if not re.search(r"\b(FROM|JOIN) messages\b", sql):  # a read of the turn's rows starts
            return
        try:  # Hermes' write, without waiting: it goes through only if no read holds state.db
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES "
                           "('other', 'assistant', 'tick', ?)", (time.time(),))
            writer.execute("COMMIT")
            commits.append(True)
        except sqlite3.OperationalError:
            writer.execute("ROLLBACK")
            commits.append(False)

    real_connect = sqlite3.connect

    def connect(*args, **kw):  # the scanner's read-only connection, traced
        conn = real_connect(*args, **kw)
        if "mode=ro" in str(args[0] if args else kw.get("database", "")):
            conn.set_trace_callback(hermes_commits)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    p = scan_one(home).progress
    writer.close()
    assert p is not None and (p.messages, p.tool_calls) == (rows, rows // 2 + len(range(0, rows, 6)))
    assert [s.phrase() for s in p.recent] == ["ran terminal"] * 2 + ["was running terminal when it stopped"]
    assert all(commits), commits
    assert len(commits) >= 4, f"{len(commits)} reads"


def test_a_commit_longer_than_the_busy_timeout_mid_reading_costs_nothing(tmp_path, monkeypatch):
    """Reading a long turn takes many short reads; Hermes may hold ``state.db`` longer than the reader's busy
    timeout (0.2 s: a slow disk's fsync) just as one of them starts. That read is tried again: the facts are all
    there (before, one such wait mid-way left the turn's progress unknown)."""
    import sqlite3
    import threading

    rows = 20_000
    home = long_turn(tmp_path, rows, started=time.time() - 600)
    reads = []

    def hermes_holds_it(sql: str) -> None:
        if not re.search(r"\bFROM messages\b", sql):
            return
        reads.append(sql)
        if len(reads) != 2:  # as the second read of the turn starts
            return
        taken = threading.Event()

        def hold() -> None:
            conn = sqlite3.connect(home.path / "state.db", isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            taken.set()
            time.sleep(0.5)  # longer than the reader's 0.2 s busy timeout
            conn.execute("COMMIT")
            conn.close()

        threading.Thread(target=hold).start()
        taken.wait(10)

    real_connect = sqlite3.connect

    def connect(*args, **kw):
        conn = real_connect(*args, **kw)
        if "mode=ro" in str(args[0] if args else kw.get("database", "")):
            conn.set_trace_callback(hermes_holds_it)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    p = scan_one(home).progress
    assert len(reads) > 3
    assert p is not None and (p.messages, p.tool_calls) == (rows, rows // 2 + len(range(0, rows, 6)))


def test_status_prints_one_progress_line_and_show_prompts_off_hides_the_excerpt_everywhere(tmp_path):
    home = interrupted_home(tmp_path, started=time.time() - 120)
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert out.returncode == 0, out.stderr
    assert ("    progress: 4 messages, 2 tool calls; then ran terminal, wrote 2 paragraphs, "
            "ran read_file — last: read_file: tests/test_io.py") in out.stdout.splitlines()
    data = json.loads(cli(tmp_path, "status", "--json", "--home", str(home.path)).stdout)
    assert data["turns"][0]["progress"]["last_excerpt"] == "read_file: tests/test_io.py"
    assert cli(tmp_path, "config", "set", "show_prompts", "false").returncode == 0
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert "tests/test_io.py" not in out.stdout and "— last:" not in out.stdout
    assert "4 messages, 2 tool calls" in out.stdout
    data = json.loads(cli(tmp_path, "status", "--json", "--home", str(home.path)).stdout)
    assert data["turns"][0]["progress"]["last_excerpt"] is None and data["turns"][0]["progress"]["tool_calls"] == 2


# ── why it stopped ──────────────────────────────────────────────────────────────────────────────


def one_marker(tmp_path: Path, *, freshness_minutes: int = 15, **entry) -> FixtureHome:
    home = FixtureHome(tmp_path / "hermes")
    home.write_config(f"desktop:\n  auto_continue:\n    freshness_minutes: {freshness_minutes}\n")
    home.add_session("s1")
    home.write_markers({"s1": marker_entry(PROMPT, **entry)})
    home.close()
    return home


def test_a_writer_that_started_before_this_boot_was_stopped_by_the_restart(tmp_path):
    boot = machine.boot_time()
    assert boot is not None and boot < time.time()
    home = one_marker(tmp_path, started_at=boot - 3000, writer={"writer_pid": 4_000_000, "writer_start_time": boot - 3600})
    turn = scan_one(home, now=boot + 60)  # its verdict is stale; the cause is a fact all the same
    assert turn.cause == StopCause.RESTARTED
    assert turn.cause_fact.startswith("its Hermes process started at ") and "before this computer last started" in \
        turn.cause_fact
    j = turn.to_json()
    assert j["cause"] == "restarted" and j["cause_fact"] == turn.cause_fact


def test_a_writer_of_this_boot_that_died_has_no_known_cause(tmp_path):
    home = one_marker(tmp_path, writer=gone_writer() | {"writer_start_time": time.time() - 60})
    turn = scan_one(home)
    assert turn.verdict == Verdict.ACTIONABLE
    assert (turn.cause, turn.cause_fact) == (StopCause.UNKNOWN, "")
    assert turn.to_json()["cause"] == "unknown" and turn.to_json()["cause_fact"] is None


def test_hermes_own_shutdown_record_and_the_tray_own_crashed_continuation_are_causes(tmp_path):
    now = time.time()
    assert stop_cause(Marker.read({"interrupted_by": "shutdown"}), now=now)[0] == StopCause.SHUTDOWN
    # the tray's ledger: its continuation (attempt 1) of this session crashed after the run's marker was written
    home = one_marker(tmp_path, attempts=1, started_at=now - 30,
                      writer=gone_writer() | {"writer_start_time": now - 40})  # a writer of this boot
    first = Turn.of(home.path, "s1", {"started_at": now - 400, "attempts": 0})
    held = claim(first, purpose="resume", via="test", ttl=30)
    book = ledger()
    book.record("dispatched", first.ident, run=held.run, attempt=1)
    book.record("failed", first.ident, run=held.run, attempt=1, outcome="crashed")
    release(held)
    turn = scan_one(home)
    assert turn.cause == StopCause.CONTINUATION_CRASHED and "attempt 1 exited mid-turn" in turn.cause_fact
    # a crash of another attempt, or one recorded before this run began, is not this run's
    assert book.status(turn.turn.ident._replace(attempt=2)).crashed is None
    assert book.status(turn.turn.ident._replace(started_at=now + 60)).crashed is None


def test_a_turn_offered_again_after_the_tray_quit_says_the_tray_quit_while_it_ran(tmp_path):
    """The tray quit while its continuation (attempt 1) ran in a Hermes it started: it ended that process and gave
    the attempt back (the marker left counts 0); its journal holds ``interrupted``, ``stopped_by: shutdown``."""
    now = time.time()
    home = one_marker(tmp_path, attempts=0, started_at=now - 30,
                      writer=gone_writer() | {"writer_start_time": now - 40})
    first = Turn.of(home.path, "s1", {"started_at": now - 400, "attempts": 0})
    held = claim(first, purpose="resume", via="test", ttl=30)
    book = ledger()
    book.record("dispatched", first.ident, run=held.run, attempt=1)
    book.record("interrupted", first.ident, run=held.run, marker_started=now - 30, attempt=1, stopped_by="shutdown",
                dispatched=True)  # the marker it left, at the turn's own count, is the run's
    release(held)
    turn = scan_one(home)
    assert turn.cause == StopCause.TRAY_QUIT and turn.cause_fact.startswith("the tray's records: the tray quit while "
                                                                            "attempt 1 ran, at ")
    assert turn.interrupted_at is not None and abs(turn.interrupted_at - now) < 5 and turn.moment[0] == "interrupted"
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert "    why it stopped: the tray quit while it ran (the tray's records: " in out.stdout
    # a quit before this run began is not this run's
    assert book.status(turn.turn.ident._replace(started_at=now + 60)).crashed is None


def test_a_running_turn_has_no_cause(tmp_path):
    home = one_marker(tmp_path, writer={"writer_pid": os.getpid(), "writer_start_time": psutil.Process().create_time()})
    turn = scan_one(home)
    assert turn.verdict == Verdict.RUNNING and turn.cause is None and turn.to_json()["cause"] is None


def test_no_cause_is_printed_without_its_fact(tmp_path):
    now = time.time()
    for cause, facts in ((StopCause.SHUTDOWN, {"entry": {"interrupted_by": "shutdown"}}),
                         (StopCause.RESTARTED, {"entry": {"writer_start_time": 1000.0}, "boot_time": now - 50}),
                         (StopCause.CONTINUATION_CRASHED, {"crashed": {"attempt": 2, "created_at": now}}),
                         (StopCause.TRAY_QUIT, {"crashed": {"event": "interrupted", "attempt": 2, "created_at": now}})):
        got, fact = stop_cause(Marker.read(facts.get("entry", {})), now=now, boot_time=facts.get("boot_time"),
                               crashed=facts.get("crashed"))
        assert got == cause and fact
    # a witness record without its fact is no cause
    assert stop_cause(Marker.read({}), now=now, witnessed={"cause": "out-of-memory"})[0] == StopCause.UNKNOWN
    assert set(CAUSE_WORDS) == set(StopCause)
    home = one_marker(tmp_path, started_at=now - 4000, writer={"writer_pid": 4_000_000, "writer_start_time": 100.0})
    out = cli(tmp_path, "status", "--home", str(home.path))
    (line,) = [ln for ln in out.stdout.splitlines() if "why it stopped" in ln]
    assert line.startswith("    why it stopped: the computer restarted (its Hermes process started at ")


# ── when it stopped, and the out-of-memory killer: facts about that very process ─────────────


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's files are Linux's")
def test_the_real_boot_time_is_read_from_proc_stat():
    assert machine.boot_time() == float(next(ln.split()[1] for ln in open("/proc/stat") if ln.startswith("btime ")))


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def watched(tmp_path: Path, proc: subprocess.Popen[bytes], witness: ExitWitness) -> FixtureHome:
    """A turn whose marker ``proc`` wrote, looked at by ``witness`` while it runs (as the tray does after a scan)."""
    home = one_marker(tmp_path, writer={"writer_pid": proc.pid,
                                        "writer_start_time": psutil.Process(proc.pid).create_time()})
    running = Scanner(discover_homes(explicit=[str(home.path)])).scan().turns
    assert running[0].verdict == Verdict.RUNNING and running[0].interrupted_at is None
    witness.look(running)
    return home


def test_an_unrelated_oom_kill_is_no_cause_for_a_kill_9_and_the_turn_is_said_interrupted_when_it_was(tmp_path):
    """The issue's case: another process is OOM-killed in its own 32 MiB memory group (the machine's count moves)
    while the user kill -9s Hermes. Nothing about *that* process says memory: cause unknown. The witness saw the
    moment it died: the turn is "interrupted N ago" from then, not from when it started."""
    from tests.support.memcg import hog, memory_group, oom_kill, vmstat_kills

    with memory_group() as (group, _kind):
        proc = sleeper()
        try:
            witness = ExitWitness()
            home = watched(tmp_path, proc, witness)
            other = hog(group)
            before = vmstat_kills()
            oom_kill(other)
            assert vmstat_kills() > before  # the machine-wide count moved: it names no one
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            died = time.time()
            assert witness.exited(proc.pid) is None
        finally:
            proc.kill()
            proc.wait()
    turn = scan_one(home)
    assert turn.verdict == Verdict.ACTIONABLE and (turn.cause, turn.cause_fact) == (StopCause.UNKNOWN, "")
    (stopped,) = [e for e in ledger().history(10) if e["event"] == "stopped"]
    assert "cause" not in stopped and stopped["pid"] == proc.pid
    assert turn.interrupted_at == pytest.approx(died, abs=2.0) and turn.moment[0] == "interrupted"
    assert turn.to_json()["interrupted_at"] == turn.interrupted_at
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert "interrupted " in out.stdout.splitlines()[1] and "out of memory" not in out.stdout


@pytest.mark.parametrize("fact", ["kernel-log", "memory-group"])
def test_a_writer_the_oom_killer_ends_stopped_out_of_memory_said_with_the_fact_about_it(tmp_path, fact):
    """Hermes' own process, in a memory group of its own, allocates past its limit and the kernel ends it. The
    kernel's log names its pid (where it can be read); without the log, its own group counts the kill."""
    from hermes_tray_core.process.oom import KernelLog
    from tests.support.memcg import hog, memory_group, oom_kill

    with memory_group() as (group, _kind):
        proc = hog(group)
        try:
            log = None if fact == "kernel-log" else KernelLog(str(tmp_path / "no-kernel-log"))
            witness = ExitWitness(kernel_log=log)
            if fact == "kernel-log" and KernelLog().mark() is None:
                pytest.skip("the kernel's log cannot be read here (kernel.dmesg_restrict)")
            home = watched(tmp_path, proc, witness)
            oom_kill(proc)
            assert witness.exited(proc.pid) == StopCause.OUT_OF_MEMORY
        finally:
            proc.kill()
            proc.wait()
    turn = scan_one(home)
    assert turn.cause == StopCause.OUT_OF_MEMORY and turn.moment[0] == "interrupted"
    if fact == "kernel-log":
        assert turn.cause_fact.startswith(f"the kernel's log: it killed pid {proc.pid} (python")
    else:
        assert f"its memory group /{group.name} counted an out-of-memory kill" in turn.cause_fact
        assert f"(pid {proc.pid})" in turn.cause_fact
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert f"why it stopped: its Hermes process ran out of memory ({turn.cause_fact})" in out.stdout


def test_a_memory_group_is_read_only_where_its_count_is_that_group_own(tmp_path, monkeypatch):
    from hermes_tray_core.process import oom

    proc, mounts = tmp_path / "proc", tmp_path / "mountinfo"
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    mounts.write_text(f"30 1 0:26 / {v2} rw - cgroup2 cgroup2 rw\n35 1 0:31 / {v1} rw - cgroup cgroup rw,memory\n")
    monkeypatch.setattr(oom, "PROC", str(proc))
    monkeypatch.setattr(oom, "MOUNTINFO", str(mounts))

    def process(pid: int, cgroup: str) -> None:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(cgroup)

    process(11, "0::/user.slice/app.scope\n")
    (v2 / "user.slice/app.scope").mkdir(parents=True)
    (v2 / "user.slice/app.scope/memory.events.local").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
    group = oom.memory_group(11)
    assert group is not None and group.kills == 2 and group.fact(11) is None
    (v2 / "user.slice/app.scope/memory.events.local").write_text("oom 3\noom_kill 3\n")
    assert group.fact(11) == ("its memory group /user.slice/app.scope counted an out-of-memory kill as its Hermes "
                              "process (pid 11) ended")
    process(12, "0::/\n")  # the root group counts every process of the machine: never read
    assert oom.memory_group(12) is None
    process(13, "0::/user.slice\n")  # a parent's hierarchical count moves for its children too: never read
    (v2 / "user.slice/memory.events").write_text("oom_kill 9\n")
    assert oom.memory_group(13) is None
    process(14, "7:memory:/hermes\n0::/\n")  # cgroup v1's memory hierarchy
    (v1 / "hermes").mkdir(parents=True)
    (v1 / "hermes/memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert oom.memory_group(14) == oom.MemoryGroup(str(v1 / "hermes/memory.oom_control"), "/hermes", 0)
    assert oom.memory_group(15) is None  # no such process


def test_the_witness_reads_nothing_while_no_writer_lives_and_journals_no_turn_that_ended(tmp_path):
    reads = []

    class NoLog:
        def mark(self):
            reads.append("log")

        def killed(self, pid, since):
            reads.append("log")

    witness = ExitWitness(kernel_log=NoLog(), memory_group=lambda pid: reads.append(pid))
    home = one_marker(tmp_path)
    witness.look(Scanner(discover_homes(explicit=[str(home.path)])).scan().turns)
    assert reads == [] and witness.exited(12345) is None
    # a writer whose turn ended (its marker cleared) before it exited interrupted nothing: nothing recorded
    proc = sleeper()
    try:
        home = watched(tmp_path / "ended", proc, witness)
        home.write_markers({})
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert witness.exited(proc.pid) is None
    finally:
        proc.kill()
        proc.wait()
    assert ledger().history(10) == []


# ── remind me later ─────────────────────────────────────────────────────────────────────────────


def test_remind_at_reads_what_a_person_types():
    now = time.mktime((2026, 12, 4, 15, 0, 0, 0, 0, -1))
    assert remind_at("1h", now) == now + 3600 and remind_at("2h30m", now) == now + 9000
    assert remind_at("90s", now) == now + 90 and remind_at("1d", now) == now + 86400
    assert time.localtime(remind_at("tomorrow", now))[:5] == (2026, 12, 5, MORNING_HOUR, 0)
    assert time.localtime(remind_at("14:30", now))[:5] == (2026, 12, 5, 14, 30)  # already past today
    assert time.localtime(remind_at("16:05", now))[:5] == (2026, 12, 4, 16, 5)
    assert time.localtime(remind_at("2026-12-06 08:00", now))[:5] == (2026, 12, 6, 8, 0)
    for bad in ("soon", "1x", "2026-12-01 09:00", "30d", "0m", ""):
        with pytest.raises(ValueError):
            remind_at(bad, now)


class Clock:
    """The tray's clock seams (wall and monotonic), moved by the test."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ask_once(clock: Clock) -> AskOnce:
    return AskOnce(clock=clock, wall_clock=clock)


def announce(ask: AskOnce, home: FixtureHome, clock: Clock, mode: str = "ask"):
    """One tray review after a scan at the clock's time; what it announces (or reminds of) is delivered and
    recorded."""
    records = Scanner(discover_homes(explicit=[str(home.path)])).scan(clock.t).turns
    review = ask.review(waiting(records), mode, others=records)
    if review.ask or review.remind:
        record_notified(ask.delivered(review.ask + review.remind, True), via="test")
    return review


def test_a_snoozed_turn_is_not_announced_before_its_time_and_once_after_it_across_a_restart(tmp_path):
    t0 = time.time()
    home = one_marker(tmp_path, started_at=t0 - 30, freshness_minutes=180)  # still fresh in an hour
    clock = Clock(t0)
    first = ask_once(clock)
    assert len(announce(first, home, clock).ask) == 1  # announced; the user answers "remind me in 1 hour"
    snoozed = cli(tmp_path, "snooze", "s1", "--for", "1h", "--home", str(home.path))  # another process
    assert snoozed.returncode == 0, snoozed.stderr
    # the tray restarts: nothing of the first one's memory, the ledger on disk
    clock.t += 60
    again = ask_once(clock)
    review = announce(again, home, clock)
    assert review.ask == [] and [k.key for k in review.snoozed] == ["s1"]
    clock.t += 3600 - 120  # still a minute early
    assert announce(again, home, clock).remind == []
    clock.t += 120
    assert [t.session_key for t in announce(again, home, clock).remind] == ["s1"]  # exactly once after the time
    assert announce(again, home, clock).remind == []
    later = announce(ask_once(clock), home, clock)
    assert later.ask == later.remind == []  # nor after another restart
    events = [e["event"] for e in reversed(ledger().history(20))]
    assert events == ["notified", "snoozed", "notified"]


def test_a_turn_that_goes_stale_during_its_snooze_is_not_announced_but_reported_lapsed(tmp_path):
    t0 = time.time()
    home = one_marker(tmp_path, started_at=t0 - 30)  # the default freshness window is 15 minutes
    clock = Clock(t0)
    ask = ask_once(clock)
    (turn,) = Scanner(discover_homes(explicit=[str(home.path)])).scan(clock.t).turns
    snooze_turn(turn, clock.t + 3600, via="test")
    assert announce(ask, home, clock).ask == []
    clock.t += 3601
    review = announce(ask, home, clock)
    assert review.ask == [] and [(t.session_key, t.verdict) for t in review.lapsed] == [("s1", Verdict.STALE)]
    assert "beyond the 15 min freshness window" in review.lapsed[0].reason  # the reason the shell lists
    assert announce(ask, home, clock).lapsed == []  # told once
    assert "notified" not in [e["event"] for e in ledger().history(20)]


def test_a_snooze_never_continues_anything_even_in_auto_mode(tmp_path):
    t0 = time.time()
    home = one_marker(tmp_path, started_at=t0 - 30)
    clock = Clock(t0)
    (turn,) = Scanner(discover_homes(explicit=[str(home.path)])).scan(clock.t).turns
    snooze_turn(turn, clock.t + 300, via="test")
    ask = ask_once(clock)
    review = announce(ask, home, clock, mode="auto")
    assert review.resume == [] and review.ask == []
    clock.t += 301
    review = announce(ask, home, clock, mode="auto")
    assert review.resume == [] and [t.session_key for t in review.remind] == ["s1"]  # reminded, not resumed
    assert "s1" in home.read_markers()


def test_snooze_on_the_command_line_is_recorded_and_shown_in_history(tmp_path):
    home = one_marker(tmp_path, started_at=time.time() - 30)
    out = cli(tmp_path, "snooze", "s1", "--for", "2h", "--json", "--home", str(home.path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["snoozed"] == "s1" and doc["until"] == pytest.approx(time.time() + 7200, abs=60)
    hist = json.loads(cli(tmp_path, "history", "--json").stdout)
    assert [(e["event"], e["session_key"], e["via"]) for e in hist] == [("snoozed", "s1", "cli")]
    assert "prompt" not in hist[0] and PROMPT not in json.dumps(hist)
    text = cli(tmp_path, "history").stdout
    assert "until " + time.strftime("%Y-%m-%d %H:%M", time.localtime(doc["until"])) in text
    assert home.read_markers()["s1"]["prompt"] == PROMPT  # nothing continued, nothing skipped
    # usage errors (exit 2) and refusals (exit 1), each saying why
    assert cli(tmp_path, "snooze", "s1", "--for", "soon", "--home", str(home.path)).returncode == 2
    assert cli(tmp_path, "snooze", "../x", "--home", str(home.path)).returncode == 2
    missing = cli(tmp_path, "snooze", "s2", "--home", str(home.path))
    assert missing.returncode == 1 and "no interrupted turn s2" in missing.stderr
    running = one_marker(tmp_path / "other", writer={"writer_pid": os.getpid(),
                                                      "writer_start_time": psutil.Process().create_time()})
    refused = cli(tmp_path, "snooze", "s1", "--home", str(running.path))
    assert refused.returncode == 1 and "not waiting for you (running" in refused.stderr
