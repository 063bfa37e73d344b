"""hermes_tray_core.stores.turn_journal: the Hermes WebUI's turn journals, read from real files as the WebUI writes them
(and an earlier release of the tray wrote its own decision journal)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_tray_core.stores import turn_journal as j

REPO = Path(__file__).resolve().parents[1]
TURN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{12}$")


def jfile(tmp_path: Path, sid: str = "s1") -> Path:
    return tmp_path / "_turn_journal" / f"{sid}.jsonl"


def read(sid: object, session_dir: Path) -> dict:
    """One session's journal as the scanner reads it: its main file, then its shards (``<sid>~<pid>.jsonl``)."""
    j.validate_journal_session_id(sid)
    base = session_dir / "_turn_journal"
    shards = sorted(base.glob(f"{sid}~*.jsonl")) if base.is_dir() else []
    return j.read_journal_files(str(sid), [(None, base / f"{sid}.jsonl"), *[(p.name, p) for p in shards]])








@pytest.mark.parametrize("sid", ["", " s1", "s1 ", "s1\n", ".", "..", "...", "a/b", "a\\b", "../x", "a b",
                                 "ä", "a~1", "a:b", "x" * 201, None, 5])
def test_bad_session_ids_are_refused(tmp_path, sid):
    with pytest.raises(ValueError):
        read(sid, tmp_path)






def test_reads_tolerate_blank_non_object_torn_and_binary_lines(tmp_path):
    good1 = {"event": "submitted", "turn_id": "t1", "created_at": 1.0}
    good2 = {"event": "completed", "turn_id": "t1", "created_at": 2.0}
    path = jfile(tmp_path)
    path.parent.mkdir()
    path.write_bytes(
        json.dumps(good1).encode() + b"\n\n   \n[1, 2]\n42\n\"str\"\n\xff\xfe not utf8\n"
        + json.dumps(good2).encode() + b"\n{\"event\": \"assistant_sta"
    )
    out = read("s1", tmp_path)
    assert out["session_id"] == "s1"
    assert out["events"] == [good1, good2]
    assert [m["line"] for m in out["malformed"]] == [4, 5, 6, 7, 9]
    assert out["malformed"][0]["raw"] == "[1, 2]"
    assert out["malformed"][-1]["raw"] == '{"event": "assistant_sta'


def test_missing_journal_reads_empty(tmp_path):
    assert read("nope", tmp_path) == {"session_id": "nope", "events": [], "malformed": []}




def test_derive_the_latest_state():
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
    states = j.derive_turn_journal_states(events)
    assert states["a"]["event"] == "interrupted"
    assert states["b"]["event"] == "worker_started"
    assert set(states) == {"a", "b", "c"}
    assert [e["turn_id"] for e in j.pending_turns(events)] == ["b"]




def test_shards_are_merged_and_listed_under_the_session_id(tmp_path):
    main = {"event": "submitted", "turn_id": "t1", "created_at": 1.0}
    jfile(tmp_path).parent.mkdir()
    jfile(tmp_path).write_text(json.dumps(main) + "\n")
    shard = jfile(tmp_path, "s1~4242")
    shard.write_text(json.dumps({"event": "completed", "turn_id": "t1", "created_at": 3.0}) + "\nnot json\n"
                     + json.dumps({"event": "worker_started", "turn_id": "t1", "created_at": 2.0}) + "\n")
    jfile(tmp_path, "s10~1").write_text("")  # another session whose id merely starts with s1
    jfile(tmp_path, "s2").write_text("")
    (tmp_path / "_turn_journal" / "notes.txt").write_text("")
    out = read("s1", tmp_path)
    assert [e["created_at"] for e in out["events"]] == [1.0, 2.0, 3.0]
    assert out["events"][0] == main
    assert out["malformed"] == [{"line": 2, "raw": "not json", "file": "s1~4242.jsonl"}]
    assert j.pending_turns(out["events"]) == []














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
    events = read("web_1", tmp_path)["events"]
    assert [e["event"] for e in events] == ["submitted", "worker_started"]
    (pending,) = j.pending_turns(events)
    assert pending["turn_id"] == "20260101T120000Z-0123456789ab" and pending["event"] == "worker_started"
    with path.open("a") as fh:
        fh.write(json.dumps({"event": "interrupted", "turn_id": pending["turn_id"], "created_at": 1767268802.0}) + "\n")
    assert j.pending_turns(read("web_1", tmp_path)["events"]) == []


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


def test_the_webui_reference_and_the_tray_read_its_files_alike(tmp_path):
    ref = load_webui_reference()
    theirs = ref.append_turn_journal_event("s1", {"event": "submitted", "stream_id": "x"}, session_dir=tmp_path)
    theirs2 = ref.append_turn_journal_event_for_stream("s1", "x", {"event": "completed"}, session_dir=tmp_path)
    mine = read("s1", tmp_path)
    theirs_read = ref.read_turn_journal("s1", session_dir=tmp_path)
    assert mine == theirs_read
    assert mine["events"] == [theirs, theirs2]
    assert j.derive_turn_journal_states(mine["events"]) == ref.derive_turn_journal_states(theirs_read["events"])[0]
    with open(jfile(tmp_path), "ab") as fh:
        fh.write(b"[]\n\n{broken\n")
    assert read("s1", tmp_path) == ref.read_turn_journal("s1", session_dir=tmp_path)





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
    states = j.derive_turn_journal_states(events)
    pending = j.pending_turns(events)
    assert all(isinstance(k, str) and k for k in states)
    assert all(str(e.get("event") or "") not in j.TERMINAL_EVENTS for e in pending)






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

    from hermes_tray_core.stores.turn_journal import read_journal_files

    fifo = tmp_path / "web-1.jsonl"
    os.mkfifo(fifo)  # no writer: a blocking open would hang for ever
    with pytest.raises(OSError) as info:
        read_journal_files("web-1", [(None, fifo)])
    assert info.value.errno == errno.EINVAL
    (tmp_path / "web-2.jsonl").mkdir()
    with pytest.raises(OSError):
        read_journal_files("web-2", [(None, tmp_path / "web-2.jsonl")])
