"""Hostile and broken input (hypothesis): nothing a Hermes home holds can crash the scanner, and
corrupt files are set aside, never destroyed.

Each test counts the inputs it tried and prints ``hostile <name> tried=N crashes=0``; the
bench driver runs them with ``HERMES_TRAY_FAULT_EXAMPLES`` raised. A crash here means an
exception escaping an entry point that promises not to raise, or the scanner's catch-all
("scanning failed … please report it") firing — the scanner must handle every input in its
own paths, not by the safety net.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import fault_hostile as H
import pytest
from hypothesis import given
from hypothesis import strategies as st

TRIED: dict[str, int] = {}


def _count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def _print_counts():
    yield
    for name, n in sorted(TRIED.items()):
        print(f"hostile {name:<22} tried={n:<6} crashes=0")


class _Home:
    """One scratch Hermes home reused across hypothesis examples (tmp_path is per test, not per example)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ht-hostile-"))

    def reset(self) -> Path:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        home = self.root / "home"
        (home / "desktop").mkdir(parents=True)
        (home / "runtime").mkdir()
        (home / "webui" / "sessions" / "_turn_journal").mkdir(parents=True)
        return home

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def scratch():
    h = _Home()
    yield h
    h.close()


def _check_scan(home: Path, *, strict_json: bool = False):
    from hermes_tray_core.deciding.policy import VERDICTS
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.scanning.scanner import Scanner

    result = Scanner([Home(home, "default", "cli")]).scan()
    for rep in result.homes:
        for p in rep.problems:
            assert "scanning failed" not in p, p
    doc = result.to_json()
    # status --json must stay valid JSON (RFC 8259: no NaN / Infinity): checked strictly by
    # test_status_json_is_strict_json, loosely here so the search keeps looking for other failures.
    json.dumps(doc, allow_nan=not strict_json)
    for t in result.turns:
        assert t.verdict in VERDICTS
        assert math.isfinite(t.age_seconds) and t.age_seconds >= 0
        assert len(t.prompt_excerpt) <= 120
    return result


scan_inputs = st.fixed_dictionaries(
    {
        "markers": st.one_of(st.none(), H.marker_bytes),
        "config": st.one_of(st.none(), H.yaml_bytes),
        "active": st.one_of(st.none(), H.active_bytes),
        "journals": st.lists(st.tuples(H.journal_names, H.journal_bytes), max_size=3),
        "db_kind": H.state_db_kind,
        "db_rows": st.lists(st.lists(H.sql_values, min_size=8, max_size=8), max_size=3),
        "db_garbage": st.binary(max_size=200),
    }
)


@H.SETTINGS
@given(inp=scan_inputs)
def test_scanner_survives_any_home(scratch, inp):
    """Arbitrary bytes and JSON shapes in every source at once → the scan never raises, reads only."""
    home = scratch.reset()
    if inp["markers"] is not None:
        (home / "desktop" / "interrupted_turns.json").write_bytes(inp["markers"])
    if inp["config"] is not None:
        (home / "config.yaml").write_bytes(inp["config"])
    if inp["active"] is not None:
        (home / "runtime" / "active_sessions.json").write_bytes(inp["active"])
    for name, data in inp["journals"]:
        (home / "webui" / "sessions" / "_turn_journal" / name).write_bytes(data)
    keys = []
    try:
        doc = json.loads(inp["markers"] or b"{}")
        keys = [k for k in doc if isinstance(k, str)][:4] if isinstance(doc, dict) else []
    except (ValueError, RecursionError):
        pass
    H.write_state_db(home / "state.db", inp["db_kind"], keys or ["k"], inp["db_rows"], inp["db_garbage"])
    before = H.snapshot(home)
    _check_scan(home)
    assert H.snapshot(home) == before, "a scan changed a file"
    _count("scanner(all sources)")


@H.SETTINGS
@given(data=H.marker_bytes, key=H.weird_keys, prompt=H.prompts)
def test_marker_writes_set_corrupt_files_aside(scratch, data, key, prompt):
    """A Hermes-compatible write over any file content never raises and never destroys the old bytes."""
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = scratch.reset()
    path = home / "desktop" / "interrupted_turns.json"
    path.write_bytes(data)
    corrupt = False
    try:
        markers.list_turn_markers(home)
    except markers.MarkerCorruptError:
        corrupt = True
    assert turn_marker.read_turn_marker(home, key) is None or isinstance(turn_marker.read_turn_marker(home, key), dict)
    turn_marker.record_turn_start(home, key, prompt)  # never raises, whatever the key / prompt / file
    turn_marker.clear_turn_marker(home, key)
    if corrupt and path.exists() and path.read_bytes() == data:
        # The Hermes calls ignored the input (empty key / prompt): a strict tray write must set it aside.
        markers.MarkerStore(home).record("20261129_120000_strict", "p")
    names = os.listdir(home / "desktop")
    aside = [n for n in names if ".corrupt-" in n]
    if corrupt:
        assert len(aside) == 1, names
        assert (home / "desktop" / aside[0]).read_bytes() == data, "corrupt file not kept byte for byte"
        assert os.stat(home / "desktop" / aside[0]).st_mode & 0o777 == 0o600
    else:
        assert not aside, names
    if path.exists():
        assert isinstance(json.loads(path.read_bytes()), dict)
    assert not [n for n in names if n.endswith(".tmp")], names
    _count("marker writes")


@H.SETTINGS
@given(data=H.yaml_bytes, fresh=st.integers(min_value=1, max_value=10_000))
def test_config_yaml_write_is_refused_or_correct(scratch, data, fresh):
    """write_auto_continue: a file it cannot edit safely is left byte for byte, with a clear error."""
    from hermes_tray_core.hermes import config as backend_config
    from hermes_tray_core.hermes import config_edit

    home = scratch.reset()
    path = home / "config.yaml"
    path.write_bytes(data)
    cfg = backend_config.read_backend_config(home)  # never raises
    assert cfg.auto_continue.max_attempts >= 0
    t0 = time.monotonic()
    try:
        out = config_edit.write_auto_continue(home, freshness_minutes=fresh)
    except config_edit.BackendConfigError as exc:
        assert str(exc)
        assert path.read_bytes() == data, "a refused edit changed the file"
    else:
        assert out.auto_continue.freshness_minutes == fresh
        assert backend_config.read_backend_config(home).auto_continue.freshness_minutes == fresh
    assert time.monotonic() - t0 < 5, "config.yaml edit took too long (alias bomb?)"
    _count("config.yaml")


@H.SETTINGS
@given(data=H.toml_bytes)
def test_config_toml_load_and_update(scratch, data):
    """Tray settings: any file → defaults/values or SettingsError naming the problem; a refused update changes nothing."""
    from hermes_tray_core.stores import settings

    home = scratch.reset()
    path = home / "config.toml"
    path.write_bytes(data)
    try:
        s = settings.load_settings(path)
        assert s.mode in settings.MODES
    except settings.SettingsError as exc:
        assert str(exc)
        try:  # setting a key may repair a bad value of that key; otherwise the file is left alone
            settings.update_settings({"mode": "off"}, path)
        except settings.SettingsError as exc2:
            assert str(exc2)
            assert path.read_bytes() == data, "a refused update changed the file"
        else:
            assert settings.load_settings(path).mode == "list"  # "off" is the older name of "list"
    _count("config.toml")


@H.SETTINGS
@given(lines=H.journal_bytes, sid=st.sampled_from(["s1", "fault-1"]))
def test_journal_reader_tolerates_anything(scratch, lines, sid):
    from hermes_tray_core.stores import turn_journal as journal

    home = scratch.reset()
    sdir = home / "webui" / "sessions"
    p = sdir / "_turn_journal" / f"{sid}.jsonl"
    p.write_bytes(lines)
    doc = journal.read_journal_files(sid, [(None, p)])
    assert isinstance(doc["events"], list) and isinstance(doc["malformed"], list)
    journal.derive_turn_journal_states(doc["events"])
    journal.pending_turns(doc["events"])
    _count("journal")


BAD_IDS = ["../x", "a/b", "a\\b", "..", "x\x00y", "x\ny", "\x7f", "x" * 10_000, "", " x", "x "]


@pytest.mark.parametrize("bad", BAD_IDS, ids=lambda s: repr(s[:12]))
def test_engine_rejects_unsafe_ids_and_hermes_calls_stay_silent(scratch, bad):
    from hermes_tray_core.keys import InvalidIdError
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker
    from hermes_tray_core.stores import turn_journal as journal

    home = scratch.reset()
    store = markers.MarkerStore(home)
    with pytest.raises((InvalidIdError, ValueError)) as exc:
        store.record(bad, "p")
    assert str(exc.value)
    with pytest.raises((InvalidIdError, ValueError)):
        store.remove_if_unchanged(bad, {})
    with pytest.raises((InvalidIdError, ValueError)):
        journal.validate_journal_session_id(bad)
    # Hermes-compatible bookkeeping: silent, like Hermes'. Nothing escapes the home's desktop dir.
    turn_marker.record_turn_start(home, bad, "p")
    turn_marker.clear_turn_marker(home, bad)
    assert turn_marker.read_turn_marker(home, bad) in (None,) or isinstance(turn_marker.read_turn_marker(home, bad), dict)
    for dirpath, _d, files in os.walk(scratch.root):
        for f in files:
            assert Path(dirpath).is_relative_to(home / "desktop"), f"file written outside the desktop dir: {dirpath}/{f}"
    from hermes_tray_core.continuing.resume import resume_turn
    from hermes_tray_core.turn import Turn

    with pytest.raises((InvalidIdError, ValueError)):  # a turn is typed at the door: resume never sees the id
        resume_turn(Turn.of(home, bad, {}))


def test_huge_prompt_is_capped(scratch):
    from hermes_tray_core.markers import entries as marker_entries
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = scratch.reset()
    turn_marker.record_turn_start(home, "20261129_120000_big", "é" * 1_000_000)
    entry = markers.list_turn_markers(home)["20261129_120000_big"]
    assert len(entry["prompt"]) == marker_entries.MAX_PROMPT_CHARS
    result = _check_scan(home)
    assert all(len(t.prompt_excerpt) <= 120 for t in result.turns)


def test_locked_state_db_is_reported_not_raised(scratch):
    """A Hermes writer holding state.db exclusively: the scan finishes (busy timeout) and says so."""
    from hermes_tray_core.markers import turn_marker

    home = scratch.reset()
    H.write_state_db(home / "state.db", "classic", ["20261129_120000_lock"], [], b"")
    turn_marker.record_turn_start(home, "20261129_120000_lock", "p", writer=None)
    # Mark the writer dead so the lease/owner views are consulted.
    doc = json.loads((home / "desktop" / "interrupted_turns.json").read_text())
    doc["20261129_120000_lock"]["writer_pid"] = H.DEAD_PID
    (home / "desktop" / "interrupted_turns.json").write_text(json.dumps(doc))
    con = sqlite3.connect(home / "state.db", timeout=0, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        result = _check_scan(home)
        took = time.monotonic() - t0
    finally:
        con.execute("ROLLBACK")
        con.close()
    assert took < 5
    (rep,) = result.homes
    assert rep.state_db == "unreadable" or any("locked" in p for p in rep.problems), rep
    (turn,) = [t for t in result.turns if t.session_key == "20261129_120000_lock"]
    assert turn.verdict != "actionable", "a locked state.db must not read as 'no live lease'"


def test_markers_from_the_future(scratch):
    """Clock skew: a marker dated a year ahead never reads as a negative age, and the scan stays sane."""
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = scratch.reset()
    path = home / "desktop" / "interrupted_turns.json"
    future = time.time() + 365 * 86400
    path.write_text(json.dumps({
        "20261129_120000_future": {"attempts": 0, "prompt": "from the future", "started_at": future,
                                   "auto_continue": True, "writer_pid": H.DEAD_PID},
    }))
    result = _check_scan(home)
    (turn,) = result.turns
    assert turn.age_seconds == 0
    # A Hermes write keeps it (Hermes prunes by age only), and ours does not crash on it.
    turn_marker.record_turn_start(home, "20261129_120000_now", "now")
    assert "20261129_120000_future" in markers.list_turn_markers(home)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_status_json_is_strict_json(scratch, literal):
    """A marker with ``started_at: NaN`` (Python's and Hermes' json accept it) must not make
    ``status --json`` print ``NaN``, which is not JSON (jq, JSON.parse and strict parsers reject it)."""
    home = scratch.reset()
    (home / "desktop" / "interrupted_turns.json").write_text(
        '{"20261129_120000_nan": {"attempts": 0, "prompt": "p", "auto_continue": true, '
        f'"writer_pid": {H.DEAD_PID}, "started_at": {literal}, "interrupted_at": {literal}}}}}'
    )
    _check_scan(home, strict_json=True)


BOMB_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (768 * 1024**2, 768 * 1024**2))
    sys.path.insert(0, sys.argv[3])
    import fault_hostile as hostile
    home = Path(sys.argv[1])
    (home / "config.yaml").write_text(hostile.BILLION_LAUGHS)
    t0 = time.monotonic()
    if sys.argv[2] == "read":
        from hermes_tray_core.hermes.config import read_backend_config
        cfg = read_backend_config(home)
        print("OK", cfg.auto_continue, cfg.error, sum(len(w) for w in cfg.warnings))
    else:
        from hermes_tray_core.hermes.config_edit import BackendConfigError, write_auto_continue
        try:
            write_auto_continue(home, freshness_minutes=5)
            print("OK written")
        except BackendConfigError as exc:
            print("OK refused", str(exc)[:200])
    print("took", round(time.monotonic() - t0, 2))
    """
)


@pytest.mark.parametrize("op", ["read", "write"])
def test_config_yaml_alias_bomb_is_bounded(tmp_path, op):
    """A YAML alias bomb ("billion laughs", 9**9 leaves from a 600-byte file) in config.yaml must
    not expand: the scanner reads config.yaml on every scan, so an unbounded read is a tray-wide
    denial of service (found here: read_backend_config ate 7.8 GB before this cap existed).
    Run in a child with a 768 MB address-space cap and a 20 s timeout."""
    env = {**os.environ, "HERMES_TRAY_STATE_DIR": str(tmp_path / "state")}
    try:
        out = subprocess.run(
            [sys.executable, "-c", BOMB_CHILD, str(tmp_path), op, str(Path(__file__).parent)],
            capture_output=True, text=True, timeout=20, env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"config.yaml {op} with an alias bomb did not finish in 20 s")
    assert out.returncode == 0 and out.stdout.startswith("OK"), (out.stdout[-500:], out.stderr[-1500:])
    assert len(out.stdout) < 10_000, "a warning carried the expanded value"
