"""core.marker_batch (group commit): waiting writers' changes go in with the holder's, exactly once, and a
holder SIGKILLed at any step of its batch neither loses nor repeats a waiter's change. Real processes, real
files, real locks; Hermes' own writer (the reference module) as the peer that does not lock."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core import fsutil, marker_batch, markers
from hermes_tray_core.markers import MarkerStore, marker_lock_path, marker_path
from tests.support.hermes_reference import reference_or_skip

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not marker_batch.AVAILABLE, reason="group commit is POSIX-only")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.batch_children", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _queue(home: Path) -> Path:
    return Path(marker_batch.queue_dir(os.fspath(marker_path(home))))


def _requests(home: Path) -> list[str]:
    q = _queue(home)
    return sorted(n for n in os.listdir(q) if n.endswith(".req")) if q.is_dir() else []


def _wait_for(cond, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _litter(home: Path) -> list[str]:
    desktop = marker_path(home).parent
    left = [n for n in os.listdir(desktop) if n.endswith((".tmp", ".btmp"))]
    q = _queue(home)
    return left + ([f"queue/{n}" for n in os.listdir(q)] if q.is_dir() else [])


def _json_line(proc: subprocess.Popen, timeout: float = 30) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _holder_with_waiters(home: Path, tmp_path: Path, step: str, waiters: list[list[str]]):
    """A holder inside the lock, the waiters queued behind it, then the holder let go (to die at ``step``)."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    holder = _child("holder", str(home), "h", step, str(ready), str(go))
    _wait_for(ready.exists, "the holder to take the lock")
    procs = []
    for n, args in enumerate(waiters, 1):
        procs.append(_child("waiter", str(home), *args))
        _wait_for(lambda n=n: len(_requests(home)) >= n, "the waiter's request")
    go.touch()
    return holder, procs


def test_queued_changes_go_in_with_the_holders_write_and_each_waiter_gets_its_own_result(
        home: Path, tmp_path: Path) -> None:
    store = MarkerStore(home)
    gone = store.record("gone", "to be cleared")
    store.record("unchanged", "kept")
    holder, procs = _holder_with_waiters(home, tmp_path, "none", [
        ["record", "w1"],
        ["clear", "gone"],
        ["remove", "unchanged", json.dumps({"not": "what is stored"})],
        ["clear", "never-there"],
    ])
    assert _json_line(holder) == {"done": True}
    results = [_json_line(p) for p in procs]
    assert all(r["answered"] for r in results), results  # every change went in with the holder's one write
    assert [r["result"] for r in results] == ["waiter prompt for w1", True, False, False]
    final = store.list()
    assert set(final) == {"h", "w1", "unchanged"}
    assert final["h"]["prompt"] == "holder prompt for h" and final["w1"]["prompt"] == "waiter prompt for w1"
    assert "gone" not in final and gone["prompt"] == "to be cleared"
    assert _litter(home) == []


def _kill_holder(home: Path, tmp_path: Path, step: str, seed: str, waiter: list[str]) -> tuple[MarkerStore, dict]:
    """``seed`` stored, a waiter queued behind a holder that is SIGKILLed at ``step``: the waiter's report."""
    store = MarkerStore(home)
    store.record(seed, "there before")
    holder, (proc,) = _holder_with_waiters(home, tmp_path, step, [waiter])
    holder.wait(60)
    assert holder.returncode == -signal.SIGKILL
    return store, _json_line(proc)


@pytest.mark.parametrize("step", ["before_record", "after_record"])
def test_a_holder_killed_before_its_exchange_leaves_the_waiter_to_write_its_own_change(
        home: Path, tmp_path: Path, step: str) -> None:
    store, result = _kill_holder(home, tmp_path, step, "old", ["record", "w"])
    assert result == {"answered": False, "result": "waiter prompt for w"}  # written by itself, once
    assert set(store.list()) == {"old", "w"}  # the holder's own change died with it, before it went in
    store.record("next", "p")  # the next write settles whatever the kill left
    assert _litter(home) == []


@pytest.mark.parametrize("step", ["after_exchange", "in_hand_out", "after_hand_out", "before_dir_fsync"])
def test_a_holder_killed_after_its_exchange_still_answers_the_waiter_exactly_once(
        home: Path, tmp_path: Path, step: str) -> None:
    store, result = _kill_holder(home, tmp_path, step, "x", ["clear", "x"])
    # Applied twice, the clear would answer False ("there was none"): the result proves it went in once.
    assert result == {"answered": True, "result": True}
    assert set(store.list()) == {"h"}
    store.record("next", "p")
    assert _litter(home) == []


def test_a_change_that_went_in_is_never_repeated_over_a_later_hermes_write(home: Path, tmp_path: Path) -> None:
    """The resurrection case: the batch with the waiter's record went in, Hermes then concluded that turn
    (cleared it), and the holder died before answering. Repeating the waiter's record would bring a
    finished turn back as interrupted — a turn run twice."""
    reference_or_skip()
    store, result = _kill_holder(home, tmp_path, "after_exchange_hermes_clears=w", "old", ["record", "w"])
    assert result == {"answered": True, "result": "waiter prompt for w"}
    assert set(store.list()) == {"old", "h"}  # w stays cleared
    assert _litter(home) == []


def test_a_waiter_killed_while_queued_never_has_its_change_applied(home: Path, tmp_path: Path) -> None:
    store = MarkerStore(home)
    store.record("old", "there before")
    ready, go = tmp_path / "ready", tmp_path / "go"
    holder = _child("holder", str(home), "h", "none", str(ready), str(go))
    _wait_for(ready.exists, "the holder to take the lock")
    doomed = _child("waiter", str(home), "record", "doomed")
    _wait_for(lambda: len(_requests(home)) == 1, "the waiter's request")
    doomed.kill()
    doomed.wait(10)
    go.touch()
    assert _json_line(holder) == {"done": True}
    assert set(store.list()) == {"old", "h"}  # nobody was waiting for it: it never happened
    assert _requests(home) == []


def test_hostile_queue_files_are_dropped_without_breaking_the_write(home: Path, caplog) -> None:
    store = MarkerStore(home)
    store.record("old", "there before")
    q = _queue(home)
    fsutil.ensure_private_dir(q)
    (q / f"{time.time_ns():020d}.1.0badc0de.req").write_bytes(b"\x00not json")
    (q / "1.0badc0de.batch").write_bytes(b"{torn")
    (q / "junk name").write_text("ignored")
    with caplog.at_level("WARNING"):
        lock = fsutil.open_private_lockfile(marker_lock_path(home))
        try:
            fsutil.lock_fd(lock)
            # Under the lock, as a holder: the unreadable record goes, the unlocked request (no waiter) goes.
            assert marker_batch.collect(os.fspath(marker_path(home))) is None
        finally:
            fsutil.unlock_fd(lock)
            os.close(lock)
    assert sorted(os.listdir(q)) == ["junk name"]
    assert "unreadable marker batch record" in caplog.text
    store.record("new", "p")
    assert set(store.list()) == {"old", "new"}


def test_a_symlinked_queue_directory_is_never_followed(home: Path, tmp_path: Path) -> None:
    store = MarkerStore(home)
    store.record("old", "there before")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _queue(home).symlink_to(elsewhere)
    assert marker_batch.submit(os.fspath(marker_path(home)), {"op": "clear", "key": "old"}) is None
    assert marker_batch.collect(os.fspath(marker_path(home))) is None
    assert os.listdir(elsewhere) == []


def test_queue_files_are_private(home: Path, tmp_path: Path) -> None:
    MarkerStore(home).record("old", "there before")
    request = marker_batch.submit(os.fspath(marker_path(home)), {"op": "clear", "key": "old"})
    assert request is not None
    try:
        assert stat.S_IMODE(os.stat(_queue(home)).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(request.path).st_mode) == 0o600
    finally:
        request.finish()
    assert _requests(home) == []


def test_a_batch_temp_file_is_swept_only_when_no_record_needs_it(home: Path) -> None:
    MarkerStore(home).record("old", "there before")
    p = os.fspath(marker_path(home))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = child.pid
    named = marker_batch.batch_temp_path(p, f"{dead}.0000abcd")
    unnamed = marker_batch.batch_temp_path(p, f"{dead}.0000beef")
    mine = marker_batch.batch_temp_path(p, f"{os.getpid()}.0000cafe")
    for path in (named, unnamed, mine):
        Path(path).write_bytes(b"{}")
    fsutil.ensure_private_dir(_queue(home))
    (_queue(home) / f"{dead}.0000abcd.batch").write_text(json.dumps({"ino": os.stat(named).st_ino, "results": {}}))
    names = os.listdir(marker_path(home).parent)
    assert marker_batch.sweep_batch_temps(p, names) == 1
    assert os.path.exists(named) and os.path.exists(mine) and not os.path.exists(unnamed)
    # The record's holder is gone and its temp file still holds the recorded inode: it never went in.
    marker_batch.recover(p)
    assert not os.path.exists(named) and os.listdir(_queue(home)) == []
    os.unlink(mine)


def test_apply_change_refuses_what_is_not_a_marker_change() -> None:
    for bad in ({}, {"op": "drop", "key": "k"}, {"op": "clear", "key": ""}, {"op": "remove", "key": "k"},
                {"op": "record", "key": "k", "entry": {}, "now": float("inf")},
                {"op": "record", "key": "k", "entry": "x", "now": 1.0}):
        with pytest.raises(ValueError):
            markers.apply_change({}, bad)
