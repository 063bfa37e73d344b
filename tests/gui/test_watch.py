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


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


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
        assert elapsed < 0.5
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


def test_detector_reports_actionable_after_sigkill(qtbot, tmp_path) -> None:
    """The whole background path with the real engine: live writer → SIGKILL → actionable."""
    from core.homes import discover_homes
    from hermes_tray.engine import CoreEngine
    from hermes_tray.watch.detector import Detector, DetectorThread
    from tests.support.fixture_homes import FixtureHome, marker_entry

    proc = _sleeper()
    try:
        home = FixtureHome(tmp_path / "hermes")
        home.add_session("s1", title="Fix the flaky test")
        writer = {"writer_pid": proc.pid, "writer_start_time": psutil.Process(proc.pid).create_time()}
        home.write_markers({"s1": marker_entry(writer=writer)})
        engine = CoreEngine([str(home.path)])
        homes = discover_homes(explicit=[str(home.path)])
        det = Detector(engine.scan, engine.watch_plan, engine.writers, homes)
        thread = DetectorThread(det)
        reports = []
        det.scanned.connect(reports.append)
        thread.start()
        try:
            _wait_and_kill(qtbot, reports, proc)
        finally:
            thread.stop()
    finally:
        proc.kill()
        proc.wait()


def _wait_and_kill(qtbot, reports, proc) -> None:
    qtbot.waitUntil(lambda: bool(reports and reports[-1].records), timeout=5000)
    assert reports[-1].records[0].verdict == "running"
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.time()
    qtbot.waitUntil(lambda: reports[-1].records[0].verdict == "actionable", timeout=3000)
    assert reports[-1].reason.startswith("writer-exit")
    assert reports[-1].finished - killed < 0.5
