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
from tests.support.exchange_hooks import hooked_parts
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


def test_a_holder_killed_after_a_busy_put_back_leaves_the_waiter_to_write_its_change(
        home: Path, tmp_path: Path) -> None:
    """Hermes renamed H1 in right before the holder's exchange and H2 over ours before the put-back; the
    put-back settled (H2 stands, H1 at the holder's temp name) and the holder was killed before it
    dropped its record. The batch is not in: ours was destroyed. Reading "anything but ours at the temp
    name means in" answered the waiter for a change that was never written; H1, which may be newer than
    what stands for all the next holder knows, is kept, not deleted."""
    store, result = _kill_holder(home, tmp_path, "after_busy_put_back", "x", ["record", "w"])
    assert result == {"answered": False, "result": "waiter prompt for w"}  # written by itself, once
    assert set(store.list()) == {"x", "hermes2", "w"}  # Hermes' newest stands, the waiter's change on it
    kept = [n for n in os.listdir(marker_path(home).parent) if ".unmerged-" in n]
    assert len(kept) == 1 and "hermes1" in json.loads((marker_path(home).parent / kept[0]).read_bytes())


def test_a_holder_killed_before_its_put_back_answers_the_waiter_from_ours_and_keeps_hermes_version(
        home: Path, tmp_path: Path) -> None:
    """H1 landed right before the holder's exchange; the holder died before putting it back: ours (with
    the waiter's change) stands, H1 is at the holder's temp name. The batch is in, so the waiter is
    answered (a repeated clear would answer False); H1 is kept beside the file, never deleted."""
    store, result = _kill_holder(home, tmp_path, "in_put_back", "x", ["clear", "x"])
    assert result == {"answered": True, "result": True}
    assert set(store.list()) == {"h"}  # ours stood: the holder's record, and x cleared once
    kept = [n for n in os.listdir(marker_path(home).parent) if ".unmerged-" in n]
    assert len(kept) == 1 and "hermes1" in json.loads((marker_path(home).parent / kept[0]).read_bytes())


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


def _queued(home: Path, change: dict) -> marker_batch.Request:
    """A change queued by this process (its request lock held here, so a holder sees a live waiter)."""
    request = marker_batch.submit(os.fspath(marker_path(home)), change)
    assert request is not None
    return request


def _answer_under_lock(home: Path, request: marker_batch.Request) -> tuple[bool, object]:
    lock = fsutil.open_private_lockfile(marker_lock_path(home))
    try:
        fsutil.lock_fd(lock)
        marker_batch.recover(os.fspath(marker_path(home)))
        return request.result(final=True)
    finally:
        fsutil.unlock_fd(lock)
        os.close(lock)


def test_an_exception_right_after_the_exchange_keeps_the_record_so_the_waiter_is_answered(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal (KeyboardInterrupt) or a failed put-back after the kernel exchange ran: the batch is in, so
    its record must stay and answer the waiter. Dropping it would have the waiter apply its change again."""
    store = MarkerStore(home)
    store.record("x", "to be cleared by the waiter")
    request = _queued(home, {"op": "clear", "key": "x"})
    real = markers.atomic_exchange.swap_in_verified

    def interrupted(*args):
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.record("h", "holder")
    monkeypatch.undo()
    try:
        assert _answer_under_lock(home, request) == (True, True)  # answered: applying it again would say False
    finally:
        request.finish()
    assert set(store.list()) == {"h"}
    store.record("next", "p")
    assert _litter(home) == []


def test_a_recovery_cut_off_between_its_two_removals_never_reads_as_went_in(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead holder's record whose batch never went in is settled by removing the record, then the temp
    file. Cut off in between (here: the second removal fails), the next recovery must still not hand out
    results — a record without its temp file reads "went in"."""
    store = MarkerStore(home)
    store.record("x", "stays")
    p = os.fspath(marker_path(home))
    request = _queued(home, {"op": "clear", "key": "x"})
    tmp = marker_batch.batch_temp_path(p, "999999.0000abcd")
    Path(tmp).write_bytes(b"{}")
    (_queue(home) / "999999.0000abcd.batch").write_text(
        json.dumps({"ino": os.stat(tmp).st_ino, "results": {request.name: True}}))
    real = marker_batch._unlink
    calls: list[str] = []

    def cut_off(path: str) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(5, "cut off")
        real(path)

    monkeypatch.setattr(marker_batch, "_unlink", cut_off)
    with pytest.raises(OSError):
        marker_batch.recover(p)
    monkeypatch.undo()
    try:
        assert _answer_under_lock(home, request) == (False, None)  # never went in: not answered
    finally:
        request.finish()
    assert "x" in store.list()
    os.unlink(tmp)


def test_a_waiter_interrupted_while_waiting_takes_its_change_back(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MarkerStore(home)
    store.record("x", "stays")
    lock = fsutil.open_private_lockfile(marker_lock_path(home))
    fsutil.lock_fd(lock)  # the lock is busy: the clear below queues its change, then waits

    def interrupted(fd: int, **_kw) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fsutil, "lock_fd", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            store.clear("x")
    finally:
        monkeypatch.undo()
        fsutil.unlock_fd(lock)
        os.close(lock)
    assert _requests(home) == []  # nothing left for the next holder to apply behind the caller's back
    store.record("next", "p")
    assert set(store.list()) == {"x", "next"}


def test_a_record_nested_past_the_parser_never_stops_a_write(home: Path) -> None:
    store = MarkerStore(home)
    store.record("old", "there before")
    q = _queue(home)
    fsutil.ensure_private_dir(q)
    (q / "1.0badc0de.batch").write_bytes(b"[" * 200_000)  # json.loads raises RecursionError on it
    store.record("new", "p")
    assert set(store.list()) == {"old", "new"}
    assert not (q / "1.0badc0de.batch").exists()


def test_a_fifo_where_a_result_goes_is_refused_not_waited_on(home: Path) -> None:
    """A dead holder's batch went in (its temp file is gone); handing out its results meets a FIFO: the
    write that settles it must fail that hand-out (ENXIO), not hang inside the marker lock."""
    store = MarkerStore(home)
    store.record("old", "there before")
    request = _queued(home, {"op": "clear", "key": "old"})
    q = _queue(home)
    (q / "4242.0000abcd.batch").write_text(json.dumps({"ino": 1, "results": {request.name: True}}))
    os.mkfifo(q / (request.name + ".done"))
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(AssertionError("hung on the FIFO")))
    signal.alarm(10)
    try:
        store.record("new", "p")  # the record cannot be settled: this write goes in on its own
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        request.finish()
    assert set(store.list()) == {"old", "new"}


def _x_queued_for_clearing(home: Path, hermes_key: str):
    """``x`` stored and a waiter's clear of it queued; the version a Hermes write will put in (``hermes_key``
    added to what is there now)."""
    store = MarkerStore(home)
    store.record("x", "to be cleared by the waiter")
    request = _queued(home, {"op": "clear", "key": "x"})
    path = marker_path(home)
    theirs = json.loads(path.read_bytes())
    theirs[hermes_key] = markers.build_entry("a Hermes turn")
    return store, request, path, theirs


def _holder_writes_then_waiter_answers(home: Path, monkeypatch: pytest.MonkeyPatch,
                                       request: marker_batch.Request, before) -> tuple[bool, object]:
    """The holder writes ``h`` with ``before(n)`` stepping into its exchange; then the queued waiter's answer."""
    monkeypatch.setattr(markers.atomic_exchange, "_verified_parts", hooked_parts(before))
    MarkerStore(home).record("h", "holder")
    monkeypatch.undo()
    try:
        return _answer_under_lock(home, request)
    finally:
        request.finish()


def _hermes_writes(path: Path, data: dict) -> None:
    """Hermes' own way of writing the marker file: a temp file renamed over it, no lock."""
    foreign = path.with_name(".interrupted_turns_h.tmp")
    foreign.write_text(json.dumps(data))
    os.replace(foreign, path)


def test_a_batch_renamed_over_by_hermes_right_after_the_exchange_is_applied_again(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Hermes renames around our exchange: the first comes back to us, the second lands over ours and
    destroys it before the put-back. Ours is at neither name, so the queued change is not in: the retry
    must apply it again, not count it as written."""
    store, request, path, theirs = _x_queued_for_clearing(home, "hermes")

    def hermes_renames(n: int) -> None:  # H1 after our last check; H2 over ours before the put-back
        if n in (0, 1):
            _hermes_writes(path, theirs)

    answered, result = _holder_writes_then_waiter_answers(home, monkeypatch, request, hermes_renames)
    assert (answered, result) == (True, True)
    assert set(store.list()) == {"h", "hermes"}  # x cleared, by the retry, exactly once


def test_a_failed_put_back_with_ours_standing_answers_the_waiter_as_its_change_went_in(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """H1 landed right before the holder's exchange, and the put-back's first exchange fails (an I/O
    error): ours stands, with the queued clear in it. The waiter must get that answer (True), not the
    False a second application on the retry gives; H1 is kept beside the file."""
    store, request, path, theirs = _x_queued_for_clearing(home, "hermes1")

    def hermes_then_a_failed_round(n: int) -> OSError | None:
        if n == 0:
            _hermes_writes(path, theirs)
        return OSError(5, "Input/output error") if n == 1 else None  # the put-back's exchange fails

    answered, result = _holder_writes_then_waiter_answers(home, monkeypatch, request, hermes_then_a_failed_round)
    assert (answered, result) == (True, True)
    assert set(store.list()) == {"h"}
    kept = [n for n in os.listdir(path.parent) if ".unmerged-" in n]
    assert len(kept) == 1 and "hermes1" in json.loads((path.parent / kept[0]).read_bytes())


def _waiter_answer(home: Path, request: marker_batch.Request) -> tuple[bool, object]:
    """What the waiter decides once it has the lock (``MarkerStore._answer``, the code a queued write runs)."""
    lock = fsutil.open_private_lockfile(marker_lock_path(home))
    try:
        fsutil.lock_fd(lock)
        return MarkerStore(home)._answer(request)
    finally:
        fsutil.unlock_fd(lock)
        os.close(lock)


OTHER = "1.4242.0badc0de.req"  # another waiter of the dead holder's batch


@pytest.mark.parametrize("order", ["theirs first", "ours first"])
def test_a_waiter_whose_batch_went_in_is_answered_even_when_the_record_cannot_be_settled(
        home: Path, order: str, caplog) -> None:
    """A dead holder's batch went in with our clear; settling its record fails on another waiter's result
    path (a directory there). The waiter must still answer True from the record, never clear again (a
    repeat answers False) and never fail without saying so."""
    store = MarkerStore(home)
    store.record("kept", "p")
    request = _queued(home, {"op": "clear", "key": "old"})  # "old" is already gone: the batch cleared it
    q = _queue(home)
    (q / (OTHER + ".done")).mkdir()
    results = {OTHER: True, request.name: True} if order == "theirs first" else {request.name: True, OTHER: True}
    (q / "4242.0000abcd.batch").write_text(json.dumps({"ino": 1, "results": results}))  # no temp: went in
    try:
        answered, result = _waiter_answer(home, request)
    finally:
        request.finish()
    assert (answered, result) == (True, True)
    assert "could not settle" in caplog.text
    assert set(store.list()) == {"kept"}


@pytest.mark.parametrize("first", ["the failing record", "ours"])
def test_a_waiter_whose_batch_never_went_in_writes_its_change_itself_when_the_record_cannot_be_settled(
        home: Path, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    """Our record never went in (its temp file still holds the recorded inode); another record cannot be
    settled. Met first, the failing record leaves ours to the read-only look, which must find it not
    in; met second, ours was already settled. Either way the waiter writes its own change, once."""
    real_names = marker_batch._names

    def ordered(qdir: str):
        names = real_names(qdir)
        if names is None:
            return None
        return sorted(names, key=lambda n: (n != "4243.0000abce.batch") if first == "the failing record" else n)

    monkeypatch.setattr(marker_batch, "_names", ordered)
    store = MarkerStore(home)
    store.record("x", "to clear")
    request = _queued(home, {"op": "clear", "key": "x"})
    q = _queue(home)
    mp = os.fspath(marker_path(home))
    tmp = Path(marker_batch.batch_temp_path(mp, "4242.0000abcd"))
    tmp.write_text("{}")
    (q / "4242.0000abcd.batch").write_text(json.dumps({"ino": os.stat(tmp).st_ino,
                                                        "results": {request.name: True}}))
    (q / (OTHER + ".done")).mkdir()
    (q / "4243.0000abce.batch").write_text(json.dumps({"ino": 1, "results": {OTHER: True}}))
    try:
        assert _waiter_answer(home, request) == (False, None)  # not in: the waiter writes it
    finally:
        os.rmdir(q / (OTHER + ".done"))
    assert store.clear("x") is True and "x" not in store.list()


def test_a_record_that_cannot_be_read_makes_the_waiter_say_its_change_may_be_in(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error on a dead holder's record: whether our change went in cannot be known. The write
    fails, and its error says the change may already be in, instead of applying it a second time."""
    store = MarkerStore(home)
    store.record("x", "p")
    request = _queued(home, {"op": "clear", "key": "x"})
    q = _queue(home)
    (q / "4242.0000abcd.batch").write_text(json.dumps({"ino": 1, "results": {request.name: True}}))
    real = marker_batch._read_small

    def eio(path: str, fd: int | None = None):
        if path.endswith(".batch"):
            raise OSError(5, "Input/output error", path)
        return real(path, fd)

    monkeypatch.setattr(marker_batch, "_read_small", eio)
    with pytest.raises(OSError, match="may already be in the marker file"):
        _waiter_answer(home, request)
    monkeypatch.undo()
    assert _requests(home) == []  # withdrawn: no later holder applies it behind the caller's back
    assert "x" in store.list()


def test_a_symlink_named_like_a_record_is_dropped_not_followed(home: Path, tmp_path: Path) -> None:
    store = MarkerStore(home)
    store.record("x", "p")
    request = _queued(home, {"op": "clear", "key": "x"})
    q = _queue(home)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"ino": 1, "results": {request.name: True}}))
    (q / "4242.0000abcd.batch").symlink_to(outside)
    try:
        assert _waiter_answer(home, request) == (False, None)  # not a record: the waiter writes its change
    finally:
        request.finish()
    assert not (q / "4242.0000abcd.batch").is_symlink() and outside.exists()
