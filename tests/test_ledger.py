"""The ledger (``core/stores/ledger.py``): the tray's one memory of every interrupted turn, in real SQLite.

What a user notices: a turn asked about is never asked again after a restart; a skip, a Stop and a snooze hold; a
resume that never reached Hermes is no answer; History has one row per turn, its continuations included; an earlier
release's journal is carried over whole, and one bad line in it costs that line only.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hermes_tray_core.keys import home_path
from hermes_tray_core.stores import ledger as ledger_module
from hermes_tray_core.stores.ledger import Ledger, ledger
from hermes_tray_core.turn import TurnId

REPO = Path(__file__).resolve().parents[1]
BEFORE = REPO / "tests" / "support" / "journal_before_ledger.jsonl"  # written by the release before the ledger


def tid(home: Path | str, key: str, started: float, attempt: int = 0) -> TurnId:
    return TurnId(home_path(home), key, float(started), attempt)  # type: ignore[arg-type]


def run(book: Ledger, turn: TurnId, name: str = "resume:x") -> int:
    """A run of ours on ``turn``, recorded with its claim in one transaction (as core.continuing.claim does)."""
    runs: list[int] = []
    store = book.store()
    lease = store.acquire(f"{name}:{turn.key}:{turn.started_at}", "pid=1:via=test", ttl=60,
                          then=lambda conn, lease: runs.append(book.begin_run(conn, turn, lease)))
    assert lease is not None
    store.release(lease)
    return runs[0]


def test_decisions_come_back_newest_first_and_filtered(tmp_path) -> None:
    book = ledger()
    home, other = tmp_path / "hermes", tmp_path / "other"
    book.record("notified", tid(home, "s1", 1000), via="desktop-notifier")
    book.record("skipped", tid(other, "s2", 1001), via="tray-menu")
    book.record_config_change(home=None, key="mode", old="ask", new="auto", by="tray")
    hist = book.history()
    assert [h["event"] for h in hist] == ["config-changed", "skipped", "notified"]
    assert hist[2]["home"] == str(home.resolve()) and hist[2]["session_key"] == "s1" and hist[2]["started_at"] == 1000
    assert hist[0]["home"] is None and "session_key" not in hist[0] and hist[0]["new"] == "auto"
    assert [h["event"] for h in book.history(home=home)] == ["notified"]
    assert [h["event"] for h in book.history(homes=[other])] == ["config-changed", "skipped"]
    assert [h["event"] for h in book.history(session_key="s2")] == ["skipped"]


def test_prompt_text_and_bad_records_are_refused_and_nothing_is_written(tmp_path) -> None:
    book = ledger()
    t = tid(tmp_path, "s1", 1000)
    for bad in ("prompt", "text", "note", "excerpt"):
        with pytest.raises(ValueError):
            book.record("notified", t, **{bad: "rm -rf the secret plan"})
    with pytest.raises(TypeError):
        book.record("notified", t, payload={"prompt": "x"})
    with pytest.raises(ValueError):
        book.record("resumed", t)
    with pytest.raises(ValueError):
        book.record("notified", tid(tmp_path, "../etc", 1000))
    with pytest.raises(ValueError):
        book.record_many([("notified", tid(tmp_path, "ok", 1), {}), ("notified", t, {"prompt": "x"})])
    assert book.history() == []
    assert len(book.record("failed", t, reason="x" * 5000)["reason"]) == ledger_module.MAX_STRING


NOTIFY = textwrap.dedent("""
    import sys
    from hermes_tray_core.stores.ledger import ledger
    from hermes_tray_core.turn import TurnId
    from hermes_tray_core.keys import home_path
    ledger().record("notified", TurnId(home_path(sys.argv[1]), "s1", float(sys.argv[2]), 0))
""")


def test_a_restarted_tray_never_asks_twice_about_the_same_turn(tmp_path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    subprocess.run([sys.executable, "-c", NOTIFY, str(home), "1000"], check=True)  # an earlier process, gone
    fresh = Ledger(ledger().path)
    assert fresh.status(tid(home, "s1", 1000)).asked
    assert fresh.status(tid(str(home) + "/", "s1", 1000)).asked  # however the home is spelled
    assert fresh.status(tid(home, "s1", 1000, attempt=1)).asked  # whatever its attempt count reads meanwhile
    assert not fresh.status(tid(home, "s1", 1060)).asked  # a new interruption of the session is a new question
    assert not fresh.status(tid(home, "s2", 1000)).asked


def test_skip_stop_snooze_and_finish_hold_for_that_interruption_only(tmp_path) -> None:
    book, t = ledger(), tid(tmp_path, "s1", 1000)
    book.record("skipped", t, via="cli")
    assert book.status(t).skipped and not book.status(t._replace(attempt=1)).skipped
    stopped, gave_up, done = tid(tmp_path, "s2", 1000), tid(tmp_path, "s3", 1000), tid(tmp_path, "s4", 1000)
    r = run(book, stopped)
    book.record("interrupted", stopped, run=r, stopped_by="you", dispatched=False)  # your Stop, before Hermes began
    book.record("gave-up", gave_up, reason="attempt 2 of 2 crashed")
    book.record("completed", done, settled_by="state.db")
    assert book.status(stopped).stopped == "interrupted" and book.status(stopped).asked
    assert book.status(gave_up).stopped == "gave-up"
    assert book.status(done).finished and not book.status(done._replace(started_at=1001)).finished
    snoozed = tid(tmp_path, "s5", 1000)
    book.record("notified", snoozed)
    book.record("snoozed", snoozed, until=5000.0)
    assert book.status(snoozed).snooze == (5000.0, False)
    book.record("notified", snoozed)  # the reminder reached the user
    assert book.status(snoozed).snooze == (5000.0, True)


def test_a_resume_that_never_reached_hermes_is_no_answer(tmp_path) -> None:
    """Issue 41.3: the helper SIGTERMed before Hermes took the marker left a journal that read "asked or answered",
    so after a restart it neither resumed nor notified. A run that never reached Hermes is no answer."""
    book, t = ledger(), tid(tmp_path, "s1", 1000)
    book.record("notified", t)
    quit_early = run(book, t)
    book.record("approved", t, run=quit_early)
    assert book.status(t).asked  # being resumed
    book.record("interrupted", t, run=quit_early, stopped_by="shutdown", dispatched=False)
    assert not book.status(t).asked  # asked again (ask mode), resumed again (auto mode)
    killed = run(book, t)
    book.record("approved", t, run=killed)
    book.record("failed", t, run=killed, outcome="error", dispatched=False, via="scan")  # settled by the sweep
    assert not book.status(t).asked
    reached = run(book, t)
    book.record("approved", t, run=reached)
    book.record("dispatched", t, run=reached, attempt=1)
    book.record("failed", t, run=reached, outcome="crashed", dispatched=True)
    assert book.status(t).asked  # it reached Hermes: an answer (its own marker is a new question)


def test_history_has_one_row_per_turn_with_its_continuations(tmp_path) -> None:
    """Issue 42.8: "19" counted for 17 turns, a re-offered turn in two rows. A continuation's interruption is tied
    to the run that became it when that is recorded, and History folds it into its turn's row."""
    book, home, now = ledger(), tmp_path / "hermes", time.time()
    legacy = tid(home, "legacy", now - 600)
    r = run(book, legacy)
    book.record("approved", legacy, run=r)
    book.record("continuing", legacy, run=r, marker_started=now - 590, attempt=1)  # the tray's own marker
    book.record("failed", legacy, run=r, outcome="crashed", dispatched=True)
    again = tid(home, "legacy", now - 590, attempt=1)
    book.record("notified", again)
    g2 = tid(home, "g2", now - 300)  # a Hermes that continues turns itself: its marker was not seen by the run
    r2 = run(book, g2)
    book.record("approved", g2, run=r2)
    book.record("dispatched", g2, run=r2, attempt=1)
    book.record("detached", g2, run=r2, stopped_by="shutdown")  # the tray quit while it ran
    offered = tid(home, "g2", now + 2, attempt=1)  # Hermes wrote its marker as the continuation started
    book.record("notified", offered)  # offered again: the same turn
    later = tid(home, "g2", now + 900)  # a new interruption of that session later: a turn of its own
    book.record("notified", later)
    rows = book.turns()
    assert [(str(r["turn"].key), len(r["events"])) for r in rows] == [("g2", 1), ("g2", 4), ("legacy", 4)]
    assert rows[1]["turn"] == g2 and rows[1]["last"] == offered
    assert rows[2]["turn"] == legacy and rows[2]["last"] == again
    assert book.status(again).crashed is not None and book.status(again).crashed["outcome"] == "crashed"
    assert book.status(legacy).crashed is None


def test_open_runs_are_those_not_ended(tmp_path) -> None:
    book, home = ledger(), tmp_path / "hermes"
    t = tid(home, "s1", 1000)
    r = run(book, t)
    assert [(o["run"], o["event"]) for o in book.open_runs(home)] == [(r, None)]  # claimed, nothing recorded yet
    book.record("approved", t, run=r)
    book.record("detached", t, run=r)  # its end is read from Hermes later
    assert [o["event"] for o in book.open_runs(home)] == ["detached"]
    book.record("completed", t, run=r, via="scan")
    assert book.open_runs(home) == []


def test_it_keeps_the_newest_decisions_and_every_one_of_an_open_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ledger_module, "KEEP", 50)
    path = ledger().path
    book = Ledger(path)
    home = tmp_path / "hermes"
    live = tid(home, "live", 1)
    r = run(book, live)
    book.record("approved", live, run=r)
    for i in range(200):
        book.record("notified", tid(home, f"s{i}", 1000 + i))
    reopened = Ledger(path)  # a process's first write keeps the newest
    reopened.record("notified", tid(home, "s200", 1200))
    events = reopened.history(1000)
    assert 51 <= len(events) <= 53 and events[0]["session_key"] == "s200"
    assert any(e["event"] == "approved" for e in events)  # the open run's decisions stay
    if os.name != "nt":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_two_processes_recording_at_once_lose_nothing(tmp_path) -> None:
    code = textwrap.dedent("""
        import sys
        from hermes_tray_core.stores.ledger import ledger
        from hermes_tray_core.turn import TurnId
        for i in range(100):
            ledger().record("notified", TurnId(sys.argv[1], sys.argv[2] + str(i), 1000.0, 0))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), name]) for name in ("a", "b", "c")]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    assert len(ledger().history(1000)) == 300


def test_a_corrupt_ledger_is_set_aside_and_a_new_one_starts(tmp_path) -> None:
    path = ledger().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    book = Ledger(path)
    book.record("notified", tid(tmp_path, "s1", 1))
    assert [e["event"] for e in book.history()] == ["notified"]
    assert any(p.name.startswith("ledger.sqlite3.corrupt-") for p in path.parent.iterdir())


# ── migration: the JSON-lines journal of the release before ──────────────────────────────────────────────────


def _old_journal(state: Path, home: Path, shift: float) -> list[dict]:
    """The release-before's journal (tests/support/journal_before_ledger.jsonl), its home and times moved here, and
    each event's ``turn_id`` made again as that release made it (home, session, ``started_at``), so that release
    would read this file as it reads its own."""
    import hashlib

    lines = []
    for raw in BEFORE.read_text().splitlines():
        ev = json.loads(raw)
        for name in ("created_at", "started_at", "until", "original_started_at"):
            if isinstance(ev.get(name), float):
                ev[name] += shift
        if isinstance(ev.get("home"), str):
            ev["home"] = ev["home"].replace("/HERMES_HOME", str(home.resolve()))
        if ev.get("session_key"):
            digest = hashlib.sha256(f"{ev['home']}\0{ev['session_key']}\0{ev['started_at']!r}".encode()).hexdigest()
            ev["turn_id"] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ev["started_at"])) + "-" + digest[:12]
        lines.append(ev)
    path = state / "journal" / "_turn_journal" / "decisions.jsonl"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text("".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in lines))
    return lines


def test_an_old_journal_is_carried_over_whole_and_set_aside(tmp_path, user_dirs) -> None:
    state, home = Path(user_dirs["HERMES_TRAY_STATE_DIR"]), tmp_path / "hermes"
    (home / "profiles" / "work").mkdir(parents=True)
    old = _old_journal(state, home, time.time() - 1_767_268_800.0 - 600)
    T = old[0]["started_at"]
    book = ledger()
    hist = book.history(100)
    assert [(h["event"], h.get("session_key"), h["created_at"]) for h in hist] == \
        [(e["event"], e.get("session_key"), e["created_at"]) for e in reversed(old)]
    root, work = home.resolve(), (home / "profiles" / "work").resolve()
    assert book.status(tid(root, "s-skip", T)).skipped
    assert book.status(tid(root, "s-stop", T + 1)).stopped == "interrupted"
    until = next(e["until"] for e in old if e["event"] == "snoozed")
    assert book.status(tid(work, "s-snooze", T + 2)).snooze == (until, False)
    assert book.status(tid(root, "s-done", T + 3)).finished
    assert book.status(tid(root, "s-legacy", T + 160, 1)).stopped == "gave-up"
    assert book.status(tid(work, "s-asked", T + 5)).asked
    legacy = next(r for r in book.turns() if r["turn"] is not None and r["turn"].key == "s-legacy")
    assert legacy["last"] == tid(root, "s-legacy", T + 160, 1) and len(legacy["events"]) == 7  # one row
    assert not (state / "journal" / "_turn_journal" / "decisions.jsonl").exists()
    kept = list((state / "journal" / "_turn_journal").glob("decisions.jsonl.migrated-*"))  # kept, renamed
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600  # private, whatever its mode was


def test_one_bad_line_in_an_old_journal_costs_that_line_only(tmp_path, user_dirs, monkeypatch) -> None:
    """Issue 41.4: one deeply nested line made ``history`` exit 1, ``status`` print tracebacks, and every skip, stop
    and snooze was forgotten. Carried into the ledger, a nested, a torn, a huge and a garbage line cost themselves."""
    from hermes_tray_core.deciding.ask_once import AskOnce, waiting
    from hermes_tray_core.hermes.homes import discover_homes
    from hermes_tray_core.scanning.scanner import Scanner
    from tests.support.fixture_homes import FixtureHome, env_for, marker_entry

    state, root = Path(user_dirs["HERMES_TRAY_STATE_DIR"]), FixtureHome(tmp_path / "hermes")
    work = FixtureHome(tmp_path / "hermes" / "profiles" / "work")
    old = _old_journal(state, root.path, time.time() - 1_767_268_800.0 - 600)
    T = old[0]["started_at"]
    with (state / "journal" / "_turn_journal" / "decisions.jsonl").open("a") as fh:
        fh.write("[" * 200_000 + "\n")  # deeply nested
        fh.write(json.dumps({"event": "notified", "home": str(root.path), "session_key": "s-big", "started_at": T,
                             "reason": "x" * 5_000_000}) + "\n")  # huge
        fh.write("\x00\xff garbage {\n")
        fh.write('{"event":"skipped","home":"' + str(root.path) + '","session_key":"s-new","started')  # torn
    root.write_markers({  # each marker as Hermes (or a stale Hermes write) left it; every writer is gone
        "s-skip": marker_entry("skipped, and a stale write brought it back", started_at=T),
        "s-stop": marker_entry("stopped for good; Hermes' file could not be changed", started_at=T + 1),
        "s-done": marker_entry("finished, and a stale write brought it back", started_at=T + 3),
        "s-legacy": marker_entry("the tray gave up on it", started_at=T + 160, attempts=1),
        "s-new": marker_entry("never seen before", started_at=T + 20),
    })
    work.write_markers({"s-snooze": marker_entry("remind me later", started_at=T + 2),
                        "s-asked": marker_entry("told already", started_at=T + 5)})
    env = env_for(tmp_path, HERMES_HOME=str(root.path))
    status = subprocess.run([sys.executable, "-m", "hermes_tray", "status", "--json"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    verdicts = {t["session_key"]: t["verdict"] for t in json.loads(status.stdout)["turns"]}
    assert verdicts == {"s-skip": "skipped", "s-stop": "stopped", "s-legacy": "stopped", "s-snooze": "actionable",
                        "s-asked": "actionable", "s-new": "actionable"}  # s-done finished: never listed
    assert set(root.read_markers()) == {"s-new"}  # the settled markers were removed again
    history = subprocess.run([sys.executable, "-m", "hermes_tray", "history", "--json", "--limit", "100"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert history.returncode == 0 and "Traceback" not in history.stderr, history.stderr
    events = json.loads(history.stdout)
    assert [(e["event"], e.get("session_key")) for e in events] == \
        [("notified", "s-big")] + [(e["event"], e.get("session_key")) for e in reversed(old)]
    assert len(events[0]["reason"]) == ledger_module.MAX_STRING
    # what the tray does with the waiting turns: asks about the new one only, holds the snooze
    monkeypatch.setenv("HERMES_HOME", str(root.path))
    records = Scanner(discover_homes()).scan().turns
    review = AskOnce().review(waiting(records), "ask", others=[r for r in records if r.verdict != "actionable"])
    assert [r.session_key for r in review.ask] == ["s-new"]
    assert [k.key for k in review.snoozed] == ["s-snooze"]
    assert AskOnce().review(waiting(records), "auto").resume == [r.turn.id for r in records
                                                                 if r.session_key == "s-new"]
