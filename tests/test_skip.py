"""Skip vs resume: exactly one wins. core.continuing.skip (the claim), core.markers.store' compare-and-swap and the legacy
continuation path that takes the marker over before it submits — real processes, real files, real SQLite."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes_tray.demo.sim_backend import write_control
from hermes_tray_core.continuing import gateway
from hermes_tray_core.continuing import skip as core_skip
from hermes_tray_core.continuing.claim import claim_name
from hermes_tray_core.continuing.resume import resume_turn
from hermes_tray_core.markers.entries import build_entry
from hermes_tray_core.markers.store import MarkerStore, list_turn_markers, remove_marker_if_unchanged
from hermes_tray_core.stores.lease import LeaseStore
from hermes_tray_core.stores.paths import ledger_db as lease_db
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import SkipOutcome
from tests.support import book
from tests.support.sim_homes import dead_identity, make_home, plant_marker, read_turns, turn_of

PROMPT = "Rename the config loader and keep the old name as an alias."
FAST = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3)




def continuations(home: Path, key: str) -> int:
    return sum(1 for t in read_turns(home) if t.get("kind") in ("note", "auto-continue")
               and (t.get("session") or t.get("key") or t.get("session_key")) == key)


def wait_for(pred, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


# ── markers: compare-and-swap ────────────────────────────────────────────────────────────────────


def test_replace_if_unchanged_swaps_only_the_entry_that_was_seen(tmp_path):
    home = tmp_path / "home"
    shown = plant_marker(home, "s1", PROMPT)
    plant_marker(home, "s2", "another turn")
    ours = build_entry(PROMPT, attempts=1, writer=dead_identity())
    store = MarkerStore(home)
    assert store.replace_if_unchanged("s1", shown, ours) is True
    assert list_turn_markers(home)["s1"] == ours
    assert list(list_turn_markers(home)) == ["s1", "s2"]  # the key keeps its place, the other entry survives
    # the old entry is gone: a second swap (or a skip) against it changes nothing
    assert store.replace_if_unchanged("s1", shown, build_entry(PROMPT, attempts=5)) is False
    assert remove_marker_if_unchanged(home, "s1", shown) is False
    assert list_turn_markers(home)["s1"] == ours
    # a vanished entry is never recreated
    assert remove_marker_if_unchanged(home, "s1", ours) is True
    assert store.replace_if_unchanged("s1", ours, shown) is False
    assert "s1" not in list_turn_markers(home)


# ── core.continuing.skip: the claim ─────────────────────────────────────────────────────────────────────────

HOLD_CLAIM = """
import sys, time
from hermes_tray_core.stores.lease import LeaseStore
from hermes_tray_core.continuing.claim import claim_name
store = LeaseStore(sys.argv[1])
lease = store.acquire(claim_name(sys.argv[2], sys.argv[3]), "pid=child:via=test", ttl=60)
print("held" if lease else "missed", flush=True)
time.sleep(60)
"""


def test_skip_loses_to_a_resume_claim_held_by_another_process_and_wins_once_it_is_gone(tmp_path):
    home = tmp_path / "home"
    shown = plant_marker(home, "s1", PROMPT)
    child = subprocess.Popen([sys.executable, "-c", HOLD_CLAIM, str(lease_db()), str(home), "s1"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        res = core_skip.skip_turn(Turn.of(home, "s1", shown), via="test")
        assert res.outcome == SkipOutcome.RESUMING and not res.ok
        assert "being resumed right now" in res.message
        assert list_turn_markers(home)["s1"] == shown, "a losing skip must not touch the marker"
    finally:
        child.kill()
        child.wait()
    # its holder is dead: the claim is free at once, and the skip wins (and leaves the claim free)
    res = core_skip.skip_turn(Turn.of(home, "s1", shown), via="test")
    assert res.ok, res.message
    assert "s1" not in list_turn_markers(home)
    assert LeaseStore(lease_db()).current(claim_name(home, "s1")) is None


def test_skip_of_a_changed_turn_is_refused_and_changes_nothing(tmp_path):
    home = tmp_path / "home"
    shown = plant_marker(home, "s1", PROMPT)
    newer = plant_marker(home, "s1", PROMPT, attempts=1)
    res = core_skip.skip_turn(Turn.of(home, "s1", shown))
    assert res.outcome == SkipOutcome.CHANGED
    assert list_turn_markers(home)["s1"] == newer


@pytest.mark.parametrize("cap", ["legacy", "auto-continue"])
def test_skip_inside_the_resume_window_loses_and_the_continuation_runs(sims, tmp_path, cap):
    """The skip lands while Hermes answers session.resume: the resume holds the claim, so the skip reports
    that it lost, touches nothing, and the continuation runs exactly once."""
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    shown = plant_marker(home, key, PROMPT)
    write_control(home, resume_delay=0.8)
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "r", resume_turn(Turn.of(home, key, shown), install=sims[cap], options=FAST, via="test")))
    t.start()
    try:
        assert wait_for(lambda: "approved" in [e["event"] for e in book.history(50, session_key=key)])
        res = core_skip.skip_turn(Turn.of(home, key, shown), via="test")
    finally:
        t.join(60)
    assert res.outcome == SkipOutcome.RESUMING, res.message
    assert out["r"].ok, out["r"].message
    assert continuations(home, key) == 1


# ── the legacy path: take the marker over before submitting ─────────────────────────────────────


def test_legacy_continuation_submits_nothing_when_the_marker_was_skipped_meanwhile(sims, tmp_path):
    """A skip that does not take the claim (an older hermes-tray, a hand edit) lands while Hermes is
    starting: the tray's compare-and-swap before prompt.submit fails, so no note is submitted and the
    resume reports that it lost — the skip's success stays true."""
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    shown = plant_marker(home, key, PROMPT)
    write_control(home, resume_delay=0.8)
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "r", resume_turn(Turn.of(home, key, shown), install=sims["legacy"], options=FAST, via="test")))
    t.start()
    try:
        assert wait_for(lambda: "approved" in [e["event"] for e in book.history(50, session_key=key)])
        time.sleep(0.1)
        skipped = remove_marker_if_unchanged(home, key, shown)  # no claim taken
    finally:
        t.join(60)
    res = out["r"]
    assert skipped is True
    assert res.outcome == "refused" and not res.ok and res.exit_code == 1, res.message
    assert "skipped or changed" in res.message
    assert res.continuation is not None and res.continuation.marker_changed and not res.continuation.dispatched
    assert continuations(home, key) == 0
    assert not [t for t in read_turns(home) if t.get("kind") == "note"]
    assert key not in list_turn_markers(home), "the skipped marker must not come back"
    events = [e["event"] for e in reversed(book.history(50, session_key=key))]
    assert events[-1] == "refused" and "dispatched" not in events


def test_legacy_continuation_marker_is_in_place_before_the_note_is_submitted(sims, tmp_path):
    """The swap happens before prompt.submit: when the backend starts the turn, the marker already names
    the gateway child with attempts + 1 and the ORIGINAL prompt (the simulated backend records what it
    saw at submit time)."""
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    shown = plant_marker(home, key, PROMPT)
    seen: dict = {}

    def at_dispatch(res: gateway.ContinuationResult) -> None:
        seen["entry"] = list_turn_markers(home).get(key)

    res = gateway.continue_turn(turn_of(home, key, PROMPT, expected=shown), sims["legacy"], options=FAST,
                                listener=gateway.Callbacks(on_dispatched=at_dispatch))
    assert res.outcome == "completed", res.message
    entry = seen["entry"]
    assert entry is not None and entry["attempts"] == 1 and entry["prompt"] == PROMPT
    assert entry["writer_pid"] == res.gateway_pid
    assert "marker" in res.timings
    assert key not in list_turn_markers(home)


def test_a_resume_that_meets_a_skip_in_progress_says_so(sims, tmp_path):
    home, key = make_home(tmp_path / "home")
    shown = plant_marker(home, key, PROMPT)
    store = LeaseStore(lease_db())
    held = store.acquire(claim_name(home, key), "pid=1:via=skip-cli", ttl=30)  # what skip_turn takes
    assert held is not None
    try:
        res = resume_turn(Turn.of(home, key, shown), install=sims["legacy"], options=FAST, via="test")
    finally:
        store.release(held)
    assert res.outcome == "refused" and "being skipped right now" in res.message
    assert continuations(home, key) == 0 and list_turn_markers(home)[key] == shown


# ── the skip is recorded inside its claim; a resume refuses a skipped turn ──────────────────────


def test_skip_records_skipped_while_it_still_holds_the_claim(tmp_path, monkeypatch):
    from hermes_tray_core.stores.ledger import Ledger, ledger

    home = tmp_path / "home"
    shown = plant_marker(home, "s1", PROMPT)
    seen: list = []
    record = Ledger.record

    def watching(self, event, turn, **fields):
        cur = LeaseStore(lease_db()).current(claim_name(home, turn.key))
        seen.append((event, cur.holder if cur is not None else None))
        return record(self, event, turn, **fields)

    monkeypatch.setattr(Ledger, "record", watching)
    res = core_skip.skip_turn(Turn.of(home, "s1", shown), via="test")
    assert res.ok and res.journal_error is None
    assert seen and seen[0][0] == "skipped" and ":via=skip-test" in seen[0][1]  # recorded before the release
    assert ledger().status(Turn.of(home, "s1", shown).ident).skipped
    assert LeaseStore(lease_db()).current(claim_name(home, "s1")) is None

    # A ledger failure is reported, never undoes the skip; a losing skip records nothing.
    def failing(self, event, turn, **fields):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Ledger, "record", failing)
    again = plant_marker(home, "s2", PROMPT)
    res = core_skip.skip_turn(Turn.of(home, "s2", again), via="test")
    assert res.ok and "No space left" in (res.journal_error or "") and "s2" not in list_turn_markers(home)
    monkeypatch.setattr(Ledger, "record", watching)
    seen.clear()
    moved = plant_marker(home, "s3", PROMPT)
    plant_marker(home, "s3", PROMPT, attempts=1)
    res = core_skip.skip_turn(Turn.of(home, "s3", moved), via="test")
    assert res.outcome == SkipOutcome.CHANGED and seen == []


def test_a_skipped_turn_whose_marker_comes_back_is_not_resumed(sims, tmp_path):
    from hermes_tray_core.markers.file import marker_path

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, PROMPT)
    before = marker_path(home).read_bytes()
    p = subprocess.run([sys.executable, "-m", "hermes_tray", "skip", key, "--home", str(home)],
                       capture_output=True, text=True, timeout=60)  # tray dirs: tests/conftest.py user_dirs (environment)
    assert p.returncode == 0, p.stderr
    assert key not in list_turn_markers(home)
    assert book.events(home, key, entry["started_at"])[-1] == "skipped"
    marker_path(home).write_bytes(before)  # a stale writer puts the very same entry back
    assert list_turn_markers(home)[key] == entry
    res = resume_turn(Turn.of(home, key, entry), install=sims["legacy"], options=FAST)
    assert res.outcome == "refused" and "was skipped" in res.message, res.message
    assert continuations(home, key) == 0
