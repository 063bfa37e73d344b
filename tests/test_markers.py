"""hermes_tray_core.markers.store: Hermes' interrupted-turn marker file, with real files and real processes."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hermes_tray_core.keys import InvalidIdError
from hermes_tray_core.markers import entries as marker_entries
from hermes_tray_core.markers import store as markers
from hermes_tray_core.markers import turn_marker
from hermes_tray_core.markers.entries import build_entry, marker_writer_state
from hermes_tray_core.markers.file import marker_path
from hermes_tray_core.markers.store import (
    MarkerCorruptError,
    MarkerStore,
    MarkerStoreError,
    list_turn_markers,
    remove_marker_if_unchanged,
)
from hermes_tray_core.markers.turn_marker import clear_turn_marker, read_turn_marker, record_turn_start
from hermes_tray_core.process.identity import ProcessIdentity, identity_of, own_identity
from hermes_tray_core.stores import fsutil
from tests.support.hermes_reference import reference_or_skip

FORK = mp.get_context("fork")
SECRET = "SECRET-PROMPT-do-not-log-7f3a"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def raw(home: Path) -> dict:
    return json.loads(marker_path(home).read_bytes())


def temp_files(home: Path) -> list[str]:
    d = marker_path(home).parent
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp")) if d.exists() else []


def write_raw(home: Path, data: bytes | str) -> Path:
    path = marker_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ── round trip, format, modes ──────────────────────────────────────────────


def test_round_trip_with_private_modes(home: Path) -> None:
    record_turn_start(home, "20260101_120000_abcdef", "fix the bug", attempts=1)
    m = read_turn_marker(home, "20260101_120000_abcdef")
    me = own_identity()
    assert m == {"attempts": 1, "prompt": "fix the bug", "started_at": pytest.approx(time.time(), abs=5),
                 "auto_continue": True, "writer_pid": me.pid, "writer_start_time": me.start_time}
    path = marker_path(home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(f"{marker_path(home)}.lock").stat().st_mode) == 0o600

    clear_turn_marker(home, "20260101_120000_abcdef")
    assert read_turn_marker(home, "20260101_120000_abcdef") is None
    # an empty map is written as {}, never unlinked: a stale Hermes write can then never recreate the file
    # from its old copy without our exchange handing that copy back to be merged
    assert path.read_bytes() == b"{}"
    assert temp_files(home) == []


def test_reads_a_file_written_in_exactly_the_hermes_format(home: Path) -> None:
    # Byte for byte what Hermes writes (json.dumps, indent=None, ensure_ascii=False), incl. an old backend's
    # entry with no writer identity and a diagnostic one.
    write_raw(home, '{"old": {"attempts": 0, "prompt": "résumé the café", "started_at": 1700000000.5, '
                    '"auto_continue": true}, "diag": {"attempts": 2, "prompt": "p", "started_at": 1700000001.25, '
                    '"auto_continue": false, "writer_pid": 4242, "writer_start_time": 1699999999.01, '
                    '"notification_category": "diagnostic"}}')
    assert read_turn_marker(home, "old") == {"attempts": 0, "prompt": "résumé the café",
                                             "started_at": 1700000000.5, "auto_continue": True}
    assert read_turn_marker(home, "diag") == {"attempts": 2, "prompt": "p", "started_at": 1700000001.25,
                                              "auto_continue": False, "writer_pid": 4242,
                                              "writer_start_time": 1699999999.01,
                                              "notification_category": "diagnostic"}


def test_writes_exactly_the_hermes_format(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markers.time, "time", lambda: 1800000000.125)
    record_turn_start(home, "a", "naïve prompt ✓", attempts=3, auto_continue=False, notification_category="diagnostic")
    record_turn_start(home, "b", "second", notification_category="info")  # only "diagnostic" is kept
    me = own_identity()
    ident = {"writer_pid": me.pid, "writer_start_time": me.start_time}
    expected = {
        "a": {"attempts": 3, "prompt": "naïve prompt ✓", "started_at": 1800000000.125, "auto_continue": False,
              **ident, "notification_category": "diagnostic"},
        "b": {"attempts": 0, "prompt": "second", "started_at": 1800000000.125, "auto_continue": True, **ident},
    }
    assert marker_path(home).read_bytes() == json.dumps(expected, ensure_ascii=False).encode("utf-8")
    # Re-recording an existing key keeps its place in the file, as Hermes' dict update does.
    record_turn_start(home, "a", "again")
    assert list(raw(home)) == ["a", "b"]


def test_byte_identical_to_the_hermes_reference_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      clock_step) -> None:
    ref = reference_or_skip()
    monkeypatch.setattr(time, "time", lambda: 1800000000.5)  # both stores call time.time()
    for store, h in ((ref, tmp_path / "ref"), (turn_marker, tmp_path / "ours")):
        store.record_turn_start(h, "s1", "ünïcode prompt", attempts=1)
        store.record_turn_start(h, "s2", "other", notification_category="diagnostic")
        store.record_turn_start(h, "s1", "ünïcode prompt, again", attempts=2)
        store.clear_turn_marker(h, "s2")
        store.record_turn_start(h, "s3", "x" * 70_000, auto_continue=False)
        clock_step.step()  # between the two stores' writes
    ours, theirs = marker_path(tmp_path / "ours").read_bytes(), marker_path(tmp_path / "ref").read_bytes()
    # Each store writes its process's create time as read once (Hermes caches its own, so does the tray):
    # two readings a clock step apart differ by the step, so compare them as the product does — each names
    # this live process — and the rest byte for byte.
    mine = {e["writer_start_time"] for e in json.loads(ours).values()}
    hermes = {e["writer_start_time"] for e in json.loads(theirs).values()}
    assert mine == {own_identity().start_time} and len(hermes) == 1
    assert marker_writer_state({"writer_pid": os.getpid(), "writer_start_time": mine.pop()}) == "alive"
    assert ref.marker_writer_state({"writer_pid": os.getpid(), "writer_start_time": (h := hermes.pop())}) == "alive"
    assert ours.replace(json.dumps(own_identity().start_time).encode(), json.dumps(h).encode()) == theirs


def test_reference_store_and_ours_read_each_others_files(tmp_path: Path, clock_step) -> None:
    ref = reference_or_skip()
    ref.record_turn_start(tmp_path, "theirs", "written by Hermes", attempts=1)
    record_turn_start(tmp_path, "ours", "written by hermes-tray", notification_category="diagnostic")
    clock_step.step()
    for key in ("theirs", "ours"):
        assert read_turn_marker(tmp_path, key) == ref.read_turn_marker(tmp_path, key) is not None
        assert marker_writer_state(read_turn_marker(tmp_path, key)) == ref.marker_writer_state(
            ref.read_turn_marker(tmp_path, key)) == "alive"


def test_lone_surrogate_prompt_round_trips_like_hermes(home: Path) -> None:
    prompt = "file \udcff name"  # what os.fsdecode makes of a non-UTF-8 filename
    record_turn_start(home, "s", prompt)
    assert read_turn_marker(home, "s")["prompt"] == prompt
    marker_path(home).read_bytes().decode("ascii")  # escaped, so any UTF-8 reader can parse it


# ── corrupt, non-dict, wrong-typed ─────────────────────────────────────────


@pytest.mark.parametrize("junk", [b"{not json", b"\xff\xfe\x00garbage", b"", b"[1, 2]", b'"a string"', b"null"],
                         ids=["truncated", "binary", "empty", "list", "string", "null"])
def test_corrupt_file_is_set_aside_then_store_starts_fresh(home: Path, junk: bytes,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    write_raw(home, junk)
    assert read_turn_marker(home, "s") is None  # reads degrade to "no marker"...
    with pytest.raises(MarkerCorruptError, match="corrupt"):
        list_turn_markers(home)  # ...the tray's strict read says so
    assert marker_path(home).read_bytes() == junk, "reads never move or rewrite the file"

    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.markers.store"):
        record_turn_start(home, "s", SECRET)
    assert read_turn_marker(home, "s")["prompt"] == SECRET
    aside = [p for p in marker_path(home).parent.iterdir() if p.name.startswith("interrupted_turns.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == junk
    assert stat.S_IMODE(aside[0].stat().st_mode) == 0o600
    assert any("corrupt" in r.getMessage() and aside[0].name in r.getMessage() for r in caplog.records)
    assert SECRET not in caplog.text


def test_wrong_typed_entries_degrade_without_breaking_the_rest(home: Path) -> None:
    write_raw(home, json.dumps({
        "not-a-dict": "just a string",
        "bad-attempts": {"attempts": "many", "prompt": "p", "started_at": time.time()},
        "numeric-prompt": {"prompt": 123, "started_at": time.time()},
        "no-prompt": {"attempts": 0, "started_at": time.time()},
        "good": {"attempts": 1, "prompt": "ok", "started_at": time.time(), "auto_continue": True},
    }))
    assert read_turn_marker(home, "not-a-dict") is None
    assert read_turn_marker(home, "bad-attempts") is None
    assert read_turn_marker(home, "numeric-prompt")["prompt"] == "123"  # Hermes stringifies it too
    assert read_turn_marker(home, "no-prompt") is None
    assert read_turn_marker(home, "good")["attempts"] == 1
    assert set(list_turn_markers(home)) == {"bad-attempts", "numeric-prompt", "no-prompt", "good"}

    record_turn_start(home, "new", "p")  # object entries survive a write; the non-object is dropped, as in Hermes
    assert set(raw(home)) == {"bad-attempts", "numeric-prompt", "no-prompt", "good", "new"}


# ── limits and inputs ──────────────────────────────────────────────────────


def test_record_prunes_entries_older_than_24h(home: Path) -> None:
    now = time.time()
    write_raw(home, json.dumps({
        "ancient": {"attempts": 0, "prompt": "p", "started_at": now - 24 * 3600 - 60},
        "junk-time": {"attempts": 0, "prompt": "p", "started_at": "yesterday"},
        "recent": {"attempts": 0, "prompt": "p", "started_at": now - 23 * 3600},
    }))
    record_turn_start(home, "new", "p")
    assert set(raw(home)) == {"recent", "new"}


def test_cap_keeps_the_newest_32_including_the_new_marker(home: Path) -> None:
    now = time.time()
    # 40 markers, some dated in the future (clock skew): the marker being recorded must still survive.
    write_raw(home, json.dumps({f"k{i:02d}": {"attempts": 0, "prompt": "p", "started_at": now - 1000 + i * 100}
                                for i in range(40)}))
    record_turn_start(home, "new", "p")
    kept = raw(home)
    assert len(kept) == marker_entries.MAX_ENTRIES == 32
    assert "new" in kept
    assert set(kept) - {"new"} == {f"k{i:02d}" for i in range(9, 40)}


def test_prompt_is_capped_at_64000_chars(home: Path) -> None:
    record_turn_start(home, "s", "é" * 64_000 + "TAIL")
    assert read_turn_marker(home, "s")["prompt"] == "é" * 64_000


@pytest.mark.parametrize("key, prompt", [("", "p"), ("s", ""), (None, "p"), ("s", None)])
def test_empty_inputs_are_ignored_by_the_hermes_calls(home: Path, key, prompt) -> None:
    record_turn_start(home, key, prompt)
    clear_turn_marker(home, key)
    assert read_turn_marker(home, key) is None
    assert not marker_path(home).parent.exists()


def test_clear_touches_only_its_entry_and_skips_the_write_when_absent(home: Path) -> None:
    record_turn_start(home, "a", "pa")
    record_turn_start(home, "b", "pb")
    clear_turn_marker(home, "a")
    assert set(raw(home)) == {"b"}
    before = fsutil.file_signature(marker_path(home))
    clear_turn_marker(home, "not-there")
    assert fsutil.file_signature(marker_path(home)) == before


# ── writer liveness ────────────────────────────────────────────────────────


def test_writer_state_alive_for_this_process(home: Path, clock_step) -> None:
    record_turn_start(home, "s", "p")
    clock_step.step()
    assert marker_writer_state(read_turn_marker(home, "s")) == "alive"


def test_writer_state_dead_for_an_exited_child() -> None:
    assert marker_writer_state({"writer_pid": exited_pid()}) == "dead"


def test_writer_state_not_alive_for_a_recycled_pid() -> None:
    me = own_identity()
    assert marker_writer_state({"writer_pid": me.pid, "writer_start_time": me.start_time - 5.0}) == "dead"


@pytest.mark.parametrize("entry", [None, "x", [], {}, {"writer_pid": "123"}, {"writer_pid": True},
                                   {"writer_pid": -4}, {"writer_pid": 0}, {"writer_pid": 1.5}])
def test_writer_state_unknown_for_junk(entry) -> None:
    assert marker_writer_state(entry) == "unknown"


@pytest.mark.parametrize(("start", "state"), [
    ("noon", "alive"), ("", "alive"), ([], "alive"), ({}, "alive"),  # not a number to Hermes: a pid-only entry
    (float("nan"), "dead"), (float("inf"), "dead"), (True, "dead"),  # numbers that match no create time
    (10**400, "unknown"),  # float() overflows: Hermes' check raises, its caller says unknown
])
def test_junk_writer_start_time_reads_as_hermes_reads_it(start, state) -> None:
    """Hermes' ``_pid_liveness`` coerces with ``float()`` and calls a start time it cannot convert absent
    (tests/test_marker_parity_hermes.py runs Hermes' own code on these)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert marker_writer_state({"writer_pid": child.pid, "writer_start_time": start}) == state
    finally:
        child.kill()
        child.wait()


def test_record_on_behalf_of_a_child_process(home: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = identity_of(child.pid)
        entry = MarkerStore(home).record("20260101_000000_aaaaaa", "continue", attempts=1, writer=ident)
        assert entry["writer_pid"] == child.pid and entry["writer_start_time"] == ident.start_time
        stored = list_turn_markers(home)["20260101_000000_aaaaaa"]
        assert stored == entry
        assert marker_writer_state(stored) == "alive"
    finally:
        child.kill()
        child.wait()
    assert marker_writer_state(stored) == "dead"
    # The Hermes call takes the same keyword.
    record_turn_start(home, "k2", "p", writer=ProcessIdentity(child.pid))
    assert read_turn_marker(home, "k2")["writer_pid"] == child.pid
    assert "writer_start_time" not in read_turn_marker(home, "k2")


# ── tray calls: list, compare-and-remove, strict errors ────────────────────


def test_list_returns_entries_as_stored_including_newer_variants(home: Path) -> None:
    entries = {
        "shut": {"attempts": 0, "prompt": "p", "started_at": time.time() - 50, "auto_continue": True,
                 "writer_pid": 1, "interrupted_by": "shutdown", "interrupted_at": time.time() - 10},
        "queued": {"attempts": 0, "prompt": "", "started_at": time.time(), "queued": True},
    }
    write_raw(home, json.dumps(entries))
    assert list_turn_markers(home) == entries
    assert read_turn_marker(home, "queued") is None  # no prompt: nothing for Hermes' read to continue
    assert list_turn_markers(home / "elsewhere") == {}


def test_remove_if_unchanged_removes_exactly_what_the_user_saw(home: Path) -> None:
    record_turn_start(home, "a", "pa")
    record_turn_start(home, "b", "pb")
    shown = list_turn_markers(home)["a"]
    assert remove_marker_if_unchanged(home, "a", shown) is True
    assert set(raw(home)) == {"b"}
    assert remove_marker_if_unchanged(home, "a", shown) is False  # already gone


def test_remove_if_unchanged_keeps_an_entry_that_changed(home: Path) -> None:
    record_turn_start(home, "a", "pa")
    shown = list_turn_markers(home)["a"]
    record_turn_start(home, "a", "pa", attempts=1)  # a continuation started meanwhile
    assert remove_marker_if_unchanged(home, "a", shown) is False
    assert raw(home)["a"]["attempts"] == 1


def test_remove_if_unchanged_handles_variant_entries(home: Path) -> None:
    write_raw(home, json.dumps({"q": {"prompt": "", "queued": True, "started_at": 1.0},
                                "keep": {"prompt": "x", "started_at": 2.0}}))
    assert remove_marker_if_unchanged(home, "q", {"prompt": "", "queued": True, "started_at": 1.0}) is True
    assert raw(home) == {"keep": {"prompt": "x", "started_at": 2.0}}


@pytest.mark.parametrize("key", ["", "../x", "a/b", "x" * 300, " padded", "new\nline"])
def test_strict_store_rejects_unsafe_session_keys(home: Path, key: str) -> None:
    store = MarkerStore(home)
    for call in (lambda: store.record(key, "p"), lambda: store.clear(key), lambda: store.read(key),
                 lambda: remove_marker_if_unchanged(home, key, {})):
        with pytest.raises(InvalidIdError):
            call()
    assert not marker_path(home).parent.exists()


def test_strict_store_rejects_bad_arguments(home: Path) -> None:
    store = MarkerStore(home)
    with pytest.raises(ValueError, match="prompt"):
        store.record("s", "")
    with pytest.raises(ValueError, match="attempts"):
        store.record("s", "p", attempts=-1)
    with pytest.raises(ValueError, match="writer"):
        store.record("s", "p", writer=ProcessIdentity(0))


def test_io_failure_raises_in_the_strict_store_and_is_silent_in_the_hermes_calls(tmp_path: Path) -> None:
    home = tmp_path / "not-a-dir"
    home.write_text("a file where the home should be")
    record_turn_start(home, "s", "p")
    clear_turn_marker(home, "s")
    assert read_turn_marker(home, "s") is None
    with pytest.raises(MarkerStoreError) as err:
        MarkerStore(home).record("s", "p")
    assert "not-a-dir" in str(err.value) and "record" in str(err.value)


def test_unreadable_marker_path_is_reported_by_the_strict_calls(home: Path) -> None:
    marker_path(home).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(MarkerStoreError, match="read"):
        list_turn_markers(home)
    with pytest.raises(MarkerStoreError, match="record"):
        MarkerStore(home).record("s", "p")
    assert read_turn_marker(home, "s") is None
    record_turn_start(home, "s", "p")
    assert marker_path(home).is_dir()


def test_symlinked_marker_file_is_refused(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"s": {"prompt": "planted", "started_at": time.time()}}))
    marker_path(home).parent.mkdir(parents=True)
    marker_path(home).symlink_to(elsewhere)
    assert read_turn_marker(home, "s") is None
    record_turn_start(home, "t", "p")  # silent, and writes nothing through the link
    with pytest.raises(MarkerStoreError, match="symlink"):
        MarkerStore(home).record("t", "p")
    with pytest.raises(MarkerStoreError, match="symlink"):
        list_turn_markers(home)
    assert marker_path(home).is_symlink()
    assert json.loads(elsewhere.read_text())["s"]["prompt"] == "planted"


def test_symlinked_lock_file_is_refused(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep")
    marker_path(home).parent.mkdir(parents=True)
    Path(f"{marker_path(home)}.lock").symlink_to(target)
    with pytest.raises(MarkerStoreError):
        MarkerStore(home).record("s", "p")
    assert not marker_path(home).exists()
    assert target.read_text() == "keep"


# ── several processes, killed writers, foreign writers ─────────────────────


def _hammer(home: str, proc: int, keys: int, rounds: int, barrier) -> None:
    barrier.wait()
    for r in range(rounds):
        for k in range(keys):
            record_turn_start(home, f"p{proc}-k{k}", f"round {r}")
            clear_turn_marker(home, f"p{proc}-k{k}")
            record_turn_start(home, f"p{proc}-k{k}", f"round {r}")
    clear_turn_marker(home, f"p{proc}-k0")  # must stay gone: nothing may resurrect it


def test_concurrent_processes_lose_and_resurrect_nothing(home: Path) -> None:
    procs, keys, rounds = 4, 8, 3
    barrier = FORK.Barrier(procs)
    workers = [FORK.Process(target=_hammer, args=(str(home), p, keys, rounds, barrier)) for p in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    expected = {f"p{p}-k{k}" for p in range(procs) for k in range(1, keys)}
    final = raw(home)
    assert set(final) == expected
    assert all(e["prompt"] == f"round {rounds - 1}" for e in final.values())
    assert temp_files(home) == []


def test_threads_of_one_backend_lose_nothing(home: Path) -> None:
    def run(t: int) -> None:
        for r in range(2):
            for k in range(5):
                record_turn_start(home, f"t{t}-k{k}", f"round {r}")
                clear_turn_marker(home, f"t{t}-k{k}")
                record_turn_start(home, f"t{t}-k{k}", f"round {r}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    final = raw(home)
    assert set(final) == {f"t{t}-k{k}" for t in range(4) for k in range(5)}
    assert all(e["prompt"] == "round 1" for e in final.values())


def _write_forever(home: str, size: int) -> None:
    i = 0
    while True:
        record_turn_start(home, f"k{i % 40}", "x" * size)
        i += 1


def test_writer_killed_mid_write_never_leaves_an_unparseable_file(home: Path) -> None:
    record_turn_start(home, "base", "p")
    for i in range(8):
        child = FORK.Process(target=_write_forever, args=(str(home), 60_000))
        child.start()
        time.sleep(0.02 + 0.013 * i)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        json.loads(marker_path(home).read_bytes())  # whole old or whole new, never torn
        assert len(temp_files(home)) <= 1, "a killed writer leaves at most its one temp file"
        record_turn_start(home, "base", "p")  # the next write sweeps the dead writer's temp file
        assert temp_files(home) == []
    assert read_turn_marker(home, "base")["prompt"] == "p"


def _stall_before_replace(home: str, ready) -> None:
    real = fsutil.write_temp

    def stalled(*args, **kwargs):
        tmp = real(*args, **kwargs)
        ready.set()
        time.sleep(60)
        return tmp

    fsutil.write_temp = stalled
    record_turn_start(home, "victim", "never lands")


def test_writer_killed_between_temp_and_replace_leaves_old_file_and_one_swept_temp(home: Path) -> None:
    record_turn_start(home, "kept", "p")
    before = marker_path(home).read_bytes()
    ready = FORK.Event()
    child = FORK.Process(target=_stall_before_replace, args=(str(home), ready))
    child.start()
    assert ready.wait(20)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    assert marker_path(home).read_bytes() == before
    assert len(temp_files(home)) == 1
    record_turn_start(home, "next", "p")
    assert temp_files(home) == []
    assert set(raw(home)) == {"kept", "next"}


def _foreign_write(home: Path, key: str, entry: dict | None) -> None:
    """A writer that does not lock (Hermes): read, change, temp file, replace."""
    path = marker_path(home)
    data = json.loads(path.read_bytes()) if path.exists() else {}
    if entry is None:
        data.pop(key, None)
    else:
        data[key] = entry
    tmp = path.with_name(".interrupted_turns_foreign.tmp")
    tmp.write_bytes(json.dumps(data, ensure_ascii=False).encode())  # Hermes' format
    os.replace(tmp, path)


def _inject_foreign_write_before_replace(monkeypatch: pytest.MonkeyPatch, home: Path, key: str,
                                         entry: dict | None) -> list[int]:
    """Land a foreign write after our read and temp file, before our last check (first write only)."""
    real = fsutil.write_temp
    calls: list[int] = []

    def racing(target, data, **kwargs):
        tmp = real(target, data, **kwargs)
        if not calls:
            time.sleep(0.01)  # let the clock move past the file's mtime granularity
            _foreign_write(home, key, entry)
        calls.append(1)
        return tmp

    monkeypatch.setattr(fsutil, "write_temp", racing)
    return calls


def _inject_foreign_write_at_exchange(monkeypatch: pytest.MonkeyPatch, home: Path, key: str,
                                      entry: dict | None, *, verified: bool = True) -> list[int]:
    """Land a foreign write after our last check, right before our exchange: no check can see it. The
    verified exchange puts the foreign version straight back and the write starts again from it; the
    unverified one (the last attempt) hands it back to be merged."""
    name = "swap_in_verified" if verified else "swap_in"
    real = getattr(markers.atomic_exchange, name)
    calls: list[int] = []

    def racing(new, target, *args):
        if not calls:
            _foreign_write(home, key, entry)
        calls.append(1)
        return real(new, target, *args)

    monkeypatch.setattr(markers.atomic_exchange, name, racing)
    if not verified:
        monkeypatch.setattr(markers, "VERIFIED_RETRIES", 0)
    return calls


@pytest.mark.parametrize("op", ["record", "clear", "remove"])
def test_foreign_writer_entry_survives_our_concurrent_write(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                             op: str) -> None:
    record_turn_start(home, "ours", "p")
    record_turn_start(home, "other", "p")
    shown = list_turn_markers(home)["ours"]
    foreign = {"attempts": 0, "prompt": "hermes turn", "started_at": time.time(), "auto_continue": True,
               "writer_pid": 99999}
    calls = _inject_foreign_write_before_replace(monkeypatch, home, "hermes", foreign)
    if op == "record":
        record_turn_start(home, "mine", "p")
    elif op == "clear":
        clear_turn_marker(home, "ours")
    else:
        assert remove_marker_if_unchanged(home, "ours", shown) is True
    assert len(calls) == 2, "the change was noticed and the write re-applied"
    final = raw(home)
    assert final["hermes"] == foreign
    assert ("mine" in final) == (op == "record")
    assert ("ours" in final) == (op == "record")
    assert "other" in final
    assert temp_files(home) == []


def test_remove_sees_a_foreign_change_to_the_same_entry(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record_turn_start(home, "s", "p")
    record_turn_start(home, "other", "p")
    shown = list_turn_markers(home)["s"]
    resumed = dict(shown, attempts=1, started_at=time.time())
    _inject_foreign_write_before_replace(monkeypatch, home, "s", resumed)
    assert remove_marker_if_unchanged(home, "s", shown) is False
    assert raw(home)["s"] == resumed and "other" in raw(home)


@pytest.mark.parametrize("verified", [True, False], ids=["put-back", "merge"])
@pytest.mark.parametrize("op", ["record", "clear", "remove", "replace"])
@pytest.mark.parametrize("foreign_op", ["record", "clear"])
def test_a_hermes_rename_no_check_can_see_is_never_lost(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                        op: str, foreign_op: str, verified: bool) -> None:
    """The residual window of compare-and-replace, closed: Hermes renames between our last check and our
    exchange; the exchange hands its version back — put straight back and the write redone on it, or (the
    unverified last attempt) merged: only our change re-applied to it. Nothing lost, nothing back."""
    record_turn_start(home, "ours", "p")
    record_turn_start(home, "hermes-old", "p")
    shown = list_turn_markers(home)["ours"]
    foreign = {"attempts": 0, "prompt": "hermes turn", "started_at": time.time(), "auto_continue": True,
               "writer_pid": 99999}
    key, value = ("hermes", foreign) if foreign_op == "record" else ("hermes-old", None)
    calls = _inject_foreign_write_at_exchange(monkeypatch, home, key, value, verified=verified)
    ours = build_entry("continuation", attempts=1)
    if op == "record":
        record_turn_start(home, "mine", "p")
    elif op == "clear":
        clear_turn_marker(home, "ours")
    elif op == "remove":
        assert remove_marker_if_unchanged(home, "ours", shown, settle=False) is True
    else:
        assert MarkerStore(home).replace_if_unchanged("ours", shown, ours, settle=False) is True
    assert len(calls) == 2, "the displaced file was not the one read: exchanged again"
    final = raw(home)
    assert (final.get("hermes") == foreign) == (foreign_op == "record")  # Hermes' record kept
    assert ("hermes-old" in final) == (foreign_op == "record")  # Hermes' clear not undone
    assert ("mine" in final) == (op == "record")
    assert ("ours" in final) == (op in ("record", "replace"))
    if op == "replace":
        assert final["ours"] == ours
    assert temp_files(home) == []


@pytest.mark.parametrize("verified", [True, False], ids=["put-back", "merge"])
def test_a_change_that_no_longer_applies_to_hermes_version_puts_hermes_version_back(
        home: Path, monkeypatch: pytest.MonkeyPatch, verified: bool) -> None:
    """Hermes re-recorded the entry we are skipping (a new attempt) just before our exchange: the skip no
    longer applies, so Hermes' version goes back in place unchanged and the skip reports False."""
    record_turn_start(home, "s", "p")
    shown = list_turn_markers(home)["s"]
    resumed = dict(shown, attempts=1, started_at=time.time() + 1)
    calls = _inject_foreign_write_at_exchange(monkeypatch, home, "s", resumed, verified=verified)
    assert remove_marker_if_unchanged(home, "s", shown, settle=False) is False
    assert len(calls) == (1 if verified else 2)  # redone from Hermes' version: nothing left to write
    assert raw(home) == {"s": resumed}
    assert temp_files(home) == []


def test_without_an_exchange_the_write_falls_back_to_compare_and_replace(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem that answers EINVAL to the exchange: writes still land (compare-and-replace), the
    directory is remembered, and exchange_support says so for doctor."""
    import errno as _errno

    record_turn_start(home, "a", "p")
    tried: list[str] = []

    def unsupported(new, target):
        tried.append(target)
        raise markers.atomic_exchange.ExchangeUnsupported(_errno.EINVAL, "exchange unsupported here", target)

    monkeypatch.setattr(markers.atomic_exchange, "swap_in", unsupported)
    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", lambda new, target, *a: unsupported(new, target))
    monkeypatch.setattr(markers.atomic_exchange, "probe", lambda d: (False, "renameat2(RENAME_EXCHANGE): EINVAL"))
    monkeypatch.setitem(markers._EXCHANGE, str(marker_path(home).parent), True)
    record_turn_start(home, "b", "p")
    clear_turn_marker(home, "a")
    assert set(raw(home)) == {"b"}
    assert len(tried) == 1, "asked once, then the directory is known to lack it"
    assert markers._EXCHANGE[str(marker_path(home).parent)] is False
    ok, why = turn_marker.exchange_support(home)
    assert not ok and "EINVAL" in why
    assert temp_files(home) == []


def test_the_exchange_primitive_swaps_and_hands_back_the_displaced_file(tmp_path: Path) -> None:
    from hermes_tray_core.stores import exchange as atomic_exchange

    ok, mech = atomic_exchange.probe(str(tmp_path))
    if not ok:
        pytest.skip(f"no atomic exchange here: {mech}")
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"new")
    b.write_bytes(b"old")
    back = atomic_exchange.swap_in(str(a), str(b))
    assert b.read_bytes() == b"new" and Path(back).read_bytes() == b"old"
    with pytest.raises(FileNotFoundError):
        atomic_exchange.swap_in(str(a), str(tmp_path / "missing"))
    assert list(tmp_path.iterdir()) != [] and not list(tmp_path.glob(".hermes-tray-exchange-probe*"))


# ── sweeping, durability, logging ──────────────────────────────────────────


def test_sweep_removes_dead_writers_temp_files_only(home: Path) -> None:
    record_turn_start(home, "s", "p")
    d = marker_path(home).parent
    dead = d / f".interrupted_turns.json.{exited_pid()}.0badf00d.tmp"
    dead.write_text("half")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        live = d / f".interrupted_turns.json.{sleeper.pid}.0000beef.tmp"
        live.write_text("in flight")
        hermes_tmp = d / ".interrupted_turns_abc123.tmp"  # Hermes' own naming: not ours to judge
        hermes_tmp.write_text("x")
        record_turn_start(home, "t", "p")
        assert not dead.exists()
        assert live.exists() and hermes_tmp.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to list open fds")
def test_writes_leave_no_descriptor_open(home: Path) -> None:
    record_turn_start(home, "warm", "p")
    before = len(os.listdir("/proc/self/fd"))
    for i in range(20):
        record_turn_start(home, f"k{i}", "p")
        clear_turn_marker(home, f"k{i}")
        remove_marker_if_unchanged(home, "warm", {"not": "it"})
    clear_turn_marker(home, "warm")  # empties the file: the unlink path
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fsynced fds")
def test_write_is_durable_file_fsync_then_directory_fsync(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record_turn_start(home, "warm", "p")
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    record_turn_start(home, "s", "p")
    desktop = str(marker_path(home).parent)
    assert len(synced) == 2
    assert Path(synced[0]).name.startswith(".interrupted_turns.json.") and synced[0].endswith(".tmp")
    assert synced[1] == desktop


def test_prompt_text_is_never_logged(home: Path, caplog: pytest.LogCaptureFixture,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with caplog.at_level(logging.DEBUG):
        record_turn_start(home, "s", SECRET)
        read_turn_marker(home, "s")
        clear_turn_marker(home, "s")
        write_raw(home, '{"s": {"prompt": "' + SECRET)  # corrupt, with the prompt inside
        read_turn_marker(home, "s")
        record_turn_start(home, "s", SECRET)
        monkeypatch.setattr(markers.fsutil, "atomic_write_bytes",
                            lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")))
        record_turn_start(home, "t", SECRET)  # a failure is logged, still without the prompt
    assert caplog.records, "the calls do log (identity only)"
    assert "s" in caplog.text and str(os.getpid()) in caplog.text
    assert SECRET not in caplog.text
    assert all(SECRET not in str(r.args) for r in caplog.records)


def test_liveness_of_every_writer_of_a_file_written_by_many_processes(home: Path) -> None:
    pids = []
    for i in range(3):
        p = FORK.Process(target=record_turn_start, args=(str(home), f"k{i}", "p"))
        p.start()
        p.join()
        pids.append(p.pid)
    entries = list_turn_markers(home)
    assert sorted(e["writer_pid"] for e in entries.values()) == sorted(pids)
    assert all(psutil.pid_exists(pid) is False or marker_writer_state(entries[f"k{i}"]) == "dead"
               for i, pid in enumerate(pids))


# ── the write path's text reuse never changes the bytes ───────────────────

_keys = st.text(alphabet="abcXYZ019_-.:é\u2713", min_size=1, max_size=6)
_ops = st.lists(st.tuples(st.sampled_from(["record", "clear"]), _keys,
                          st.text(min_size=1, max_size=40), st.integers(0, 3)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_any_sequence_of_writes_leaves_exactly_hermes_bytes_of_the_expected_map(tmp_path: Path, ops) -> None:
    home = tmp_path / f"h{time.monotonic_ns()}"
    model: dict[str, tuple[str, int]] = {}
    for op, key, prompt, attempts in ops:
        if op == "record":
            record_turn_start(home, key, prompt, attempts=attempts)
            model[key] = (prompt, attempts)
        else:
            clear_turn_marker(home, key)
            model.pop(key, None)
        path = marker_path(home)
        if not model:
            assert not path.exists() or path.read_bytes() == b"{}"  # emptied: {} (never unlinked)
            continue
        data = path.read_bytes()
        stored = json.loads(data)
        assert data == json.dumps(stored, ensure_ascii=False).encode("utf-8")
        assert {k: (e["prompt"], e["attempts"]) for k, e in stored.items()} == model


def _foreign_rewrite(home: Path, variant: str) -> None:
    """Another writer rewrites one entry so that it is equal in Python but not in JSON text."""
    path = marker_path(home)
    if not path.exists():
        return
    data = json.loads(path.read_bytes())
    if not data:  # emptied: {} (never unlinked)
        return
    key = next(iter(data))
    e = data[key]
    if variant == "float-attempts":
        e["attempts"] = float(e["attempts"]) if isinstance(e["attempts"], int) else int(e["attempts"])
    elif variant == "int-bool":
        e["auto_continue"] = 1 if e["auto_continue"] is True else True
    elif variant == "neg-zero":
        e["extra"] = 0.0 if str(e.get("extra")) == "-0.0" else -0.0
    elif variant == "nested":
        e["extra"] = [1] if e.get("extra") == [1.0] and isinstance(e["extra"][0], float) else [1.0]
    else:
        data[key] = dict(reversed(list(e.items())))
    _foreign_write(home, key, data[key])


_foreign_ops = st.lists(st.one_of(
    st.tuples(st.just("record"), _keys, st.integers(0, 3)),
    st.tuples(st.just("clear"), _keys, st.just(0)),
    st.tuples(st.just("foreign"), st.sampled_from(["float-attempts", "int-bool", "neg-zero", "nested", "reorder"]),
              st.just(0))), min_size=2, max_size=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_foreign_ops)
@example(ops=[("record", "a", 1), ("foreign", "float-attempts", 0), ("record", "b", 0)])
@example(ops=[("record", "a", 0), ("foreign", "int-bool", 0), ("record", "b", 0)])
@example(ops=[("record", "a", 0), ("foreign", "neg-zero", 0), ("record", "b", 0), ("foreign", "neg-zero", 0),
              ("record", "c", 0)])
@example(ops=[("record", "a", 0), ("foreign", "nested", 0), ("record", "b", 0), ("foreign", "nested", 0),
              ("record", "c", 0)])
@example(ops=[("record", "a", 0), ("foreign", "reorder", 0), ("record", "b", 0)])
def test_entries_another_writer_changed_keep_their_exact_text(tmp_path: Path, ops) -> None:
    home = tmp_path / f"h{time.monotonic_ns()}"
    for op, arg, attempts in ops:
        before = json.loads(marker_path(home).read_bytes()) if marker_path(home).exists() else {}
        if op == "record":
            record_turn_start(home, arg, "p", attempts=attempts)
        elif op == "clear":
            clear_turn_marker(home, arg)
        else:
            _foreign_rewrite(home, arg)
            continue
        if not marker_path(home).exists():
            continue
        data = marker_path(home).read_bytes()
        after = json.loads(data)
        assert data == json.dumps(after, ensure_ascii=False).encode("utf-8")
        for key in set(before) & set(after) - {arg}:  # entries our write did not touch: text unchanged
            assert json.dumps(after[key]) == json.dumps(before[key])


# ── the settle window: a stale Hermes write never undoes a skip for good ───


def _stale_hermes_write(home: Path, stale: bytes, key: str, entry: dict) -> None:
    """Hermes read ``stale`` before our write and renames its change of it after: our change undone."""
    data = json.loads(stale)
    data[key] = entry
    tmp = marker_path(home).with_name(".interrupted_turns_stale.tmp")
    tmp.write_bytes(json.dumps(data, ensure_ascii=False).encode())
    os.replace(tmp, marker_path(home))


def test_a_stale_hermes_write_that_brings_a_skip_back_is_undone_in_the_settle_window(home: Path) -> None:
    from hermes_tray_core.markers import settle as marker_settle

    record_turn_start(home, "skipped", "p")
    record_turn_start(home, "other", "p")
    shown = list_turn_markers(home)["skipped"]
    stale = marker_path(home).read_bytes()
    assert remove_marker_if_unchanged(home, "skipped", shown) is True
    before = marker_settle.reapplied()
    hermes = build_entry("a turn Hermes recorded meanwhile")
    _stale_hermes_write(home, stale, "hermes", hermes)
    assert marker_settle.wait(5)
    final = raw(home)
    assert "skipped" not in final  # undone again
    assert final["hermes"] == hermes and "other" in final  # Hermes' own change kept
    assert marker_settle.reapplied() == before + 1


def test_a_skip_brought_back_after_the_settle_window_stays_for_the_tombstone(home: Path) -> None:
    """The window is bounded: what a stale write brings back later is the tombstone's job (core.continuing.claim)."""
    from hermes_tray_core.markers import settle as marker_settle

    record_turn_start(home, "skipped", "p")
    shown = list_turn_markers(home)["skipped"]
    stale = marker_path(home).read_bytes()
    assert remove_marker_if_unchanged(home, "skipped", shown) is True
    assert marker_settle.wait(5)
    _stale_hermes_write(home, stale, "x", build_entry("p"))
    time.sleep(marker_settle.SETTLE_SECS + 0.1)
    assert raw(home)["skipped"] == shown


def test_leaks_remove_copied_ghosts_always_and_restore_a_copied_absence_only_after_one_hermes_write() -> None:
    from hermes_tray_core.markers import settle as marker_settle

    old = build_entry("cleared by Hermes", now=1.0)
    rec = build_entry("recorded by Hermes", now=2.0)
    base = build_entry("untouched", now=3.0)
    transient = {"cleared": old, "base": base}  # our briefly visible version: Hermes' clear and record missed
    leaks = marker_settle.Leaks(transient)
    leaks.note(transient, {"recorded": rec, "base": base})
    # a Hermes write on top of our transient version (one more entry): both copies put right
    copied = {**transient, "new": build_entry("x", now=4.0)}
    assert leaks.correct(copied) == {"base": base, "new": copied["new"], "recorded": rec}
    # the transient itself (Hermes cleared "recorded" on top of our merge): a clear, not a copy
    assert leaks.correct(dict(transient)) == {"base": base}
    # moved on in more than one entry: the absence is Hermes' clear; only the ghost goes
    moved = {"cleared": old, "a": build_entry("a", now=5.0), "b": build_entry("b", now=6.0)}
    assert leaks.correct(moved) == {"a": moved["a"], "b": moved["b"]}
