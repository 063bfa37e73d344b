"""Detection wakes on what matters without polling: a writer's death, a marker appearing in a home
that had no desktop/ yet, and the engine's verdict follows within a few milliseconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from PySide6.QtCore import QCoreApplication

from hermes_tray.watch.fswatch import HomeWatcher
from hermes_tray.watch.pidwatch import PidfdWatcher, ThreadPidWatcher, make_pid_watcher

pytestmark = pytest.mark.serial  # checks wake-up latencies: alone, not beside parallel tests


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _watch_a_turn_written_by(proc, tmp_path, *, exits: bool = False):
    """A home whose one turn names ``proc`` as its writer, watched by the tray's detector on its own thread
    (``exits``: told of the writer's exit by the engine, as the tray wires it). The running thread and the
    list its scan reports land in."""
    from hermes_tray.engine import CoreEngine
    from hermes_tray.watch.detector import Detector, DetectorThread
    from hermes_tray_core.hermes.homes import discover_homes
    from tests.support.fixture_homes import FixtureHome, marker_entry

    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Fix the flaky test")
    writer = {"writer_pid": proc.pid, "writer_start_time": psutil.Process(proc.pid).create_time()}
    home.write_markers({"s1": marker_entry(writer=writer)})
    engine = CoreEngine([str(home.path)])
    det = Detector(engine.scan, engine.watch_plan, engine.writers, discover_homes(explicit=[str(home.path)]),
                   **({"exited": engine.writer_exited} if exits else {}))
    thread = DetectorThread(det)
    reports: list = []
    det.scanned.connect(reports.append)
    thread.start()
    return thread, reports


@pytest.mark.parametrize("kind", ["best", "thread"])
def test_writer_exit_wakes_at_once(qtbot, kind) -> None:
    watcher = make_pid_watcher() if kind == "best" else ThreadPidWatcher()
    if kind == "best" and sys.platform.startswith("linux"):
        assert isinstance(watcher, PidfdWatcher)
    proc = _sleeper()
    try:
        assert watcher.watch(proc.pid, psutil.Process(proc.pid).create_time())
        with qtbot.waitSignal(watcher.exited, timeout=3000) as got:
            t0 = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)
        elapsed = time.monotonic() - t0
        assert got.args == [proc.pid]
        assert elapsed < 1.0  # the promise: noticed within a second (measured: milliseconds, bench_tray)
        assert proc.pid not in watcher.watched()
    finally:
        proc.kill()
        proc.wait()


def test_recycled_pid_is_not_watched(qtbot) -> None:
    proc = _sleeper()
    try:
        watcher = make_pid_watcher()
        assert not watcher.watch(proc.pid, psutil.Process(proc.pid).create_time() - 100)
    finally:
        proc.kill()
        proc.wait()


def test_missing_desktop_dir_is_picked_up_through_its_parent(qtbot, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    w = HomeWatcher()
    w.set_plan([home / "desktop", home / "profiles"], [home / "desktop" / "interrupted_turns.json"])
    assert w.watched_paths() == {str(home)}
    (home / "state.db-wal").write_bytes(b"x")  # churn in the home itself is not a marker change
    qtbot.wait(100)
    with qtbot.waitSignal(w.changed, timeout=3000):
        (home / "desktop").mkdir()
    qtbot.waitUntil(lambda: str(home / "desktop") in w.watched_paths())
    with qtbot.waitSignal(w.changed, timeout=3000) as got:
        tmp = home / "desktop" / ".tmp"
        tmp.write_text("{}")
        os.replace(tmp, home / "desktop" / "interrupted_turns.json")
    assert got.args[0].startswith(str(home / "desktop"))


def test_stand_in_parent_does_not_wake_on_unrelated_churn(qtbot, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    w = HomeWatcher()
    w.set_plan([home / "desktop"])
    hits = []
    w.changed.connect(hits.append)
    for i in range(5):
        (home / f"state.db-shm{i}").write_bytes(b"x")
    qtbot.wait(200)
    QCoreApplication.processEvents()
    assert hits == []


def test_a_storm_of_rewrites_wakes_a_few_times_a_second_and_its_last_change_is_not_lost(qtbot, tmp_path) -> None:
    """Issue 35.7. Before: every rewrite of the marker file re-applied the whole plan (a millisecond each) and
    woke the detector: most of the helper's CPU under a storm. Now a burst is reported at its start and, if
    anything changed meanwhile, again when it ends (``fswatch.BURST_MS``), and a change after a quiet spell
    is reported at once."""
    home = tmp_path / "home"
    (home / "desktop").mkdir(parents=True)
    marker = home / "desktop" / "interrupted_turns.json"
    w = HomeWatcher()
    w.set_plan([home / "desktop"], [marker])
    hits: list[float] = []
    w.changed.connect(lambda _path: hits.append(time.monotonic()))
    writes, end = 0, time.monotonic() + 1.0
    while time.monotonic() < end:
        tmp = home / "desktop" / ".interrupted_turns_x.tmp"
        tmp.write_text(str(writes))
        os.replace(tmp, marker)
        writes += 1
        QCoreApplication.processEvents()
    last_write = time.monotonic()
    qtbot.wait(800)
    assert writes > 100
    assert 1 <= len(hits) <= 8, f"{len(hits)} wake-ups for {writes} rewrites"
    assert hits[-1] >= last_write - 0.3, "the rewrites at the end of the storm were reported too"
    before = len(hits)
    with qtbot.waitSignal(w.changed, timeout=1000):
        marker.write_text("quiet again")
    assert len(hits) == before + 1


def test_detector_reports_actionable_after_sigkill(qtbot, tmp_path) -> None:
    """The whole background path with the real engine: live writer → SIGKILL → actionable."""
    proc = _sleeper()
    try:
        thread, reports = _watch_a_turn_written_by(proc, tmp_path)
        try:
            _wait_and_kill(qtbot, reports, proc)
        finally:
            thread.stop()
    finally:
        proc.kill()
        proc.wait()


def test_a_writer_the_oom_killer_ends_is_said_to_have_run_out_of_memory_and_when(qtbot, tmp_path) -> None:
    """The tray's own watch, as the tray and the helper wire it: the writer runs in a memory group of its own;
    while it lives the engine's witness notes what the kernel can later say about it; it allocates past its
    group's limit and the kernel ends it. The scan its exit wakes says why the turn stopped, with the fact about
    that very process, and that it was interrupted then."""
    from tests.support.memcg import hog, memory_group, oom_kill

    with memory_group() as (group, _kind):
        proc = hog(group)
        try:
            thread, reports = _watch_a_turn_written_by(proc, tmp_path, exits=True)
            try:
                qtbot.waitUntil(lambda: bool(reports and reports[-1].records), timeout=5000)
                assert reports[-1].records[0].verdict == "running" and reports[-1].records[0].cause is None
                oom_kill(proc)
                died = time.time()
                qtbot.waitUntil(lambda: reports[-1].records[0].verdict == "actionable", timeout=3000)
            finally:
                thread.stop()
        finally:
            proc.kill()
            proc.wait()
    rec = reports[-1].records[0]
    assert reports[-1].reason.startswith("writer-exit")
    assert rec.cause == "out-of-memory" and f"pid {proc.pid}" in rec.cause_fact
    assert rec.moment[0] == "interrupted" and abs(rec.moment[1] - died) < 2.0


def _wait_and_kill(qtbot, reports, proc) -> None:
    qtbot.waitUntil(lambda: bool(reports and reports[-1].records), timeout=5000)
    assert reports[-1].records[0].verdict == "running"
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.time()
    qtbot.waitUntil(lambda: reports[-1].records[0].verdict == "actionable", timeout=3000)
    assert reports[-1].reason.startswith("writer-exit")
    assert reports[-1].finished - killed < 1.0  # within a second, the promise (milliseconds, bench_tray)


def _detect(qtbot, engine):
    """The real detector thread on ``engine``, with its homes provider as the tray wires it."""
    from hermes_tray.watch.detector import Detector, DetectorThread

    det = Detector(engine.scan, engine.watch_plan, engine.writers, engine.homes(), homes_fn=engine.homes)
    thread = DetectorThread(det)
    reports: list = []
    det.scanned.connect(reports.append)
    thread.start()
    qtbot.waitUntil(lambda: bool(reports), timeout=5000)
    return det, thread, reports


def _keys(reports) -> set[str]:
    return {r.session_key for r in reports[-1].records} if reports else set()


def test_new_profile_is_scanned_without_restart(qtbot, tmp_path, monkeypatch) -> None:
    """A profile created while the tray runs: its interrupted turn shows up, no restart, no poll."""
    from hermes_tray.engine import CoreEngine
    from tests.support.fixture_homes import FixtureHome, marker_entry

    root = tmp_path / "hermes"
    FixtureHome(root)
    monkeypatch.setenv("HERMES_HOME", str(root))
    det, thread, reports = _detect(qtbot, CoreEngine())
    try:
        prof = FixtureHome(root / "profiles" / "work")
        prof.add_session("p1", title="In the work profile")
        prof.write_markers({"p1": marker_entry()})
        qtbot.waitUntil(lambda: "p1" in _keys(reports), timeout=5000)
        assert any(str(h.path).endswith("work") for h in reports[-1].homes)
    finally:
        thread.stop()


def test_home_added_in_settings_is_scanned_without_restart(qtbot, tmp_path, monkeypatch) -> None:
    """A home added to the tray settings (the CLI, the dialog) is watched from then on."""
    from hermes_tray.engine import CoreEngine
    from hermes_tray_core.stores.settings import update_settings
    from tests.support.fixture_homes import FixtureHome, marker_entry

    FixtureHome(tmp_path / "hermes")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    other = FixtureHome(tmp_path / "elsewhere")
    other.add_session("e1", title="Elsewhere")
    other.write_markers({"e1": marker_entry()})
    det, thread, reports = _detect(qtbot, CoreEngine())
    try:
        assert "e1" not in _keys(reports)
        update_settings({"homes": [str(other.path)]})
        det.rescan("settings")  # what Controller.apply asks for; the settings file watch does too
        qtbot.waitUntil(lambda: "e1" in _keys(reports), timeout=5000)
        # and it is watched: a new turn there wakes a scan by itself
        other.add_session("e2", title="Second")
        other.write_markers({"e1": marker_entry(), "e2": marker_entry()})
        qtbot.waitUntil(lambda: "e2" in _keys(reports), timeout=5000)
    finally:
        thread.stop()


def _pidwait_threads(pid: int) -> int:
    import threading

    return sum(1 for t in threading.enumerate() if t.name == f"pidwait-{pid}" and t.is_alive())


@pytest.mark.parametrize("waiter", ["best", "poll"])
def test_thread_watcher_unwatch_and_rewatch_leave_no_threads(qtbot, waiter) -> None:
    """The portable watcher (macOS/Windows path, with this OS's waiter or the last-resort poll):
    unwatching ends the waiting thread at once, re-watching never piles threads up, and a watched
    process's exit is still reported."""
    if waiter == "best":
        watcher = ThreadPidWatcher()
    else:
        from hermes_tray.watch.pidwatch import PollWaiter

        watcher = ThreadPidWatcher(waiter=lambda pid: PollWaiter(pid, interval=0.05))
    proc = _sleeper()
    try:
        start = psutil.Process(proc.pid).create_time()
        for _ in range(20):
            assert watcher.watch(proc.pid, start)
            watcher.unwatch(proc.pid)
        qtbot.waitUntil(lambda: _pidwait_threads(proc.pid) == 0, timeout=2000)
        assert watcher.watch(proc.pid, start)
        assert _pidwait_threads(proc.pid) == 1
        with qtbot.waitSignal(watcher.exited, timeout=3000) as got:
            os.kill(proc.pid, signal.SIGKILL)
        assert got.args == [proc.pid]
        qtbot.waitUntil(lambda: _pidwait_threads(proc.pid) == 0, timeout=2000)
    finally:
        proc.kill()
        proc.wait()


def test_waiter_choice_per_platform() -> None:
    """Every OS gets a blocking exit wait; the poll is only the last resort. (Only the Linux
    waiters can run here; the module imports everywhere.)"""
    import select as select_mod

    from hermes_tray.watch import pidwatch

    assert pidwatch.waiter_factory("win32") is pidwatch.WindowsWaiter
    expected_mac = pidwatch.KqueueWaiter if hasattr(select_mod, "kqueue") else pidwatch.PollWaiter
    assert pidwatch.waiter_factory("darwin") is expected_mac
    assert pidwatch.waiter_factory("sunos5") is pidwatch.PollWaiter
    if sys.platform.startswith("linux") and hasattr(os, "pidfd_open"):
        assert pidwatch.waiter_factory() is pidwatch.PidfdWaiter


# --- one home's trouble stays in that home ---------------------------------------------------------------


def test_a_path_that_cannot_be_looked_at_is_not_watched_and_stops_nothing(qtbot, tmp_path) -> None:
    """A home whose name is too long for the file system in the plan: the good home is still watched."""
    long = tmp_path / ("x" * 300)
    good = tmp_path / "good"
    (good / "desktop").mkdir(parents=True)
    w = HomeWatcher()
    w.set_plan([long / "desktop", good / "desktop"], [long / "config.yaml", good / "desktop" / "interrupted_turns.json"])
    assert str(good / "desktop") in w.watched_paths()
    with qtbot.waitSignal(w.changed, timeout=3000):
        (good / "desktop" / "interrupted_turns.json").write_text("{}")


@pytest.mark.timeout(120)
def test_a_change_in_one_home_never_looks_at_another_homes_drive(qtbot, tmp_path) -> None:
    """A drive that stops answering after it was planned: changes in the good home are still reported, and
    re-examining the plan never touches the dead drive (it would hang the detector thread for good)."""
    from tests.support import dead_mount as dm

    if dm.available():
        pytest.skip(dm.available())
    good = tmp_path / "good"
    (good / "desktop").mkdir(parents=True)
    drive = tmp_path / "drive"
    (drive / "hermes" / "desktop").mkdir(parents=True)
    w = HomeWatcher()
    w.set_plan([good / "desktop", drive / "hermes" / "desktop"])
    assert str(drive / "hermes" / "desktop") in w.watched_paths()
    with dm.dead_mount(drive, give_up_after=30):  # the drive goes away under the watch
        for i in range(3):
            with qtbot.waitSignal(w.changed, timeout=5000) as got:
                (good / "desktop" / f"interrupted_turns.json{i}").write_text("{}")
            assert got.args[0] == str(good / "desktop")


def test_a_writer_the_os_will_not_watch_stops_no_other(qtbot, tmp_path, rec) -> None:
    """One marker names a pid no kernel has (2**70): the real writer beside it is still watched, and its
    death wakes a scan at once."""
    from hermes_tray.contract import ScanSummary
    from hermes_tray.engine import CoreEngine
    from hermes_tray.watch.detector import Detector, DetectorThread

    proc = _sleeper()
    alive = [rec("bad", writer="alive", entry={"writer_pid": 2**70}),
             rec("good", writer="alive", entry={"writer_pid": proc.pid})]
    reports: list = []
    det = Detector(lambda _homes: (alive if proc.poll() is None else [], [], ScanSummary()),
                   lambda _homes: ([], []), CoreEngine([str(tmp_path)]).writers, [])
    thread = DetectorThread(det)
    det.scanned.connect(reports.append)
    thread.start()
    try:
        qtbot.waitUntil(lambda: bool(reports), timeout=5000)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # the death wakes a scan (a "writer-gone" look may follow it: the fake scan can still list the writer)
        qtbot.waitUntil(lambda: any(r.reason.startswith("writer-exit") for r in reports), timeout=5000)
    finally:
        thread.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
