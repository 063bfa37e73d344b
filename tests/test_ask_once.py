"""Ask at most once per interrupted turn, without Qt: the real ledger (real SQLite), real scanner records.

What the user notices: one question per interruption, also across a restart or when the helper or
the CLI asked first; a skipped turn written back is skipped again without a question; auto mode
never continues a turn someone already answered; a note that reached nobody is asked again.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.deciding.ask_once import AskOnce, record_notified, turn_key, waiting
from hermes_tray_core.keys import home_path
from hermes_tray_core.scanning.scanner import TurnRecord
from hermes_tray_core.stores.ledger import Ledger, ledger
from hermes_tray_core.turn import Marker, Turn

HOME = Path("/home/u/.hermes")


def rec(session_key: str, **fields) -> TurnRecord:
    base = dict(home=HOME, profile="default", title="A title", prompt_excerpt="", age_seconds=60.0, writer="dead",
                verdict="actionable", reason="fresh", source="desktop")
    marker = Marker.known(fields.pop("started_at", 1_700_000_000.0), fields.pop("attempts", 0))
    base.update(fields)
    return TurnRecord(turn=Turn(home_path(base["home"]), session_key, marker), **base)


@pytest.fixture
def journal() -> Ledger:
    return ledger()


def events(book: Ledger, r: TurnRecord) -> list[str]:
    return [e["event"] for e in reversed(book.history(100, session_key=r.session_key))
            if e["started_at"] == r.started_at]


def pending(*records: TurnRecord) -> dict[str, TurnRecord]:
    return waiting(records)


def test_imports_no_qt() -> None:
    import subprocess

    code = "import sys, hermes_tray_core.deciding.ask_once; sys.exit(any(m.startswith('PySide6') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_asks_once_and_once_only_across_a_restart(journal) -> None:
    ask = AskOnce(lambda: journal)
    r = rec("s1")
    first = ask.review(pending(r), "ask")
    assert first.ask == [r]
    assert ask.review(pending(r), "ask").ask == [], "a later scan of the same turn is not a new question"
    assert ask.delivered([r], True) == [r]
    record_notified([r], via="test")
    assert events(journal, r) == ["notified"]
    restarted = AskOnce(lambda: Ledger(journal.path))
    assert restarted.review(pending(r), "ask").ask == [], "the ledger remembers across a restart"


def test_a_turn_whose_marker_flickers_is_asked_once_before_its_note_is_even_journalled(journal) -> None:
    """A writer storm: the marker leaves the list and comes back many times a second, before the note's
    "notified" reaches the ledger. Asked once, whatever its attempt count reads meanwhile."""
    ask = AskOnce(lambda: journal)
    r = rec("s1")
    assert ask.review(pending(r), "ask").ask == [r]
    for _ in range(20):
        assert ask.review(pending(), "ask").gone == {turn_key(HOME, "s1")}
        assert ask.review(pending(r), "ask").ask == [], "the same turn back is not a new question"
        assert ask.review(pending(rec("s1", attempts=1)), "ask").ask == []
    assert events(journal, r) == []
    later = rec("s1", started_at=r.started_at + 60)
    assert ask.review(pending(later), "ask").ask == [later], "a new interruption is still a new question"


def test_a_new_interruption_of_the_same_session_is_a_new_question(journal) -> None:
    ask = AskOnce(lambda: journal)
    a = rec("s1", started_at=1000.0)
    ask.review(pending(a), "ask")
    record_notified(ask.delivered([a], True), via="test")
    b = rec("s1", started_at=2000.0)
    review = ask.review(pending(b), "ask")
    assert review.ask == [b]
    assert review.replaced == {turn_key(HOME, "s1")}, "the note about A must be withdrawn"


def test_skipped_turn_written_back_is_skipped_again_not_asked(journal) -> None:
    ask = AskOnce(lambda: journal)
    r = rec("s1")
    journal.record("skipped", r.turn.ident)  # `hermes-tray skip`
    review = ask.review(pending(r), "ask")
    assert review.ask == [] and review.reskip == [(turn_key(HOME, "s1"), r)]


def test_turn_that_leaves_and_returns_is_looked_at_again(journal) -> None:
    ask = AskOnce(lambda: journal)
    r = rec("s1")
    ask.review(pending(r), "ask")
    gone = ask.review({}, "ask")
    assert gone.gone == {turn_key(HOME, "s1")}
    journal.record("skipped", r.turn.ident)
    assert ask.review(pending(r), "ask").reskip, "back after a skip elsewhere: skipped again"


def test_auto_mode_resumes_only_turns_nobody_answered(journal) -> None:
    ask = AskOnce(lambda: journal)
    done, asked, fresh = rec("done"), rec("asked"), rec("fresh")
    journal.record("completed", done.turn.ident)
    journal.record("notified", asked.turn.ident)
    review = ask.review(pending(done, asked, fresh), "auto")
    assert review.resume == [turn_key(HOME, "fresh")] and review.ask == []


def test_auto_mode_does_nothing_on_an_unreadable_ledger(tmp_path) -> None:
    class Broken:
        def statuses(self, *a):
            raise OSError("I/O error")

    ask = AskOnce(lambda: Broken())
    review = ask.review(pending(rec("s1")), "auto")
    assert review.resume == [], "unsure: never continue a turn on a guess"
    assert AskOnce(lambda: Broken()).review(pending(rec("s1")), "ask").ask, "ask mode still asks"


def test_off_mode_asks_nothing(journal) -> None:
    review = AskOnce(lambda: journal).review(pending(rec("s1")), "off")
    assert review.ask == [] and review.resume == []


def test_only_actionable_desktop_turns_wait() -> None:
    records = [rec("a"), rec("b", verdict="running"), rec("c", source="webui"), rec("d")]
    assert list(waiting(records, running=[turn_key(HOME, "d")])) == [turn_key(HOME, "a")]


def test_a_note_that_reached_nobody_is_asked_again_after_the_delay(journal) -> None:
    clock = [100.0]
    ask = AskOnce(lambda: journal, clock=lambda: clock[0], retry_seconds=30.0)
    r = rec("s1")
    assert ask.review(pending(r), "ask").ask == [r]
    assert ask.delivered([r], False) == []
    assert ask.review(pending(r), "ask").ask == [], "not before the retry delay"
    clock[0] += 31
    assert ask.review(pending(r), "ask").ask == [r]
    assert ask.delivered([r], True) == [r]
    assert ask.delivered([r], True) == [], "recorded once"
    assert events(journal, r) == []  # delivered() only decides; the caller writes


def test_failed_announcement_is_not_counted_as_asked(journal) -> None:
    ask = AskOnce(lambda: journal)
    r = rec("s1")
    ask.review(pending(r), "ask")
    ask.not_announced([r])
    assert ask.review(pending(r), "ask").ask == [r]


def test_a_ledger_that_cannot_be_written_is_logged_not_raised(tmp_path, caplog) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the ledger's directory should be")
    t0 = time.monotonic()
    record_notified([rec("s1")], via="test", ledger=Ledger(blocker / "ledger.sqlite3"))
    assert time.monotonic() - t0 < 5
    assert "could not record 'notified'" in caplog.text


def test_a_later_attempt_of_a_skipped_run_is_not_removed_behind_the_users_back(journal) -> None:
    """One rule for "this turn was skipped" (the ledger's, for that interruption: session + started_at + attempts):
    a skip of attempt 0 does not make the tray silently remove attempt 1 of the same run."""
    ask = AskOnce(lambda: journal)
    r0, r1 = rec("s1", attempts=0), rec("s1", attempts=1)
    journal.record("skipped", r0.turn.ident)
    assert ask.review(pending(r0), "ask").reskip  # the very entry that was skipped: skipped again
    fresh = AskOnce(lambda: journal)
    review = fresh.review(pending(r1), "ask")
    # Not removed behind the user's back; not asked again either (the run was answered): it stays listed.
    assert review.reskip == [] and review.ask == [] and review.resume == []
