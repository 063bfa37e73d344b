"""Process identity through a wall-clock step (issue 27): real processes, a clock stepped as the kernel steps
it (psutil's boot time moves by ±10 s / ±1 h between recording an identity and checking it:
``tests/support/clock_step.py``), and the verdicts a user would see.

The tray's own records (its lease store, the identities it keeps) compare start marks a step cannot move.
Identities Hermes wrote (a marker's writer, a turn lease's owner, an active-session owner) are psutil create
times; the tray reads them through the step when the pid is a live Hermes process serving that home, and a
recycled pid of any other process still reads dead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from hermes_tray.demo import sim_state
from hermes_tray_core.continuing.resume import assess
from hermes_tray_core.hermes.state_db import active_session_owner, turn_lease_view
from hermes_tray_core.markers.entries import marker_writer_state, writer_judgement
from hermes_tray_core.process import identity as procid
from hermes_tray_core.process.identity import STEP_WINDOW_S, identity_of, own_pidns, process_start_time
from hermes_tray_core.process.start_mark import same_process, start_mark
from hermes_tray_core.stores.lease import LeaseStore
from hermes_tray_core.turn import Marker, Turn
from tests.support.fake_hermes import fake_hermes, kill
from tests.support.sim_homes import make_home, plant_marker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the clock step is simulated through Linux's /proc")

PROMPT = "Refactor the importer and keep the CLI flags."


def _home(tmp_path: Path) -> tuple[Path, str]:
    return make_home(tmp_path / "home")


def _lease_row(home: Path, key: str, pid: int, start: float | None) -> None:
    """A turn lease as a newer Hermes writes it: held by ``pid`` (its create time as Hermes read it)."""
    ns = own_pidns()
    holder = f"pid={pid}" + (f":pidns={ns}" if ns is not None else "") + ":turn=t1:platform=tui"
    conn = sim_state.connect(home)
    try:
        now = time.time()
        conn.execute("INSERT OR REPLACE INTO session_turn_leases (conversation_id, holder, acquired_at, expires_at,"
                     " epoch, owner_pid, owner_pid_start) VALUES (?, ?, ?, ?, 1, ?, ?)",
                     (key, holder, now, now + 300, pid, start))
    finally:
        conn.close()


def _registry(home: Path, key: str, pid: int, start: float | None) -> None:
    (home / "runtime").mkdir(exist_ok=True)
    (home / "runtime" / "active_sessions.json").write_text(json.dumps({"entries": [
        {"session_id": key, "pid": pid, "process_start_time": start, "surface": "desktop"}]}))


# ── the tray's own records ─────────────────────────────────────────────────


def test_the_trays_own_identity_of_a_process_survives_the_step_and_still_tells_a_new_process(clock_step):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = identity_of(child.pid)
        clock_step.step()
        assert ident.liveness() == "alive"
        assert identity_of(child.pid).mark == ident.mark  # boot id + start ticks: the step moves neither
        # The same pid with another start (a recycled pid) is another process, whatever the clock did.
        boot, pid, ticks = ident.mark.split(":", 1)[1].rsplit(":", 2)
        assert same_process(f"linux:{boot}:{pid}:{int(ticks) + 1}", child.pid) is False
        assert procid.ProcessIdentity(child.pid, ident.start_time, f"linux:{boot}:{pid}:{int(ticks) + 1}"
                                      ).liveness() == "dead"
    finally:
        kill(child)
    assert ident.liveness() == "dead"


HOLDER = textwrap.dedent("""
    import sys, time
    from hermes_tray_core.stores.lease import LeaseStore
    s = LeaseStore(sys.argv[1])
    lease = s.acquire("resume:h:s1", "child", ttl=600)
    print("held" if lease else "missed", flush=True)
    time.sleep(120)
""")


def test_a_live_holder_keeps_its_lease_in_the_trays_store_and_a_killed_one_loses_it(tmp_path, clock_step):
    store = LeaseStore(tmp_path / "leases.sqlite3")
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        mine = store.acquire("resume:h:mine", "this process", ttl=600)
        assert mine is not None
        clock_step.step()
        assert store.current("resume:h:s1") is not None  # the holder lives: the claim is still its
        assert store.acquire("resume:h:s1", "me", ttl=5) is None
        assert store.current("resume:h:mine") == mine  # and this process's own claim is still its own
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert store.acquire("resume:h:s1", "me", ttl=5) is not None  # a dead holder still loses it at once
    finally:
        kill(child)
        store.close()


# ── identities Hermes wrote ────────────────────────────────────────────────


def test_a_live_hermes_writer_holder_and_owner_stay_alive_through_the_step(tmp_path, clock_step):
    home, key = _home(tmp_path)
    with fake_hermes("gateway", tmp_path, env={"HERMES_HOME": str(home)}) as (proc, _):
        start = process_start_time(proc.pid)  # what Hermes records: its create time, as psutil read it
        entry = plant_marker(home, key, PROMPT, writer=procid.ProcessIdentity(proc.pid, start))
        _lease_row(home, key, proc.pid, start)
        _registry(home, key, proc.pid, start)
        clock_step.step()
        judged = writer_judgement(Marker.read(entry), home)
        assert judged.state == "alive" and marker_writer_state(entry, home) == "alive"
        assert turn_lease_view(home, key).state == "live"
        assert active_session_owner(home, key).state == "alive"
        if clock_step.delta:
            # Hermes' own rule (1 ms) calls it gone: the tray says so, and is the safer of the two.
            assert judged.hermes == "dead" and judged.shift == pytest.approx(clock_step.delta)
            assert "wall-clock step" in judged.note and "Hermes' own check would call it gone" in judged.note
            assert "wall-clock step" in turn_lease_view(home, key).detail
        a = assess(Turn.of(home, key, entry))
        assert a.verdict == "running" and "still running" in a.reason
        assert ("wall-clock step" in a.reason) == bool(clock_step.delta)
    # The same records once that process is gone (SIGKILLed): dead, free, dead — the step changes nothing.
    assert marker_writer_state(entry, home) == "dead"
    assert turn_lease_view(home, key).state == "free"
    assert active_session_owner(home, key).state == "dead"
    assert assess(Turn.of(home, key, entry)).verdict == "actionable"


def test_a_recycled_pid_of_a_process_that_is_not_hermes_still_reads_dead(tmp_path, clock_step):
    home, key = _home(tmp_path)
    with fake_hermes("other", tmp_path, env={"HERMES_HOME": str(home)}) as (proc, _):
        # The writer was another process that had this pid: it started 30 s before the one there now.
        start = process_start_time(proc.pid) - 30
        entry = plant_marker(home, key, PROMPT, writer=procid.ProcessIdentity(proc.pid, start))
        _lease_row(home, key, proc.pid, start)
        _registry(home, key, proc.pid, start)
        clock_step.step()
        assert marker_writer_state(entry, home) == "dead"
        assert turn_lease_view(home, key).state == "free"
        assert active_session_owner(home, key).state == "dead"
        assert assess(Turn.of(home, key, entry)).verdict == "actionable"


def test_a_hermes_of_another_home_or_a_start_beyond_the_window_is_another_process(tmp_path, clock_step):
    home, key = _home(tmp_path)
    other = tmp_path / "other-home"
    other.mkdir()
    with fake_hermes("gateway", tmp_path, env={"HERMES_HOME": str(other)}) as (proc, _):
        start = process_start_time(proc.pid)
        clock_step.step()
        entry = {"writer_pid": proc.pid, "writer_start_time": start + 0.5}
        assert marker_writer_state(entry, home) == "dead"  # a Hermes, but not this home's
        assert marker_writer_state(entry, other) == "alive"  # this home's: a step of 0.5 s read through
        far = {"writer_pid": proc.pid, "writer_start_time": process_start_time(proc.pid) - STEP_WINDOW_S - 60}
        assert marker_writer_state(far, other) == "dead"  # no clock step is a day wide
        # Residual risk, kept visible: a pid recycled, within the window, by another Hermes process serving
        # the same home reads as the writer (the tray leaves that turn alone while it runs).
        assert marker_writer_state({"writer_pid": proc.pid, "writer_start_time": start - 600}, other) == "alive"


def test_a_live_hermes_holds_the_lease_in_a_scan_through_the_step(tmp_path, clock_step):
    """The scanner's batched state.db read judges lease holders with the same rule."""
    from hermes_tray_core.hermes.homes import discover_homes
    from hermes_tray_core.scanning.scanner import scan

    home, key = _home(tmp_path)
    with fake_hermes("dashboard", tmp_path, env={"HERMES_HOME": str(home)}) as (proc, _):
        start = process_start_time(proc.pid)
        plant_marker(home, key, PROMPT)  # its writer has exited: only the lease says a turn runs
        _lease_row(home, key, proc.pid, start)
        clock_step.step()
        turn = {t.session_key: t for t in scan(discover_homes(explicit=[home])).turns}[key]
        assert turn.verdict == "running" and "turn lease" in turn.reason


def test_own_start_time_psutil_read_once_is_what_hermes_compares_for_itself(clock_step):
    """The judging process's own pid: Hermes compares its cached create time, and so does the tray."""
    me = procid.own_identity()
    clock_step.step()
    assert procid.hermes_liveness(os.getpid(), me.start_time) == "alive"
    assert start_mark(os.getpid()) == me.mark
    if clock_step.delta:
        assert psutil.Process().create_time() != me.start_time  # what a fresh 1 ms comparison would trip on
