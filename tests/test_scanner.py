"""The scanner over real fixture homes: profiles, every verdict, broken sources, WebUI journals, cache."""

from __future__ import annotations

import json
import sqlite3
import sys
import time

import pytest

from hermes_tray_core.hermes.homes import discover_homes
from hermes_tray_core.scanning.scanner import Scanner, prompt_excerpt, scan
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


def test_a_marker_under_a_key_no_hermes_session_has_is_listed_but_never_offered(tmp_path, monkeypatch):
    """A key with a path separator or control characters names no Hermes session: nothing may put it in a claim, a
    journal or an argv. The turn is listed as it is (the user sees it) and judged not-ours, so no Resume is offered
    (one would only fail); its neighbour is judged as ever."""
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s-ok", title="Fine")
    home.write_markers({"s-ok": marker_entry("a fine turn"), "../../x\x07": marker_entry("a hostile one")})
    home.close()
    turns = by_key(scan(discover_homes(env={"HERMES_HOME": str(home.path)})))
    assert turns["s-ok"].verdict == "actionable"
    odd = turns["../../x\x07"]
    assert (odd.verdict, odd.code, odd.prompt_excerpt) == ("not-ours", "malformed-entry", "a hostile one")


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
        ("web-4", "x", "unknown", "not-ours"),  # no WebUI server for this state dir is alive: interrupted
    ]
    assert f"pid {gone}" in web[0].reason and "no WebUI server is running" in web[1].reason
    assert [t.code for t in web] == ["webui-interrupted", "webui-interrupted"] and not any(t.unsure for t in web)
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
    from hermes_tray_core.scanning import webui

    real = webui.summarise_journal
    monkeypatch.setattr(webui, "summarise_journal", lambda sid, *a: calls.append(sid) or real(sid, *a))
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


def test_junk_hermes_would_continue_is_actionable_and_status_json_stays_strict(tmp_path, monkeypatch):
    """NaN ``started_at`` and a non-text prompt: Hermes' own code continues them (issue 24, point 7;
    tests/test_marker_parity_hermes.py), so they are offered, and nothing non-finite reaches the JSON. A +Infinity
    ``started_at`` starts more than 5 minutes in the future: newer Hermes' reader drops it, so it is not offered
    (0.22.2.post1 would still continue it)."""
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "s"))
    home = FixtureHome(tmp_path / "h")
    home.close()
    junk = {"nan": {**marker_entry("p"), "started_at": float("nan")},
            "inf": {**marker_entry("p"), "started_at": float("inf")},
            "number": {**marker_entry("p"), "prompt": 42},
            "gone": {**marker_entry("p"), "started_at": float("-inf")}}
    home.marker_file.parent.mkdir(parents=True, exist_ok=True)
    home.marker_file.write_text(json.dumps(junk))
    result = scan(discover_homes(explicit=[home.path]))
    turns = by_key(result)
    assert {k: t.verdict for k, t in turns.items()} == {"nan": "actionable", "inf": "not-ours",
                                                        "number": "actionable", "gone": "stale"}
    assert turns["number"].prompt_excerpt == ""  # continued as "42" by Hermes, but no number is shown as a prompt
    json.dumps(result.to_json(), allow_nan=False)


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


# ── writers of unknown liveness: Hermes' order, made safe by the processes the tray can see ──────────


def _older_backend_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(tmp_path / "no-managed"))
    root = FixtureHome(tmp_path / "hermes")
    other = FixtureHome(tmp_path / "hermes" / "profiles" / "other")
    now = time.time()
    old = {"attempts": 0, "prompt": "written by 0.18", "started_at": now - 60, "auto_continue": True}
    root.write_markers({
        "s-old": old,  # no writer_pid: an older backend
        "s-junk": {**old, "writer_pid": "not-a-pid"},
        "s-old-stale": {**old, "started_at": now - 7200},
    })
    other.write_markers({"o-old": dict(old)})
    root.add_session("s-old", title="old one")
    root.close()
    other.close()
    return root, other, discover_homes(env={"HERMES_HOME": str(root.path)})


@pytest.mark.skipif(sys.platform == "win32", reason="fake Hermes processes use the POSIX shebang form")
@pytest.mark.parametrize("kind, command", [("dashboard", "hermes dashboard"),
                                           ("gateway", "python -m tui_gateway.entry"),
                                           ("chat", "hermes chat")])
def test_unknown_writer_is_running_only_while_a_live_hermes_serves_the_home(tmp_path, monkeypatch, kind, command):
    from tests.support.fake_hermes import fake_hermes, kill

    root, other, homes = _older_backend_home(tmp_path, monkeypatch)
    # No Hermes process serves the home: Hermes' own order (only "alive" blocks).
    turns = by_key(scan(homes))
    assert {k: (t.writer, t.verdict) for k, t in turns.items()} == {
        "s-old": ("unknown", "actionable"), "s-junk": ("unknown", "actionable"),
        "s-old-stale": ("unknown", "stale"), "o-old": ("unknown", "actionable")}
    assert "older backend" in turns["s-old"].reason and turns["s-old"].code == "actionable"
    # A live Hermes backend for the root home: its unknown-writer turns may be running there.
    with fake_hermes(kind, tmp_path, env={"HERMES_HOME": str(root.path)}) as (proc, _port):
        turns = by_key(scan(homes))
        for key in ("s-old", "s-junk", "s-old-stale"):
            assert turns[key].verdict == "running" and turns[key].unsure, key
            assert f"pid {proc.pid} ({command})" in turns[key].reason
            assert turns[key].code == "backend-live"
            assert turns[key].holder is not None and turns[key].holder[0] == proc.pid
        from hermes_tray.engine import CoreEngine

        # The tray watches that process: its exit changes these verdicts without waiting for a re-scan.
        assert proc.pid in [pid for pid, _start in CoreEngine([str(root.path)]).writers(homes, list(turns.values()))]
        assert turns["o-old"].verdict == "actionable"  # another home: not served by it
        as_json = json.loads(json.dumps(scan(homes).to_json()))
        assert {t["session_key"]: t["verdict"] for t in as_json["turns"]}["s-old"] == "running"
        kill(proc)  # SIGKILL: the backend is gone
        turns = by_key(scan(homes))
        assert turns["s-old"].verdict == "actionable" and turns["s-old-stale"].verdict == "stale"


def test_an_unreadable_process_table_is_never_actionable(tmp_path, monkeypatch):
    _root, _other, homes = _older_backend_home(tmp_path, monkeypatch)

    def broken():
        raise PermissionError("no /proc")

    turns = by_key(Scanner(homes, process_finder=broken).scan())
    assert turns["s-old"].verdict == "running" and turns["s-old"].unsure
    assert "cannot be read" in turns["s-old"].reason
    assert turns["s-old-stale"].verdict == "stale"  # a do-nothing verdict stays as Hermes would say


# ── hostile numbers: one entry never hides its siblings; age and reason always agree ─────────────────


def _age_in_reason(reason: str) -> str | None:
    import re

    m = re.search(r"(?:interrupted|started) (\d+ (?:s|min|h|days) ago)", reason)
    return m.group(1) if m else None


def test_a_400_digit_attempts_no_longer_hides_the_homes_turns(tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    root = FixtureHome(tmp_path / "hermes")
    now = time.time()
    root.write_markers({
        "huge-attempts": marker_entry("a", attempts=int("1" + "0" * 400)),
        "huge-started": marker_entry("b", started_at=int("1" + "0" * 400)),
        "text-attempts": marker_entry("c", attempts="many"),
        "fine": marker_entry("d", started_at=now - 30),
    })
    homes = discover_homes(env={"HERMES_HOME": str(root.path)})
    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.scanning.scanner"):
        result = scan(homes)
    turns = by_key(result)
    assert result.homes[0].markers == "ok" and set(turns) == {"huge-attempts", "huge-started", "text-attempts", "fine"}
    assert turns["fine"].verdict == "actionable"
    assert turns["huge-attempts"].verdict == "exhausted" and len(turns["huge-attempts"].reason) < 160
    assert turns["huge-started"].verdict == "not-ours" and turns["text-attempts"].verdict == "not-ours"
    logged = [r.getMessage() for r in caplog.records]
    assert any("huge-started" in m and "malformed" in m for m in logged)
    assert any("text-attempts" in m for m in logged)
    json.dumps(result.to_json(), allow_nan=False)  # strict JSON: no NaN / Infinity anywhere


def test_negative_interrupted_at_age_and_reason_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    root = FixtureHome(tmp_path / "hermes")
    now = time.time()
    root.write_markers({"neg": marker_entry("x", started_at=now - 30, interrupted_at=-5)})
    turn = scan(discover_homes(env={"HERMES_HOME": str(root.path)}), now=now).turns[0]
    assert turn.verdict == "actionable" and "30 s ago" in turn.reason
    assert 29 <= turn.age_seconds <= 31  # not 57 years


def test_webui_session_with_a_live_server_is_running_and_one_row_per_session(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    root = FixtureHome(tmp_path / "hermes")
    t0 = time.time() - 600
    root.write_journal("web-a", journal_turn("20260101T000000Z-aaaaaaaaaaaa", ["submitted"], t0=t0)
                       + journal_turn("20260101T000100Z-bbbbbbbbbbbb", ["submitted", "worker_started"], t0=t0 + 60))
    homes = discover_homes(env={"HERMES_HOME": str(root.path)})
    web = [t for t in scan(homes).turns if t.source == "webui"]
    assert [(t.session_key, t.turn_id, t.verdict) for t in web] == [
        ("web-a", "20260101T000100Z-bbbbbbbbbbbb", "not-ours")]
    assert "2 unfinished turns" in web[0].reason and _age_in_reason(web[0].reason) == "9 min ago"
    if sys.platform == "win32":
        return
    from tests.support.fake_hermes import fake_hermes

    with fake_hermes("webui", tmp_path, env={"HERMES_HOME": str(root.path)}) as (proc, _):
        web = [t for t in scan(homes).turns if t.source == "webui"]
        assert [(t.session_key, t.verdict, t.unsure) for t in web] == [("web-a", "running", True)]
        assert f"pid {proc.pid}" in web[0].reason and web[0].code == "webui-server-live"


def test_a_hostile_entry_never_hides_its_siblings_property(tmp_path, monkeypatch):
    import itertools
    import math

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.test_policy import HOSTILE, NUMERIC_FIELDS, agrees

    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    counter = itertools.count()

    @settings(max_examples=80, deadline=None)
    @given(field=st.sampled_from(NUMERIC_FIELDS + ("auto_continue", "prompt")), value=HOSTILE)
    def check(field, value):
        root = FixtureHome(tmp_path / f"h{next(counter)}")
        now = time.time()
        root.write_markers({"hostile": {**marker_entry("h"), field: value},
                            "sibling": marker_entry("s", started_at=now - 30)})
        result = scan(discover_homes(env={"HERMES_HOME": str(root.path)}), now=now)
        turns = by_key(result)
        assert result.homes[0].markers == "ok"
        assert turns["sibling"].verdict == "actionable" and "30 s ago" in turns["sibling"].reason
        for t in result.turns:
            assert agrees(t) and math.isfinite(t.age_seconds) and t.age_seconds >= 0
        json.dumps(result.to_json(), allow_nan=False)

    check()
