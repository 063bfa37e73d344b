"""hermes_tray_core.stores.turn_journal: WebUI-compatible, crash-safe turn journal on real files and processes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_tray_core.stores import turn_journal as j
from hermes_tray_core.stores.fsutil import UnsafePathError

REPO = Path(__file__).resolve().parents[1]
TURN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{12}$")


def jfile(tmp_path: Path, sid: str = "s1") -> Path:
    return tmp_path / "_turn_journal" / f"{sid}.jsonl"


def test_append_fills_defaults_and_writes_one_compact_private_line(tmp_path):
    before = time.time()
    out = j.append_turn_journal_event("s1", {"event": "submitted", "text": "héllo"}, session_dir=tmp_path)
    assert out["version"] == 1 and out["session_id"] == "s1" and out["event"] == "submitted"
    assert TURN_ID_RE.match(out["turn_id"])
    assert before <= out["created_at"] <= time.time()
    raw = jfile(tmp_path).read_bytes()
    assert raw == (json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    assert "héllo".encode() in raw  # UTF-8, not \u escapes
    if os.name != "nt":
        assert stat.S_IMODE(jfile(tmp_path).stat().st_mode) == 0o600
        assert stat.S_IMODE(jfile(tmp_path).parent.stat().st_mode) == 0o700
    # caller's values win over defaults, session_id is always the file's
    out2 = j.append_turn_journal_event(
        "s1", {"event": "completed", "turn_id": out["turn_id"], "created_at": 5.0, "session_id": "x"},
        session_dir=tmp_path)
    assert out2["created_at"] == 5.0 and out2["session_id"] == "s1" and out2["turn_id"] == out["turn_id"]
    assert j.read_turn_journal("s1", session_dir=tmp_path)["events"] == [out, out2]


def test_returned_event_is_exactly_what_was_written(tmp_path):
    out = j.append_turn_journal_event("s1", {"event": "x", "tup": (1, 2), 3: "int key"}, session_dir=tmp_path)
    assert j.read_turn_journal("s1", session_dir=tmp_path)["events"] == [out]
    assert out["tup"] == [1, 2] and out["3"] == "int key"


@pytest.mark.parametrize("event,exc", [(["event", "x"], TypeError), ("submitted", TypeError), (None, TypeError),
                                       ({}, ValueError), ({"event": ""}, ValueError),
                                       ({"event": "  "}, ValueError), ({"event": None}, ValueError)])
def test_bad_events_are_rejected_and_nothing_is_written(tmp_path, event, exc):
    with pytest.raises(exc):
        j.append_turn_journal_event("s1", event, session_dir=tmp_path)
    assert not (tmp_path / "_turn_journal").exists()


@pytest.mark.parametrize("sid", ["", " s1", "s1 ", "s1\n", ".", "..", "...", "a/b", "a\\b", "../x", "a b",
                                 "ä", "a~1", "a:b", "x" * 201, None, 5])
def test_bad_session_ids_are_rejected_and_nothing_is_written(tmp_path, sid):
    with pytest.raises(ValueError):
        j.append_turn_journal_event(sid, {"event": "submitted"}, session_dir=tmp_path)
    with pytest.raises(ValueError):
        j.read_turn_journal(sid, session_dir=tmp_path)
    assert not (tmp_path / "_turn_journal").exists()


@pytest.mark.parametrize("sid", ["s1", "20260101_120000_abcdef", "web-ui.session_1", "a.b", ".hidden", "-"])
def test_good_session_ids(tmp_path, sid):
    j.append_turn_journal_event(sid, {"event": "submitted"}, session_dir=tmp_path)
    assert len(j.read_turn_journal(sid, session_dir=tmp_path)["events"]) == 1


def test_unserialisable_event_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        j.append_turn_journal_event("s1", {"event": "x", "obj": object()}, session_dir=tmp_path)
    assert not jfile(tmp_path).exists() or jfile(tmp_path).read_bytes() == b""


def test_reads_tolerate_blank_non_object_torn_and_binary_lines(tmp_path):
    good1 = {"event": "submitted", "turn_id": "t1", "created_at": 1.0}
    good2 = {"event": "completed", "turn_id": "t1", "created_at": 2.0}
    path = jfile(tmp_path)
    path.parent.mkdir()
    path.write_bytes(
        json.dumps(good1).encode() + b"\n\n   \n[1, 2]\n42\n\"str\"\n\xff\xfe not utf8\n"
        + json.dumps(good2).encode() + b"\n{\"event\": \"assistant_sta"
    )
    out = j.read_turn_journal("s1", session_dir=tmp_path)
    assert out["session_id"] == "s1"
    assert out["events"] == [good1, good2]
    assert [m["line"] for m in out["malformed"]] == [4, 5, 6, 7, 9]
    assert out["malformed"][0]["raw"] == "[1, 2]"
    assert out["malformed"][-1]["raw"] == '{"event": "assistant_sta'


def test_missing_journal_reads_empty(tmp_path):
    assert j.read_turn_journal("nope", session_dir=tmp_path) == {"session_id": "nope", "events": [], "malformed": []}
    assert j.iter_turn_journal_session_ids(tmp_path / "missing") == []


def test_append_after_torn_tail_starts_a_new_line(tmp_path):
    first = j.append_turn_journal_event("s1", {"event": "submitted", "turn_id": "t1"}, session_dir=tmp_path)
    with open(jfile(tmp_path), "ab") as fh:
        fh.write(b'{"event":"worker_started","turn_id":"t1","pay')  # writer killed mid-line
    second = j.append_turn_journal_event("s1", {"event": "completed", "turn_id": "t1"}, session_dir=tmp_path)
    out = j.read_turn_journal("s1", session_dir=tmp_path)
    assert out["events"] == [first, second]
    assert [m["line"] for m in out["malformed"]] == [2]


def test_derive_latest_state_and_terminal_collisions():
    events = [
        {"turn_id": "a", "event": "submitted", "created_at": 1.0},
        {"turn_id": "a", "event": "interrupted", "created_at": 5.0},
        {"turn_id": "a", "event": "completed", "created_at": 3.0},  # out of order in the file
        {"turn_id": "b", "event": "submitted", "created_at": 2.0},
        {"turn_id": "b", "event": "worker_started", "created_at": 2.0},  # tie: later line wins
        {"turn_id": "", "event": "completed", "created_at": 9.0},
        {"event": "completed"},
        "not a dict",
        {"turn_id": "c", "event": "completed", "created_at": "garbage"},
    ]
    states, collisions = j.derive_turn_journal_states(events)
    assert states["a"]["event"] == "interrupted"
    assert states["b"]["event"] == "worker_started"
    assert set(states) == {"a", "b", "c"}
    assert collisions == [{"turn_id": "a", "events": [events[2], events[1]]}]
    assert [e["turn_id"] for e in j.pending_turns(events)] == ["b"]
    assert j.is_terminal_turn_event({"event": "completed"}) and not j.is_terminal_turn_event({"event": "x"})
    assert not j.is_terminal_turn_event(None)


def test_stream_events_join_the_streams_turn(tmp_path):
    sub = j.append_turn_journal_event("s1", {"event": "submitted", "stream_id": "st1"}, session_dir=tmp_path)
    j.append_turn_journal_event("s1", {"event": "submitted", "stream_id": "st2"}, session_dir=tmp_path)
    started = j.append_turn_journal_event_for_stream("s1", "st1", {"event": "worker_started"}, session_dir=tmp_path)
    assert started["turn_id"] == sub["turn_id"] and started["stream_id"] == "st1"
    fresh = j.append_turn_journal_event_for_stream("s1", "never-seen", {"event": "submitted"}, session_dir=tmp_path)
    assert TURN_ID_RE.match(fresh["turn_id"]) and fresh["turn_id"] != sub["turn_id"]
    explicit = j.append_turn_journal_event_for_stream("s1", "st1", {"event": "completed", "turn_id": "T"},
                                                      session_dir=tmp_path)
    assert explicit["turn_id"] == "T"
    events = j.read_turn_journal("s1", session_dir=tmp_path)["events"]
    assert events[2] == started and events[-1] == explicit
    states, _ = j.derive_turn_journal_states(events)
    assert states[sub["turn_id"]]["event"] == "worker_started"


def test_shards_are_merged_and_listed_under_the_session_id(tmp_path):
    main = j.append_turn_journal_event("s1", {"event": "submitted", "turn_id": "t1", "created_at": 1.0},
                                       session_dir=tmp_path)
    shard = jfile(tmp_path, "s1~4242")
    shard.write_text(json.dumps({"event": "completed", "turn_id": "t1", "created_at": 3.0}) + "\nnot json\n"
                     + json.dumps({"event": "worker_started", "turn_id": "t1", "created_at": 2.0}) + "\n")
    jfile(tmp_path, "s10~1").write_text("")  # another session whose id merely starts with s1
    jfile(tmp_path, "s2").write_text("")
    (tmp_path / "_turn_journal" / "notes.txt").write_text("")
    out = j.read_turn_journal("s1", session_dir=tmp_path)
    assert [e["created_at"] for e in out["events"]] == [1.0, 2.0, 3.0]
    assert out["events"][0] == main
    assert out["malformed"] == [{"line": 2, "raw": "not json", "file": "s1~4242.jsonl"}]
    assert j.iter_turn_journal_session_ids(tmp_path) == ["s1", "s10", "s2"]
    assert j.pending_turns(out["events"]) == []
    files = j.turn_journal_files(tmp_path)
    assert files["s1"] == [jfile(tmp_path), shard]


def test_symlinked_journal_is_refused(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    (tmp_path / "_turn_journal").mkdir()
    jfile(tmp_path).symlink_to(target)
    with pytest.raises(UnsafePathError):
        j.append_turn_journal_event("s1", {"event": "submitted"}, session_dir=tmp_path)
    assert target.read_text() == ""


def test_compaction_keeps_unfinished_turns_and_drops_oldest_finished(tmp_path):
    for i in range(40):
        j.append_turn_journal_event("s1", {"event": "submitted", "turn_id": f"done{i}", "created_at": float(i),
                                           "pad": "x" * 200}, session_dir=tmp_path)
        j.append_turn_journal_event("s1", {"event": "completed", "turn_id": f"done{i}",
                                           "created_at": i + 0.5}, session_dir=tmp_path)
    pending = j.append_turn_journal_event("s1", {"event": "submitted", "turn_id": "open", "created_at": 0.1,
                                                 "pad": "y" * 200}, session_dir=tmp_path)
    size = jfile(tmp_path).stat().st_size
    dropped = j.compact_turn_journal("s1", session_dir=tmp_path, max_bytes=size - 1, target_bytes=size // 4)
    events = j.read_turn_journal("s1", session_dir=tmp_path)["events"]
    assert dropped > 0 and jfile(tmp_path).stat().st_size <= size // 4
    assert pending in events
    kept = {e["turn_id"] for e in events} - {"open"}
    assert kept == {f"done{i}" for i in range(40 - len(kept), 40)}  # newest finished turns survive whole
    assert all(sum(e["turn_id"] == t for e in events) == 2 for t in kept)
    if os.name != "nt":
        assert stat.S_IMODE(jfile(tmp_path).stat().st_mode) == 0o600
    # below the limit: untouched
    assert j.compact_turn_journal("s1", session_dir=tmp_path, max_bytes=10**9) == 0
    # only unfinished turns: nothing may go, even over the limit
    for i in range(20):
        j.append_turn_journal_event("s2", {"event": "submitted", "turn_id": f"p{i}"}, session_dir=tmp_path)
    assert j.compact_turn_journal("s2", session_dir=tmp_path, max_bytes=10) == 0
    assert len(j.read_turn_journal("s2", session_dir=tmp_path)["events"]) == 20


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from hermes_tray_core.stores import turn_journal as journal
    d, tag, n, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for i in range(n):
        journal.append_turn_journal_event("shared", {"event": "submitted", "turn_id": f"{tag}-{i}",
                                          "w": tag, "i": i, "blob": (tag * size)[:size]}, session_dir=d)
        if len(sys.argv) > 5 and i % 10 == 0:
            journal.compact_turn_journal("shared", session_dir=d, max_bytes=int(sys.argv[5]))
""")


def run_writers(tmp_path, writers, n, size, *extra):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(n), str(size), *extra],
                              cwd=REPO) for tag in writers]
    for p in procs:
        assert p.wait(timeout=60) == 0


def test_four_processes_appending_70kb_events_never_interleave(tmp_path):
    writers, n, size = ["A", "B", "C", "D"], 20, 70_000
    run_writers(tmp_path, writers, n, size)
    out = j.read_turn_journal("shared", session_dir=tmp_path)
    assert out["malformed"] == []
    got = sorted((e["w"], e["i"]) for e in out["events"])
    assert got == sorted((w, i) for w in writers for i in range(n))
    assert all(e["blob"] == e["w"] * size for e in out["events"])


def test_appends_are_not_lost_while_another_process_compacts(tmp_path):
    # Every event is an unfinished turn, so compaction may drop none, yet it rewrites (replaces) the
    # file each time it runs: every append from the other writers must survive the replacement.
    run_writers(tmp_path, ["A", "B", "C"], 60, 500, "20000")
    out = j.read_turn_journal("shared", session_dir=tmp_path)
    assert out["malformed"] == []
    assert sorted((e["w"], e["i"]) for e in out["events"]) == sorted((w, i) for w in "ABC" for i in range(60))


# ----------------------------------------------------------------------------- WebUI interop

WEBUI_LINES = (
    '{"event":"submitted","stream_id":"st-9","message":"Résumé the plan","version":1,'
    '"session_id":"web_1","turn_id":"20260101T120000Z-0123456789ab","created_at":1767268800.5}\n'
    '{"event":"worker_started","stream_id":"st-9","version":1,"session_id":"web_1",'
    '"turn_id":"20260101T120000Z-0123456789ab","created_at":1767268801.0}\n'
)


def test_reads_a_webui_written_journal_and_finds_the_pending_turn(tmp_path):
    path = jfile(tmp_path, "web_1")
    path.parent.mkdir()
    path.write_text(WEBUI_LINES, encoding="utf-8")
    events = j.read_turn_journal("web_1", session_dir=tmp_path)["events"]
    assert [e["event"] for e in events] == ["submitted", "worker_started"]
    (pending,) = j.pending_turns(events)
    assert pending["turn_id"] == "20260101T120000Z-0123456789ab" and pending["event"] == "worker_started"
    done = j.append_turn_journal_event_for_stream("web_1", "st-9", {"event": "interrupted"}, session_dir=tmp_path)
    assert done["turn_id"] == pending["turn_id"]
    assert j.pending_turns(j.read_turn_journal("web_1", session_dir=tmp_path)["events"]) == []


def load_webui_reference():
    from tests.support.hermes_reference import reference_dir

    src = reference_dir() / "webui_turn_journal.py.txt"
    if not src.is_file():
        pytest.skip("needs the Hermes WebUI's turn journal source (not on the package index): set "
                    "HERMES_REFERENCE_DIR to a folder holding webui_turn_journal.py.txt")
    lines = src.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("@@")) + 1
    code = "\n".join(line[1:] if line.startswith("+") else line for line in lines[start:])
    spec = importlib.util.spec_from_loader("webui_turn_journal_ref", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(code, str(src), "exec"), mod.__dict__)  # noqa: S102 - test-only, read-only reference
    return mod


def test_webui_reference_and_core_journal_read_each_others_files(tmp_path):
    ref = load_webui_reference()
    theirs = ref.append_turn_journal_event("s1", {"event": "submitted", "stream_id": "x"}, session_dir=tmp_path)
    ours = j.append_turn_journal_event_for_stream("s1", "x", {"event": "worker_started"}, session_dir=tmp_path)
    theirs2 = ref.append_turn_journal_event_for_stream("s1", "x", {"event": "completed"}, session_dir=tmp_path)
    assert ours["turn_id"] == theirs["turn_id"] == theirs2["turn_id"]
    mine = j.read_turn_journal("s1", session_dir=tmp_path)
    theirs_read = ref.read_turn_journal("s1", session_dir=tmp_path)
    assert mine == theirs_read
    assert mine["events"] == [theirs, ours, theirs2]
    assert j.derive_turn_journal_states(mine["events"]) == ref.derive_turn_journal_states(theirs_read["events"])
    assert j.iter_turn_journal_session_ids(tmp_path) == ref.iter_turn_journal_session_ids(tmp_path)
    with open(jfile(tmp_path), "ab") as fh:
        fh.write(b"[]\n\n{broken\n")
    assert j.read_turn_journal("s1", session_dir=tmp_path) == ref.read_turn_journal("s1", session_dir=tmp_path)


def test_threads_of_one_process_never_interleave_large_events(tmp_path, monkeypatch):
    import threading

    size, n = 200_000, 10

    def chunked_write_all(fd, data):  # short writes, as on network filesystems: 4 KB at a time
        for k in range(0, len(data), 4096):
            os.write(fd, data[k:k + 4096])
            time.sleep(0)

    monkeypatch.setattr(j, "write_all", chunked_write_all)

    def writer(tag: str) -> None:
        for i in range(n):
            j.append_turn_journal_event("threads", {"event": "submitted", "w": tag, "i": i, "blob": tag * size},
                                        session_dir=tmp_path)

    threads = [threading.Thread(target=writer, args=(t,)) for t in "WXYZ"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = j.read_turn_journal("threads", session_dir=tmp_path)
    assert out["malformed"] == []
    assert sorted((e["w"], e["i"]) for e in out["events"]) == sorted((w, i) for w in "WXYZ" for i in range(n))



JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
EVENT = st.fixed_dictionaries({}, optional={"event": JSON | st.sampled_from(["completed", "interrupted", "submitted"]),
                                            "turn_id": JSON | st.sampled_from(["a", "b"]),
                                            "created_at": JSON})


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT | JSON, max_size=12))
def test_derive_and_pending_accept_any_json_shapes(events):
    states, collisions = j.derive_turn_journal_states(events)
    pending = j.pending_turns(events)
    assert all(isinstance(k, str) and k for k in states)
    assert all(not j.is_terminal_turn_event(e) for e in pending)
    assert all(len(c["events"]) > 1 for c in collisions)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_does_not_share_the_parents_append_lock(tmp_path, monkeypatch):
    def chunked_write_all(fd, data):  # short writes make any lapse in mutual exclusion visible
        for k in range(0, len(data), 4096):
            os.write(fd, data[k:k + 4096])
            time.sleep(0)

    monkeypatch.setattr(j, "write_all", chunked_write_all)
    j.append_turn_journal_event("forked", {"event": "submitted", "w": "P", "i": -1}, session_dir=tmp_path)
    pid = os.fork()  # the child inherits the parent's cached journal fd
    if pid == 0:
        try:
            for i in range(8):
                j.append_turn_journal_event("forked", {"event": "x", "w": "C", "i": i, "blob": "C" * 300_000},
                                            session_dir=tmp_path)
        finally:
            os._exit(0)
    for i in range(8):
        j.append_turn_journal_event("forked", {"event": "x", "w": "P", "i": i, "blob": "P" * 300_000},
                                    session_dir=tmp_path)
    os.waitpid(pid, 0)
    out = j.read_turn_journal("forked", session_dir=tmp_path)
    assert out["malformed"] == []
    assert sorted((e["w"], e["i"]) for e in out["events"]) == sorted(
        [("P", -1)] + [(w, i) for w in "CP" for i in range(8)])


def test_threads_over_more_journals_than_the_fd_cache_never_lose_or_misfile_events(tmp_path, monkeypatch):
    """Eviction from the per-process fd cache (> 16 journals) must never close a fd another thread is
    appending through (EBADF), nor let a reused fd number carry its event into another journal."""
    import threading

    def chunked_write_all(fd, data):  # slow short writes widen the window in which a fd is in use
        for k in range(0, len(data), 2048):
            os.write(fd, data[k:k + 2048])
            time.sleep(0.0005)

    monkeypatch.setattr(j, "write_all", chunked_write_all)
    names = [f"evict{i:02d}" for i in range(40)]
    per_thread, errors = 25, []

    def writer(t: int) -> None:
        try:
            for i in range(per_thread):
                sid = names[(t * 7 + i) % len(names)]
                j.append_turn_journal_event(sid, {"event": "x", "t": t, "i": i, "blob": "b" * 20_000},
                                            session_dir=tmp_path)
        except Exception as exc:  # EBADF, or an append into someone else's file
            errors.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seen = []
    for sid in names:
        out = j.read_turn_journal(sid, session_dir=tmp_path)
        assert out["malformed"] == []
        assert all(e["session_id"] == sid for e in out["events"]), f"an event landed in {sid}'s journal"
        seen += [(e["t"], e["i"]) for e in out["events"]]
    assert sorted(seen) == sorted((t, i) for t in range(24) for i in range(per_thread))


# --- the reader's fast path (one C scan per line) must read exactly what json.loads line by line reads ---

def _reference_read(data: bytes) -> tuple[list, list]:
    """The journal's documented reading, spelled out: each line on its own through json.loads; an object
    is an event, a blank line is nothing, anything else is malformed (line number and raw text)."""
    try:
        lines: list = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = data.split(b"\n")
    events, malformed = [], []
    for no, raw in enumerate(lines, start=1):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            if text.strip():
                malformed.append({"line": no, "raw": text})
            continue
        if type(value) is dict:
            events.append(value)
        else:
            malformed.append({"line": no, "raw": raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw})
    return events, malformed


_PIECES = st.sampled_from([
    '{"event":"submitted","turn_id":"t1","created_at":1.5}', '{"a": 1}', '{"a":1}, {"b":2}', '{"a":',
    '"b":2}', '{"n": NaN}', '{"x": [1, {"y": 2}]}', "[1, 2]", "3", '"s"', "null", " {\"a\":1}", '{"a":1} ',
    '{"a":1}\r', "", "   ", "\ufeff{\"a\":1}", '{"deep": ' + "[" * 3000 + "]" * 3000 + "}", "{}", "{",
    '{"k": "\\u00e9"}', '{"a":1}{"b":2}', "\t", '{"big": ' + "9" * 5000 + "}",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=8), st.booleans(), st.binary(max_size=3))
def test_the_fast_reader_reads_exactly_what_a_line_by_line_reader_reads(pieces, trailing_newline, junk):
    data = "\n".join(pieces).encode() + (b"\n" if trailing_newline else b"") + junk
    events, malformed = [], []
    j._parse_lines(data, events, malformed, None)
    assert (events, malformed) == _reference_read(data)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_directory_named_like_a_journal_is_refused_not_waited_on(tmp_path):
    import errno
    import os

    from hermes_tray_core.stores.turn_journal import read_journal_files

    fifo = tmp_path / "web-1.jsonl"
    os.mkfifo(fifo)  # no writer: a blocking open would hang for ever
    with pytest.raises(OSError) as info:
        read_journal_files("web-1", [(None, fifo)])
    assert info.value.errno == errno.EINVAL
    (tmp_path / "web-2.jsonl").mkdir()
    with pytest.raises(OSError):
        read_journal_files("web-2", [(None, tmp_path / "web-2.jsonl")])
