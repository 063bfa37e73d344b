"""The scanner over real fixture homes: profiles, every verdict, broken sources, WebUI journals, cache."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from hermes_tray_core import scanner as scanner_mod
from hermes_tray_core.homes import discover_homes
from hermes_tray_core.scanner import Scanner, prompt_excerpt, scan
from tests.support.fixture_homes import FixtureHome, dead_pid, journal_turn, marker_entry, own_writer


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    root = FixtureHome(tmp_path / "hermes")
    work = FixtureHome(tmp_path / "hermes" / "profiles" / "work")
    now = time.time()
    for sid, title, source in [("s-live", "Live one", "tui"), ("s-dead", "Crashed refactor", "tui"),
                               ("s-stale", None, "tui"), ("s-exh", None, "tui"), ("s-bot", None, "bot_room"),
                               ("s-off", None, "tui"), ("s-lease", None, "tui")]:
        root.add_session(sid, title=title, source=source)
    root.add_lease("s-lease", holder="pid=1:turn=t:platform=linux")  # no pidns: live until expiry
    root.write_markers({
        "s-live": marker_entry("live prompt", writer=own_writer()),
        "s-dead": marker_entry("refactor the parser\nsecond line", started_at=now - 120),
        "s-stale": marker_entry("old", started_at=now - 3 * 3600),
        "s-exh": marker_entry("crashy", attempts=2),
        "s-bot": marker_entry("hosted"),
        "s-off": marker_entry("owned elsewhere", auto_continue=False),
        "s-lease": marker_entry("leased"),
    })
    work.write_config("desktop:\n  auto_continue:\n    enabled: false\n")
    work.add_session("w-1", title="Profile turn")
    work.write_markers({"w-1": marker_entry("in the work profile")})
    root.close()
    work.close()
    homes = discover_homes(env={"HERMES_HOME": str(root.path)})
    return root, work, homes


def by_key(result):
    return {t.session_key: t for t in result.turns}


def test_every_verdict_across_root_and_profile(tree):
    root, work, homes = tree
    result = scan(homes)
    turns = by_key(result)
    assert {k: t.verdict for k, t in turns.items()} == {
        "s-live": "running", "s-dead": "actionable", "s-stale": "stale", "s-exh": "exhausted",
        "s-bot": "not-ours", "s-off": "not-ours", "s-lease": "running", "w-1": "disabled",
    }
    dead = turns["s-dead"]
    assert (dead.title, dead.prompt_excerpt, dead.writer, dead.source, dead.profile) == (
        "Crashed refactor", "refactor the parser", "dead", "desktop", "default")
    assert 119 < dead.age_seconds < 200 and dead.attempts == 0
    assert turns["s-live"].writer == "alive" and "still running" in turns["s-live"].reason
    assert "turn lease" in turns["s-lease"].reason
    assert turns["w-1"].profile == "work" and turns["w-1"].title == "Profile turn"
    assert [h.profile for h in result.homes] == ["default", "work"]
    assert result.homes[1].config.enabled is False
    assert result.homes[0].marker_count == 7 and result.homes[0].state_db == "ok"
    assert [t.session_key for t in result.actionable] == ["s-dead"]
    assert dead.entry["prompt"].startswith("refactor")  # raw entry kept for compare-and-remove
    assert "refactor" not in repr(dead) and "s-dead" in repr(dead)  # a logged record carries no prompt text


def test_corrupt_marker_file_is_reported_not_hidden(tree):
    root, _work, homes = tree
    root.marker_file.write_text("{not json")
    result = scan(homes)
    report = result.homes[0]
    assert report.markers == "corrupt"
    assert any("corrupt" in p and "interrupted_turns.json" in p for p in report.problems)
    assert not [t for t in result.turns if t.home == root.path]
    assert [t.session_key for t in result.turns] == ["w-1"]  # the other home still scanned


def test_locked_state_db_is_never_actionable(tree):
    root, _work, homes = tree
    locker = sqlite3.connect(root.path / "state.db", isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        result = scan(homes)
        assert time.monotonic() - t0 < 10
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    report = result.homes[0]
    assert report.state_db == "unreadable"
    assert any("locked" in p for p in report.problems)
    dead = by_key(result)["s-dead"]
    assert dead.verdict == "running" and dead.unsure and "cannot read" in dead.reason
    assert dead.title is None
    assert by_key(result)["s-stale"].verdict == "stale"  # a do-nothing verdict stays as Hermes would say


def test_webui_pending_turn_with_dead_worker(tree):
    root, _work, homes = tree
    gone = dead_pid()
    root.write_journal("web-1", journal_turn("20260101T000000Z-aaaaaaaaaaaa", ["submitted", "worker_started",
                                                                              "completed"])
                       + journal_turn("20260101T000100Z-bbbbbbbbbbbb", ["submitted", "worker_started",
                                                                      "assistant_started"]), shard_pid=gone)
    root.write_journal("web-2", journal_turn("20260101T000200Z-cccccccccccc", ["submitted", "worker_started"],
                                             worker_pid=own_writer()["writer_pid"]))
    root.write_journal("web-3", journal_turn("20260101T000300Z-dddddddddddd", ["submitted", "interrupted"]))
    (root.journal_dir / "web-4.jsonl").write_text('{"turn_id": "x", "event": "submitted", "created_at": 1}\n{torn')
    result = scan(homes)
    web = [t for t in result.turns if t.source == "webui"]
    assert [(t.session_key, t.turn_id, t.writer, t.verdict) for t in web] == [
        ("web-1", "20260101T000100Z-bbbbbbbbbbbb", "dead", "not-ours"),
        ("web-4", "x", "unknown", "running"),
    ]
    assert f"pid {gone}" in web[0].reason and web[1].unsure
    assert result.homes[0].webui_sessions == 4
    assert any("malformed" in p for p in result.homes[0].problems)


@pytest.mark.parametrize("kind", ["table", "dir", "migrated"])
def test_newer_hermes_storage_is_reported_unsupported(tree, kind):
    root, _work, homes = tree
    if kind == "table":
        root.db().execute("CREATE TABLE interrupted_turns (session_key TEXT PRIMARY KEY, prompt TEXT)")
        root.close()
    elif kind == "dir":
        (root.path / "desktop" / "interrupted_turns").mkdir()
    else:
        root.marker_file.rename(root.marker_file.with_name("interrupted_turns.json.migrated"))
    result = scan(homes)
    assert result.unsupported
    assert any("not yet supported" in u for u in result.homes[0].unsupported)
    assert not result.homes[1].unsupported


def test_missing_home_and_no_state_db(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    bare = FixtureHome(tmp_path / "bare")
    bare.write_markers({"k": marker_entry("p")})
    homes = discover_homes(explicit=[tmp_path / "nowhere", bare.path])
    result = scan(homes)
    assert result.homes[0].exists is False and "does not exist" in result.homes[0].problems[0]
    assert result.homes[1].state_db == "missing"
    assert any("no state.db" in p and "titles unavailable" in p for p in result.homes[1].problems)
    # no state.db holds no Hermes turn lease, and no registry registers no owner: a dead writer's
    # fresh turn is actionable (it used to read "running" forever, never offered)
    k = by_key(result)["k"]
    assert k.verdict == "actionable" and not k.unsure, k.reason


def test_state_db_that_cannot_be_read_keeps_turns_unsure(tmp_path, monkeypatch):
    """Missing is a definite answer; a state.db that is there but unreadable is not."""
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    odd = FixtureHome(tmp_path / "odd")
    odd.write_markers({"k": marker_entry("p")})
    (odd.path / "state.db").mkdir()  # something is there, not a database we can open
    result = scan(discover_homes(explicit=[odd.path]))
    assert result.homes[0].state_db == "unreadable"
    k = by_key(result)["k"]
    assert k.verdict == "running" and k.unsure, k.reason


def test_incremental_cache_rereads_only_changed_files(tree, tmp_path, monkeypatch):
    root, _work, homes = tree
    for i in range(5):
        root.write_journal(f"j{i}", journal_turn(f"20260101T00000{i}Z-aaaaaaaaaaaa", ["submitted", "completed"]))
    cache = tmp_path / "cache" / "scan.json"
    calls = []
    real = scanner_mod._summarise_journal
    monkeypatch.setattr(scanner_mod, "_summarise_journal", lambda sid, *a: calls.append(sid) or real(sid, *a))
    Scanner(homes, cache_file=cache).scan()
    assert sorted(calls) == [f"j{i}" for i in range(5)]
    calls.clear()
    first = Scanner(homes, cache_file=cache).scan()  # a new process: the persisted cache answers
    assert calls == []
    time.sleep(0.01)
    root.write_journal("j3", journal_turn("20260101T000003Z-aaaaaaaaaaaa", ["submitted", "worker_started"],
                                          worker_pid=dead_pid()))
    second = Scanner(homes, cache_file=cache).scan()
    assert calls == ["j3"]
    assert len([t for t in second.turns if t.source == "webui"]) == len([t for t in first.turns
                                                                          if t.source == "webui"]) + 1
    calls.clear()
    Scanner(homes[1:], cache_file=cache).scan()  # like `status --home <profile>`
    Scanner(homes, cache_file=cache).scan()
    assert calls == []  # the partial scan kept what the full scan cached for the other homes
    (root.journal_dir / "j0.jsonl").unlink()
    Scanner(homes, cache_file=cache).scan()
    assert not [k for k in json.loads(cache.read_text())["journals"] if k.endswith("j0")]  # forgotten
    assert "refactor" not in cache.read_text() and "crashy" not in cache.read_text()  # never prompt text
    assert oct(cache.stat().st_mode & 0o777) == "0o600"


def test_damaged_scan_cache_is_ignored(tree, tmp_path):
    root, _work, homes = tree
    root.write_journal("jx", journal_turn("20260101T000000Z-aaaaaaaaaaaa", ["submitted", "worker_started"],
                                          worker_pid=dead_pid()))
    cache = tmp_path / "scan.json"
    good = Scanner(homes, cache_file=cache).scan()
    doc = json.loads(cache.read_text())
    for entry in doc["journals"].values():
        entry[1:] = [{"pending": ["junk"]}]
    for entry in doc["configs"].values():
        entry[1] = "junk"
    cache.write_text(json.dumps(doc))
    again = Scanner(homes, cache_file=cache).scan()
    assert [t.to_json()["verdict"] for t in again.turns] == [t.to_json()["verdict"] for t in good.turns]
    assert again.homes[1].config.enabled is False and not again.homes[0].problems
    cache.write_text("not json at all")
    assert len(Scanner(homes, cache_file=cache).scan().turns) == len(good.turns)


def test_in_process_scanner_sees_marker_changes(tree):
    root, _work, homes = tree
    s = Scanner(homes)
    assert "s-new" not in by_key(s.scan())
    entries = root.read_markers()
    entries["s-new"] = marker_entry("new one")
    time.sleep(0.01)
    root.write_markers(entries)
    assert by_key(s.scan())["s-new"].verdict == "actionable"


def test_junk_marker_entries_never_break_the_scan(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    home = FixtureHome(tmp_path / "h")
    home.add_session("ok")
    home.close()
    junk = {
        "inf": {"prompt": "p", "started_at": float("inf"), "attempts": float("nan"), "writer_pid": 10**30},
        "types": {"prompt": ["x"], "started_at": "now", "attempts": {}, "auto_continue": "no", "writer_pid": "1"},
        "neg": {"prompt": "p", "started_at": -1e300, "attempts": -5, "writer_pid": -1, "writer_start_time": "x"},
        "huge": {"prompt": "p" * 100_000, "started_at": 1e308, "attempts": 10**20},
        "ok": marker_entry("fine"),
    }
    home.marker_file.parent.mkdir(parents=True, exist_ok=True)
    home.marker_file.write_text(json.dumps(junk))  # Infinity / NaN, as Python writes them
    result = scan(discover_homes(explicit=[home.path]))
    turns = by_key(result)
    assert set(turns) == set(junk)
    assert turns["ok"].verdict == "actionable"
    assert all(t.verdict != "actionable" for k, t in turns.items() if k != "ok")
    json.dumps(result.to_json(), allow_nan=False)  # strict JSON for status --json consumers
    assert len(turns["huge"].prompt_excerpt) == 120


def test_prompt_excerpt():
    assert prompt_excerpt("\n\n  first line  \nsecond") == "first line"
    long = prompt_excerpt("x" * 500)
    assert len(long) == 120 and long.endswith("…")
    assert prompt_excerpt(None) == ""


def test_lease_on_the_conversation_root_marks_a_compressed_child_running(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    home = FixtureHome(tmp_path / "h")
    db = home.db()
    db.execute("INSERT INTO sessions (id, source, end_reason) VALUES ('root', 'tui', 'compression')")
    db.execute("INSERT INTO sessions (id, source, parent_session_id, title) VALUES ('child', 'tui', 'root', 'Kid')")
    home.add_lease("root", holder="pid=1:turn=t:platform=linux")  # no pidns: live until it expires
    home.close()
    home.write_markers({"child": marker_entry("continued after compression")})
    turn = by_key(scan(discover_homes(explicit=[home.path])))["child"]
    assert (turn.verdict, turn.title) == ("running", "Kid")
    assert "turn lease" in turn.reason


def test_live_active_session_owner_marks_the_turn_running(tmp_path, monkeypatch):
    import os

    import psutil

    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    home = FixtureHome(tmp_path / "h")
    home.add_session("owned")
    home.add_session("free")
    home.close()
    home.write_markers({"owned": marker_entry("a"), "free": marker_entry("b")})
    (home.path / "runtime").mkdir()
    (home.path / "runtime" / "active_sessions.json").write_text(json.dumps({"entries": [
        {"session_id": "owned", "pid": os.getpid(), "process_start_time": psutil.Process().create_time(),
         "surface": "tui"}]}))
    turns = by_key(scan(discover_homes(explicit=[home.path])))
    assert turns["owned"].verdict == "running" and "has this session open" in turns["owned"].reason
    assert turns["free"].verdict == "actionable"
