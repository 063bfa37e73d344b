"""hermes_tray_core.stores.decisions: the tray's own decision journal (what it asked and did, never prompt text)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hermes_tray_core.stores import decisions
from hermes_tray_core.stores.decisions import DecisionJournal

REPO = Path(__file__).resolve().parents[1]
T0 = 1_767_268_800.25


@pytest.fixture
def dj(tmp_path):
    return DecisionJournal(tmp_path / "journal")


def test_record_and_history_newest_first(dj, tmp_path):
    home = tmp_path / "hermes"
    dj.record("detected", home=home, session_key="s1", started_at=T0, attempts=0, verdict="actionable")
    dj.record("notified", home=home, session_key="s1", started_at=T0)
    dj.record("skipped", home=tmp_path / "other", session_key="s2", started_at=T0 + 1, reason="user chose Skip")
    hist = dj.history()
    assert [h["event"] for h in hist] == ["skipped", "notified", "detected"]
    assert hist[2]["verdict"] == "actionable" and hist[2]["attempts"] == 0
    assert hist[2]["home"] == str(home.resolve()) and hist[2]["session_key"] == "s1" and hist[2]["started_at"] == T0
    assert [h["event"] for h in dj.history(1)] == ["skipped"]
    assert [h["event"] for h in dj.history(home=home)] == ["notified", "detected"]
    assert [h["event"] for h in dj.history(session_key="s2")] == ["skipped"]
    (turn2, turn1) = dj.turns()
    assert turn1["session_key"] == "s1" and turn1["status"] == "notified"
    assert [e["event"] for e in turn1["events"]] == ["detected", "notified"]
    assert turn2["status"] == "skipped"


def test_prompt_text_is_never_stored(dj, tmp_path):
    for bad in ("prompt", "text", "note", "excerpt"):
        with pytest.raises(ValueError):
            dj.record("detected", home=tmp_path, session_key="s1", started_at=T0, **{bad: "rm -rf the secret plan"})
    with pytest.raises(TypeError):
        dj.record("detected", home=tmp_path, session_key="s1", started_at=T0, payload={"prompt": "x"})
    assert not dj.path.exists()
    out = dj.record("failed", home=tmp_path, session_key="s1", started_at=T0, reason="x" * 5000)
    assert len(out["reason"]) == decisions.MAX_STRING


@pytest.mark.parametrize("kwargs,exc", [
    ({"event": "resumed"}, ValueError),
    ({"session_key": "../etc"}, ValueError),
    ({"session_key": ""}, ValueError),
    ({"started_at": "yesterday"}, TypeError),
    ({"turn_id": "forged"}, ValueError),
])
def test_bad_records_write_nothing(dj, tmp_path, kwargs, exc):
    args = {"event": "detected", "home": tmp_path, "session_key": "s1", "started_at": T0, **kwargs}
    with pytest.raises(exc):
        dj.record(args.pop("event"), **args)
    assert not dj.path.exists()


NOTIFY = textwrap.dedent("""
    import sys
    from hermes_tray_core.stores.decisions import DecisionJournal
    DecisionJournal(sys.argv[1]).record("notified", home=sys.argv[2], session_key="s1", started_at=float(sys.argv[3]))
""")


def test_a_restarted_tray_never_asks_twice_about_the_same_turn(tmp_path):
    jdir, home = tmp_path / "journal", tmp_path / "hermes"
    home.mkdir()
    # an earlier tray process notified the user, then died
    subprocess.run([sys.executable, "-c", NOTIFY, str(jdir), str(home), repr(T0)], cwd=REPO, check=True)
    fresh = DecisionJournal(jdir)
    assert fresh.was_asked(home, "s1", T0)
    assert not fresh.has_answered(home, "s1", T0)  # notified but unanswered: stays pending in the menu
    assert fresh.was_asked(str(home) + "/", "s1", T0)  # however the home is spelled
    assert fresh.was_asked(home / ".." / "hermes", "s1", T0)
    # a different interrupted turn of the same session (a later run) is a new question
    assert not fresh.was_asked(home, "s1", T0 + 60)
    assert not fresh.was_asked(home, "s2", T0)
    fresh.record("approved", home=home, session_key="s1", started_at=T0)
    assert DecisionJournal(jdir).has_answered(home, "s1", T0)
    assert fresh.turn_status(home, "s1", T0) == "approved"
    assert fresh.turn_status(home, "s9", T0) is None


def test_integer_and_float_start_times_name_the_same_turn(dj, tmp_path):
    dj.record("skipped", home=tmp_path, session_key="s1", started_at=1_767_268_800)
    assert dj.has_answered(tmp_path, "s1", 1_767_268_800.0)


def test_reads_follow_appends_and_compaction_by_other_writers(tmp_path):
    reader, writer = DecisionJournal(tmp_path / "j"), DecisionJournal(tmp_path / "j", max_bytes=4000)
    assert reader.history() == []
    writer.record("notified", home=tmp_path, session_key="keep", started_at=T0)
    assert reader.was_asked(tmp_path, "keep", T0)
    for i in range(60):  # forces several compactions by the writer
        writer.record("skipped", home=tmp_path, session_key=f"s{i}", started_at=T0 + i)
    assert reader.was_asked(tmp_path, "keep", T0)
    assert reader.history(1)[0]["session_key"] == "s59"
    assert len(reader.history(1000)) == len(DecisionJournal(tmp_path / "j").history(1000)) < 61


def test_size_is_bounded_but_unfinished_turns_are_kept(tmp_path):
    dj = DecisionJournal(tmp_path / "j", max_bytes=20_000)
    home = tmp_path / "hermes"
    dj.record("detected", home=home, session_key="pending", started_at=T0)
    dj.record("approved", home=home, session_key="pending", started_at=T0)
    dj.record("dispatched", home=home, session_key="pending", started_at=T0)
    for i in range(400):
        for ev in ("detected", "notified", "skipped"):
            dj.record(ev, home=home, session_key=f"done{i}", started_at=T0 + i)
    assert dj.path.stat().st_size <= 20_000
    assert dj.events_for(home, "pending", T0) == ["detected", "approved", "dispatched"]
    assert dj.has_answered(home, "done399", T0 + 399)  # recent finished turns survive
    assert not dj.was_asked(home, "done0", T0)  # the oldest finished ones went
    if os.name != "nt":
        assert stat.S_IMODE(dj.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(dj.path.parent.stat().st_mode) == 0o700


def test_module_functions_use_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "state"))
    decisions.record("refused", home=tmp_path, session_key="s1", started_at=T0, reason="Hermes process 7 owns it")
    assert (tmp_path / "state" / "journal" / "_turn_journal" / "decisions.jsonl").is_file()
    assert decisions.history()[0]["event"] == "refused"
    assert decisions.turn_status(tmp_path, "s1", T0) == "refused"
    assert not decisions.has_answered(tmp_path, "s1", T0)  # a refusal is not a decision about the turn
    assert not decisions.was_asked(tmp_path, "s1", T0)


# ── configuration changes ───────────────────────────────────────────────────────────────────────


def test_config_changes_are_first_class_and_interleaved_with_turn_decisions(dj, tmp_path):
    home = tmp_path / "hermes"
    dj.record("detected", home=home, session_key="s1", started_at=T0)
    dj.record_config_change(home=home, key="enabled", old=True, new=False, by="cli")
    dj.record("skipped", home=home, session_key="s1", started_at=T0)
    dj.record_config_change(home=None, key="homes", old=[], new=["/a", "/b"], by="tray")
    hist = dj.history()
    assert [(h["event"], h.get("key")) for h in hist] == [
        ("config-changed", "homes"), ("skipped", None), ("config-changed", "enabled"), ("detected", None)]
    c = hist[2]
    assert (c["home"], c["key"], c["old"], c["new"], c["by"]) == (str(home.resolve()), "enabled", True, False, "cli")
    assert "session_key" not in c and c["created_at"] > 0
    assert hist[0]["home"] is None and hist[0]["new"] == ["/a", "/b"]
    assert [h["event"] for h in dj.history(session_key="s1")] == ["skipped", "detected"]
    assert [h.get("key") for h in dj.history(home=home)] == [None, "enabled", None]
    assert [t["session_key"] for t in dj.turns()] == ["s1"]  # no pseudo-turns for settings
    assert not dj.was_asked(home, "s1", None)
    # each change is its own finished journal turn: compaction may drop it, never a live turn's events
    ids = {h["turn_id"] for h in hist if h["event"] == "config-changed"}
    assert len(ids) == 2


def test_config_change_refusals(dj, tmp_path):
    with pytest.raises(ValueError, match="by must be"):
        dj.record_config_change(home=None, key="mode", old="ask", new="auto", by="someone")
    with pytest.raises(ValueError, match="record_config_change"):
        dj.record("config-changed", home=tmp_path, session_key="s1")
    with pytest.raises(ValueError, match="prompt text"):
        dj.record_config_change(home=None, key="mode", old="ask", new="auto", by="cli", prompt="secret")
    with pytest.raises(TypeError):
        dj.record_config_change(home=None, key="mode", old={"a": 1}, new="auto", by="cli")
    assert not dj.path.exists()
    out = dj.record_config_change(home=None, key="hermes_command", old=None, new=["x" * 5000] * 100, by="cli")
    assert len(out["new"]) == decisions.MAX_LIST and len(out["new"][0]) == decisions.MAX_STRING


def test_config_changes_survive_compaction_only_as_whole_oldest_first(tmp_path):
    dj = DecisionJournal(tmp_path / "j", max_bytes=4000)
    home = tmp_path / "hermes"
    dj.record("detected", home=home, session_key="live", started_at=T0)  # unfinished: never dropped
    for i in range(60):
        dj.record_config_change(home=home, key="freshness_minutes", old=i, new=i + 1, by="tray")
    hist = dj.history(1000)
    kept = [h["new"] for h in hist if h["event"] == "config-changed"]
    assert kept and kept[0] == 60 and kept == sorted(kept, reverse=True) and len(kept) < 60
    assert any(h["event"] == "detected" for h in hist)


def test_threads_reading_one_journal_at_once_see_each_event_once(tmp_path):
    """The tray's detector thread and its GUI thread share one DecisionJournal: reading the same new bytes at
    the same moment must not list an event twice (History rows, ask-once answers)."""
    import threading

    writer = DecisionJournal(tmp_path / "j")
    for i in range(300):
        writer.record("notified", home=str(tmp_path), session_key=f"s{i}", started_at=1000.0 + i)
    for _round in range(10):
        shared = DecisionJournal(tmp_path / "j")  # nothing read yet: every thread finds 300 new events
        start = threading.Barrier(8)
        counts: list[int] = []

        def read(shared=shared, start=start, counts=counts) -> None:
            start.wait()
            counts.append(len(shared.history(10_000)))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert counts == [300] * 8 and len(shared.history(10_000)) == 300


def test_record_many_is_one_write_and_refuses_all_or_nothing(dj, tmp_path):
    """A crash storm is one journal write: every decision in one append (one created_at), each named by its
    turn exactly as :meth:`record` names it; one refused item writes none of them."""
    home = tmp_path / "hermes"
    rows = [{"event": "notified", "home": home, "session_key": f"s{i}", "started_at": T0 + i, "attempts": 0}
            for i in range(50)]
    written = dj.record_many(rows)
    assert len(written) == 50 and len({w["created_at"] for w in written}) == 1
    assert dj.was_asked(home, "s7", T0 + 7) and not dj.was_asked(home, "s7", T0)
    assert written[7]["turn_id"] == decisions.decision_turn_id(home, "s7", T0 + 7)
    size = dj.path.stat().st_size
    with pytest.raises(ValueError):
        dj.record_many([{"event": "notified", "home": home, "session_key": "ok", "started_at": T0},
                        {"event": "notified", "home": home, "session_key": "bad", "started_at": T0, "prompt": "x"}])
    assert dj.path.stat().st_size == size


def test_every_event_of_a_turn_and_its_continuations_belongs_to_its_first_run(dj, tmp_path):
    """Issue 25.1: the journal names a run by its marker's started_at, and each continuation writes a new one.
    Before, History showed a second, phantom row "running" holding only the ``continuing`` event (stamped
    with the continuation's started_at). One rule (turn_roots) folds every run of a turn into the first."""
    home = tmp_path / "hermes"
    # the tray continued it itself (an older Hermes): continuing names the run it continues
    dj.record("notified", home=home, session_key="legacy", started_at=T0, attempts=0)
    dj.record("approved", home=home, session_key="legacy", started_at=T0, attempts=0)
    dj.record("continuing", home=home, session_key="legacy", started_at=T0 + 30, attempt=1,
              original_started_at=T0)
    dj.record("dispatched", home=home, session_key="legacy", started_at=T0, attempt=1)
    # …that continuation died too (its marker: attempts 1), was asked about and continued again
    dj.record("notified", home=home, session_key="legacy", started_at=T0 + 30, attempts=1)
    dj.record("continuing", home=home, session_key="legacy", started_at=T0 + 90, attempt=2,
              original_started_at=T0 + 30)
    dj.record("completed", home=home, session_key="legacy", started_at=T0 + 30, attempt=2)
    # a Hermes that continues turns itself: no continuing event; its marker of attempt 1 was written as the
    # continuation started, about when the tray journalled the dispatch
    now = time.time()
    dj.record("approved", home=home, session_key="g2", started_at=now - 60, attempts=0)
    dj.record("dispatched", home=home, session_key="g2", started_at=now - 60, attempt=1)
    dj.record("notified", home=home, session_key="g2", started_at=now - 0.5, attempts=1)
    # a new interruption of the same session later (attempts 0 again) is a turn of its own
    dj.record("notified", home=home, session_key="g2", started_at=now + 900, attempts=0)
    events = list(reversed(dj.history(100)))
    roots = decisions.turn_roots(events)
    first = decisions.decision_turn_id(home, "legacy", T0)
    assert {roots[e["turn_id"]] for e in events if e["session_key"] == "legacy"} == {first}
    g2_first, g2_later = (decisions.decision_turn_id(home, "g2", t) for t in (now - 60, now + 900))
    assert [roots[e["turn_id"]] for e in events if e["session_key"] == "g2"] == [g2_first] * 3 + [g2_later]
    turns = dj.turns()
    assert sorted(len(t["events"]) for t in turns) == [1, 3, 7]
