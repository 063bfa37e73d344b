"""core.continuing.claim: one claim for resume and skip, and skip tombstones keyed by the turn's identity."""

from __future__ import annotations

from hermes_tray_core.continuing import claim as exactly_once
from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.ledger import ledger
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Refusal
from tests.support import book
from tests.support.sim_homes import make_home, plant_marker


def test_one_claim_per_turn_and_the_holder_says_who(tmp_path):
    home, _key = make_home(tmp_path / "home")
    skip = exactly_once.claim(Turn.of(home, "s1", None), purpose="skip", via="cli", ttl=30)
    assert isinstance(skip, exactly_once.Claim)
    again = exactly_once.claim(Turn.of(home, "s1", None), purpose="resume", via="tray-user", ttl=30)
    assert isinstance(again, exactly_once.ClaimRefused) and again.code == Refusal.BEING_SKIPPED
    other = exactly_once.claim(Turn.of(home, "s2", None), purpose="resume", via="cli", ttl=30)  # another turn: free
    assert isinstance(other, exactly_once.Claim)
    exactly_once.release(skip)
    resume = exactly_once.claim(Turn.of(str(home) + "/.", "s1", None), purpose="resume", via="cli", ttl=30)  # same home spelled otherwise
    assert isinstance(resume, exactly_once.Claim) and resume.epoch > skip.epoch  # fencing: strictly newer
    busy = exactly_once.claim(Turn.of(home, "s1", None), purpose="skip", via="cli", ttl=30)
    assert isinstance(busy, exactly_once.ClaimRefused) and busy.code == Refusal.CLAIMED_ELSEWHERE
    for held in (resume, other):
        exactly_once.release(held)


def tombstoned(turn: Turn) -> bool:
    return ledger().status(turn.ident).skipped


def test_a_skip_tombstones_exactly_that_turn(tmp_path):
    home, _key = make_home(tmp_path / "home")
    shown = plant_marker(home, "s1", "a prompt", attempts=1)
    book.record("skipped", home=home, session_key="s1", started_at=shown["started_at"], attempts=1)
    assert tombstoned(Turn.of(home, "s1", shown))
    assert not tombstoned(Turn.of(home, "s1", {**shown, "attempts": 2}))  # another attempt: a new turn
    assert not tombstoned(Turn.of(home, "s1", {**shown, "started_at": shown["started_at"] + 1}))
    assert not tombstoned(Turn.of(home, "s2", shown))


def test_a_scan_removes_only_the_exact_entry_that_came_back(tmp_path):
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.scanning.scanner import Scanner

    home, _key = make_home(tmp_path / "home")
    back = plant_marker(home, "s1", "skipped earlier", attempts=0)
    newer = plant_marker(home, "s2", "skipped at attempt 0, now attempt 1", attempts=1)
    plant_marker(home, "s3", "never skipped")
    book.record("skipped", home=home, session_key="s1", started_at=back["started_at"], attempts=0)
    book.record("skipped", home=home, session_key="s2", started_at=newer["started_at"], attempts=0)
    Scanner([Home(home, "default", "test")], read_progress=False).scan()
    assert sorted(list_turn_markers(home)) == ["s2", "s3"]


def test_status_shows_a_tombstoned_turn_as_skipped_removes_it_and_resume_refuses_it(tmp_path):
    from hermes_tray_core.continuing.resume import resume_turn
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.scanning.scanner import Scanner

    home, key = make_home(tmp_path / "home")
    entry = plant_marker(home, key, "skipped, then brought back by a stale Hermes write", attempts=0)
    book.record("skipped", home=home, session_key=key, started_at=entry["started_at"], attempts=0)
    res = resume_turn(Turn.of(home, key, entry))  # before any scan: the ledger settles it, and resume removes it again
    assert res.outcome == "refused" and res.verdict == "settled", res.message
    assert key not in list_turn_markers(home) and "removed again" in res.message
    import json
    import time

    time.sleep(0.5)  # past the removal's settle window (which would take the entry out again by itself)
    (home / "desktop" / "interrupted_turns.json").write_text(json.dumps({key: entry}))  # a stale write, again
    assert list_turn_markers(home)[key] == entry
    result = Scanner([Home(home, "default", "test")]).scan()
    (turn,) = [t for t in result.turns if t.session_key == key]
    assert turn.verdict == "skipped" and turn.code == "tombstoned" and not result.actionable
    assert key not in list_turn_markers(home)  # removed again by the scan
    # a new run of the same session (a new started_at) is a new turn: not tombstoned
    again = plant_marker(home, key, "the user typed again; this run crashed too", attempts=0)
    (turn,) = [t for t in Scanner([Home(home, "default", "test")]).scan().turns if t.session_key == key]
    assert turn.verdict != "skipped" and list_turn_markers(home)[key] == again


def test_a_tombstone_counts_attempts_as_hermes_does(tmp_path):
    """The CLI and the tray record the scanner's attempts (Hermes' max(0, int(...))): a raw -3 is 0."""
    home, _key = make_home(tmp_path / "home")
    shown = plant_marker(home, "s1", "a prompt")
    raw = {**shown, "attempts": -3}
    book.record("skipped", home=home, session_key="s1", started_at=shown["started_at"], attempts=0)
    assert tombstoned(Turn.of(home, "s1", raw))
    assert tombstoned(Turn.of(home, "s1", {**shown, "attempts": "0"}))
    assert not tombstoned(Turn.of(home, "s1", {**shown, "attempts": 1}))


def test_a_junk_started_at_turn_skipped_from_the_tray_stays_skipped(tmp_path):
    """A NaN ``started_at`` is continued by Hermes' own code, so the tray offers it (issue 24, point 7); a skip
    recorded under the scanner's record (what the tray and the CLI record) tombstones that very entry, and
    a resume of it refuses."""
    import json

    from hermes_tray_core.continuing.resume import resume_turn
    from hermes_tray_core.hermes.homes import Home
    from hermes_tray_core.markers.file import marker_path
    from hermes_tray_core.scanning.scanner import Scanner

    home, key = make_home(tmp_path / "home")
    entry = {**plant_marker(home, key, "a prompt"), "started_at": float("nan")}
    marker_path(home).write_text(json.dumps({key: entry}))
    (turn,) = [t for t in Scanner([Home(home, "default", "test")]).scan().turns if t.session_key == key]
    assert turn.verdict == "actionable"
    book.record("skipped", home=home, session_key=key, started_at=turn.started_at, attempts=turn.attempts)
    back = list_turn_markers(home)[key]  # as a stale Hermes write would bring it back
    assert tombstoned(Turn.of(home, key, back))
    assert Turn.of(home, key, back).started_at == turn.started_at
    res = resume_turn(Turn.of(home, key, back))
    assert res.outcome == "refused" and res.verdict == "settled", res.message
