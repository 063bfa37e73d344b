"""The tray's turn model without Qt: what a user is asked, told and shown, driven by scans and outcomes alone.

The real ledger (the test's private state dir), real scanner records, real ask-once; notes go to a list.
No event loop: the model returns what the controller would do, and what the views would render.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray import words
from hermes_tray.contract import Outcome, RunResult, ScanReport, SkipReply
from hermes_tray.model import turns as turns_module
from hermes_tray.model.notes import After
from hermes_tray.model.turns import Phase, TurnModel
from hermes_tray.notify.note import Note
from hermes_tray_core import AskOnce, Marker, Progress, TraySettings, Turn, TurnRecord, home_path
from hermes_tray_core.deciding.ask_once import record_notified
from hermes_tray_core.stores.ledger import ledger
from tests.support import book

HOME = Path("/home/u/.hermes")
STARTED = time.time() - 300  # one interruption per session: the same start in every scan


class Sink:
    """What the user sees of the notes: each shown version, and which were withdrawn."""

    def __init__(self) -> None:
        self.shown: list[Note] = []
        self.closed: list[str] = []
        self.prepared = 0

    def show(self, note: Note) -> None:
        self.shown.append(note)

    def close(self, key: str) -> None:
        self.closed.append(key)

    def prepare(self) -> None:
        self.prepared += 1

    def on_screen(self) -> dict[str, Note]:
        out = {n.key: n for n in self.shown}
        for k in self.closed:
            out.pop(k, None)
        return out


def rec(session_key: str, **fields) -> TurnRecord:
    base = dict(home=HOME, profile="default", title=f"Turn {session_key}",
                prompt_excerpt="make test_upload stop timing out on CI", age_seconds=300.0, writer="dead",
                verdict="actionable", reason="its writer is gone and the turn is fresh", source="desktop")
    started_at, attempts = fields.pop("started_at", STARTED), fields.pop("attempts", 0)
    marker = Marker.read(fields.pop("entry", None))._replace(started=started_at, attempts=attempts)
    base.update(fields)
    return TurnRecord(turn=Turn(home_path(base["home"]), session_key, marker), **base)


def model(*, quiet: bool = False, can_show: bool = True, **settings) -> tuple[TurnModel, Sink]:
    sink = Sink()
    return TurnModel(sink, AskOnce(ledger), TraySettings(**settings), quiet=lambda: quiet,
                     can_show=can_show), sink


def scan(m: TurnModel, *records: TurnRecord):
    return m.scan(ScanReport(records=tuple(records), finished=time.time()))


def journalled(event: str) -> list[str]:
    return [e["session_key"] for e in book.history(1000) if e["event"] == event]


def test_the_turn_model_imports_no_qt() -> None:
    code = ("import sys, hermes_tray.model.turns, hermes_tray.model.page, hermes_tray.model.settings, "
            "hermes_tray.model.history; sys.exit(any(m.startswith(('PySide6', 'shiboken6')) for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_one_turn_is_asked_once_and_counts_as_asked_only_once_delivered() -> None:
    m, sink = model()
    r = rec("s1")
    scan(m, r)
    scan(m, r)  # seen again: not asked again
    (note,) = sink.shown
    assert [a.label for a in note.actions] == ["Show", "Resume", "Skip", "Remind me in 1 hour", "Disable auto-continue"]
    assert note.kind == "waiting" and m.view().pending[0].session_key == "s1"
    assert journalled("notified") == []  # shown is not asked: delivered is
    record_notified(m.delivered(note, True), via="test")
    assert journalled("notified") == ["s1"]
    restarted, again = model()
    scan(restarted, r)
    assert again.shown == [], "the ledger remembers across a restart"


def test_a_storm_is_one_note_updated_in_place_naming_each_turn() -> None:
    m, sink = model()
    scan(m, rec("s1"))
    scan(m, rec("s1"), rec("s2"), rec("s3"))
    assert len({n.key for n in sink.shown}) == 1
    last = sink.shown[-1]
    assert last.title == "3 Hermes turns interrupted" and last.body == "Turn s1, Turn s2, Turn s3"
    assert [a.label for a in last.actions] == ["Resume all", "Skip all", "Open"]


def test_a_storm_note_shown_again_journals_only_the_turns_new_to_it() -> None:
    """A storm note grows in place; each version that reaches the user journals as asked only the turns no
    earlier version showed, even one whose marker flickered away and back meanwhile (before: journalled again)."""
    m, sink = model()
    scan(m, rec("s1"))
    assert [t.session_key for t in m.delivered(sink.shown[-1], True)] == ["s1"]
    scan(m)  # s1's marker flickers (a storm of writers rewriting the file)
    scan(m, rec("s1"), rec("s2"))
    grown = sink.shown[-1]
    assert grown.key == sink.shown[0].key and [t.session_key for t in grown.subjects] == ["s1", "s2"]
    assert [t.session_key for t in m.delivered(grown, True)] == ["s2"]
    assert m.delivered(grown, True) == []  # the same version again: nothing new


def test_any_press_ends_a_note_a_later_turn_gets_a_note_of_its_own() -> None:
    """However the user answers a note — a button, or a click that opens the window — it is gone (the notifier
    closes it on every server): a turn found right after never brings it back, nor the turns it showed."""
    m, sink = model()
    scan(m, rec("s1"), rec("s2"))
    first = sink.shown[-1].key
    assert m.pressed(first, "default").present
    scan(m, rec("s1"), rec("s2"), rec("s3"))
    later = sink.shown[-1]
    assert later.key != first and [t.session_key for t in later.subjects] == ["s3"]
    assert all(n.key != first for n in sink.shown[2:])


def test_auto_mode_resumes_without_asking_and_list_mode_only_lists() -> None:
    auto, sink = model(mode="auto")
    after = scan(auto, rec("s1"))
    assert after.resume == [auto.view().pending[0].key] and sink.shown == []
    listing, sink = model(mode="list")
    after = scan(listing, rec("s1"))
    assert after.resume == [] and sink.shown == [] and len(listing.view().pending) == 1


def test_a_skipped_turn_that_comes_back_is_skipped_again_without_a_question() -> None:
    m, sink = model()
    r = rec("s1")
    book.record("skipped", home=r.home, session_key=r.session_key, started_at=r.started_at)
    after = scan(m, r)
    assert [k for k, _r in after.reskip] == [next(iter(m.records))]
    assert sink.shown == [] and m.view().pending == ()  # being skipped: not listed as waiting
    assert m.skipped(after.reskip[0][0], r, SkipReply(True), again=True) == ""


def test_a_failed_continuation_is_said_once_after_the_next_scan_gave_up_or_failed_again() -> None:
    for verdict, title in (("exhausted", "Hermes gave up on a turn"), ("actionable", "Interrupted again: Turn s1")):
        m, sink = model()
        scan(m, rec("s1", attempts=1))
        key = next(iter(m.records))
        run = m.begin_resume(key, origin="menu")
        assert run is not None and m.view().running[0].title == "Turn s1" and m.view().pending == ()
        failed = RunResult(Outcome.CRASHED, "the Hermes backend died", ran_in="separate-process")
        assert m.finished(key, failed) is After.LATER
        before = len(sink.shown)
        again = rec("s1", attempts=2, verdict=verdict, started_at=STARTED + 60)  # the continuation's own run
        scan(m, again)
        scan(m, again)
        said = sink.shown[before:]
        assert [n.title for n in said] == [title], verdict
        if verdict == "actionable":  # the ask itself, saying why: act on it there
            assert "Hermes exited before it finished." in said[0].body
            assert [a.label for a in said[0].actions][1:3] == ["Resume", "Skip"]
        else:
            assert "Gave up after 2 tries" in said[0].body and said[0].kind == "gave-up"


def test_your_stop_is_said_and_listed_and_a_stop_hermes_could_not_record_says_so() -> None:
    m, sink = model()
    scan(m, rec("s1"))
    key = next(iter(m.records))
    m.begin_resume(key, origin="window")
    assert m.stop(key) and m.view().running[0].status == "stopping…"
    m.progress(key, Progress("running", 1.0, "message.delta", 4))
    assert m.view().running[0].status == "stopping…", "a stopping run never says it is working again"
    assert m.finished(key, RunResult(Outcome.INTERRUPTED, "stopped", marker_left="read-only file system")) \
        is After.NOTE
    note = sink.shown[-1]
    assert note.title == "Turn stopped" and "Hermes' file could not be changed: read-only file system" in note.body
    (recent,) = m.view().recent
    assert recent.what == "Stopped" and "Skip clears it" in recent.can_do


def test_a_running_continuation_says_what_it_is_doing() -> None:
    m, _sink = model()
    scan(m, rec("s1"))
    key = next(iter(m.records))
    m.begin_resume(key, origin="menu")
    assert m.progress(key, Progress("waiting-for-backend", 0.1))
    assert m.view().running[0].status == "waiting for your Hermes to start…"
    m.progress(key, Progress("running", 2.0, "tool.start", 3))
    assert m.view().running[0].status == "using tools · 3 updates"
    assert m.view().icon_state == "busy"
    assert not m.progress("no such turn", Progress("running", 1.0))


def test_a_finished_turn_is_one_quiet_receipt_whose_click_shows_the_answer() -> None:
    m, sink = model()
    scan(m, rec("s1"))
    key = next(iter(m.records))
    m.begin_resume(key, origin="menu")
    m.finished(key, RunResult(Outcome.COMPLETED, "done", answer="All tests pass now.\nMore detail"))
    note = sink.shown[-1]
    assert note.title == "Hermes turn finished" and note.urgency == "low"
    assert "All tests pass now." in note.body and "More detail" not in note.body
    pressed = m.pressed(note.key, "default")
    assert pressed.present and pressed.answer == ("Turn s1", "All tests pass now.\nMore detail")


def test_a_press_on_a_note_acts_only_on_the_turns_it_showed_while_they_are_still_those() -> None:
    m, sink = model()
    a, b = rec("s1", started_at=1000.0), rec("s2", started_at=1000.0)
    scan(m, a, b)
    note_key = sink.shown[-1].key
    m.records[next(iter(m.records))] = rec("s1", started_at=2000.0)  # s1 was interrupted again meanwhile
    pressed = m.pressed(note_key, "skip-all")
    assert [r.session_key for _k, r in pressed.skip] == ["s2"] and pressed.resume == []
    assert "changed since the notification. Nothing was done." in pressed.message
    assert m.pressed(note_key, "resume-all").message == "That notification is out of date. Nothing was done."


def test_a_turn_settled_elsewhere_keeps_its_note_while_it_may_flicker_then_loses_it(monkeypatch) -> None:
    monkeypatch.setattr(turns_module, "VANISHED_GRACE", 0.2)
    m, sink = model()
    scan(m, rec("s1"))
    note_key = sink.shown[-1].key
    after = scan(m)  # gone: settled by the command line, or a flicker
    assert note_key in sink.on_screen() and after.recheck_in is not None and after.recheck_in <= 0.2
    time.sleep(0.25)
    assert m.withdraw_vanished() is None
    assert note_key not in sink.on_screen()


def test_a_skip_leaves_the_list_at_once_and_a_refused_one_comes_back_saying_why() -> None:
    m, _sink = model()
    r = rec("s1")
    scan(m, r)
    key = next(iter(m.records))
    assert m.begin_skip(key) == r and m.phase(key) is Phase.SKIPPING and m.view().pending == ()
    assert m.begin_resume(key, origin="menu") is None, "never a resume over a skip on its way"
    said = m.skipped(key, r, SkipReply(False, "The turn changed since it was shown; it was left in place."))
    assert said == "The turn changed since it was shown; it was left in place."
    assert m.phase(key) is Phase.WAITING and len(m.view().pending) == 1
    m.begin_skip(key)
    assert m.skipped(key, r, SkipReply(True)) == ""
    assert [(x.title, x.what) for x in m.view().recent] == [("Turn s1", "Skipped")]


def test_the_helper_stays_silent_about_what_the_tray_says_and_offers_no_window() -> None:
    helper, sink = model(quiet=True, can_show=False)
    scan(helper, rec("s1"))
    assert sink.shown == []  # the tray asks
    key = next(iter(helper.records))
    helper.begin_resume(key, origin="auto")
    helper.finished(key, RunResult(Outcome.COMPLETED, "done"))
    assert sink.shown == []
    talking, sink = model(can_show=False)
    scan(talking, rec("s1"), rec("s2"))
    assert {a.label for n in sink.shown for a in n.actions} == {"Resume all", "Skip all"}


def test_notes_off_still_lists_and_prompts_hidden_stay_hidden() -> None:
    quiet, sink = model(notify=False)
    scan(quiet, rec("s1"))
    assert sink.shown == [] and len(quiet.view().pending) == 1
    hidden, sink = model(show_prompts=False)
    scan(hidden, rec("s1", title=None))
    note = sink.shown[0]
    assert "timing out" not in note.title + note.body and note.title.startswith("Interrupted: Turn started ")
    assert hidden.view().pending[0].excerpt == ""


@pytest.mark.parametrize("outcome", [Outcome.REFUSED, Outcome.DETACHED])
def test_routine_ends_say_nothing(outcome) -> None:
    m, sink = model()
    scan(m, rec("s1"))
    key = next(iter(m.records))
    m.begin_resume(key, origin="auto")
    out = RunResult(outcome, "claimed", code="claimed-elsewhere" if outcome is Outcome.REFUSED else "")
    before = len(sink.shown)
    assert m.finished(key, out) is After.NOTHING and len(sink.shown) == before


def test_only_a_waiting_turn_can_be_snoozed_and_a_snooze_that_was_not_saved_says_so() -> None:
    m, sink = model()
    scan(m, rec("s1"), rec("s2", verdict="stale"))
    waiting_key, stale_key = list(m.records)
    assert m.begin_snooze(stale_key) is None
    r = m.begin_snooze(waiting_key)
    assert r is not None and m.snoozed(waiting_key, r, time.time() + 3600, "disk full") == \
        "The reminder could not be saved. Nothing changed."
    assert m.view().pending[0].reminder is None and m.next_reminder() is None
    assert m.snoozed(waiting_key, r, time.time() + 3600, None) == ""
    assert m.view().pending[0].reminder is not None and m.next_reminder() is not None


def test_the_page_of_a_turn_no_longer_listed_says_only_what_the_ledger_recorded() -> None:
    from hermes_tray.model.page import page_for

    m, _sink = model()
    r = rec("gone")
    book.record("notified", home=r.home, session_key=r.session_key, started_at=r.started_at, via="log")
    book.record("skipped", home=r.home, session_key=r.session_key, started_at=r.started_at, via="tray-cli")
    scan(m)  # not listed: its marker is gone
    page = page_for(m.view(), ledger().turns(100), ident=book.ident(HOME, "gone", r.started_at, 0), title="Old one")
    assert page is not None and page.key is None and page.actions == () and page.facts == ()
    assert page.title == "Old one" and page.state == "Last recorded: Skipped. The tray does not list it now."
    assert [(d.what, d.detail) for d in page.decisions] == [("You were told", "in the log only: no notification "
                                                             "server"), ("Skipped", "from the command line")]
    assert page_for(m.view(), [], ident=book.ident(HOME, "never", r.started_at, 0)) is None


def test_a_history_row_finds_its_waiting_turn_whichever_spelling_of_the_home_found_it(tmp_path) -> None:
    """The ledger names a home canonically; the scan may have found it through a symlink. The History row's page
    is still the waiting turn's own, with Resume (a row names its turn by the engine's TurnKey, made where it
    enters, not by comparing path text)."""
    from hermes_tray.contract import key_of
    from hermes_tray.model.page import page_for

    real = tmp_path / "real-home"
    real.mkdir()
    link = tmp_path / "link-home"
    link.symlink_to(real, target_is_directory=True)
    m, _sink = model()
    r = rec("s1", home=link)
    scan(m, r)
    page = page_for(m.view(), [], ident=book.ident(real.resolve(), "s1", r.started_at, 0))
    assert page is not None and page.key == key_of(r) and page.actions == ("resume", "skip", "snooze")


def test_a_page_opened_from_history_offers_only_buttons_that_act_on_that_turn() -> None:
    """Issue 42.8. Before: a History row of an earlier interruption of a session opened a page whose Resume, Skip
    and Remind me later acted on the session's newer interruption, listed now. The row's page acts only while its
    own newest interruption is the one waiting."""
    from hermes_tray.model.page import page_for

    m, _sink = model()
    older = rec("s1", started_at=STARTED - 3600)
    book.record("notified", home=older.home, session_key="s1", started_at=older.started_at, attempts=0)
    book.record("skipped", home=older.home, session_key="s1", started_at=older.started_at, attempts=0)
    newer = rec("s1")
    book.record("notified", home=newer.home, session_key="s1", started_at=newer.started_at, attempts=0)
    scan(m, newer)  # the newer interruption waits
    rows = ledger().turns(100)
    page = page_for(m.view(), rows, ident=older.turn.ident, title="Old one")
    assert page is not None and page.key is None and page.actions == ()
    assert page.state == "Last recorded: Skipped. The tray does not list it now."
    page = page_for(m.view(), rows, ident=newer.turn.ident)
    assert page is not None and page.key is not None and page.actions == ("resume", "skip", "snooze")


def test_a_turn_told_apart_from_another_keeps_its_name_once_the_other_has_gone() -> None:
    """Two turns whose prompts begin alike are named by the part that differs; resume one, and the other is not
    renamed to its plain name, which would end right before that part ("…so unknown keys warn, and…")."""
    shared = "Please refactor the configuration parser so that unknown keys warn instead of failing, and then"
    m, _sink = model(mode="list")
    one = rec("s1", title=None, prompt_excerpt=f"{shared} run the tests")
    two = rec("s2", title=None, prompt_excerpt=f"{shared} update the docs")
    scan(m, one, two)
    names = {i.session_key: i.title for i in m.view().pending}
    assert names["s2"].endswith("update the docs”") and names["s1"] != names["s2"], names
    scan(m, two)  # s1 was resumed elsewhere: s2 alone
    assert m.view().pending[0].title == names["s2"]
    scan(m, rec("s2", title=None, prompt_excerpt=f"{shared} update the docs", started_at=STARTED + 60))
    assert m.view().pending[0].title != names["s2"]  # a new interruption of that session is named afresh


def test_a_snoozed_turn_says_its_reminder_in_its_menu_row() -> None:
    m, _sink = model()
    turn = rec("s1", title="Fix the flaky test")
    scan(m, turn)
    until = time.time() + 3600
    book.record("snoozed", home=str(HOME), session_key="s1", started_at=STARTED, attempts=0, until=until,
                via="tray-menu")
    m2, _sink = model()  # a restarted tray reads it from the ledger
    scan(m2, turn)
    (item,) = m2.view().pending
    said = words.reminder_text(until, time.time())
    assert item.menu_label() == f"Fix the flaky test — make test_upload stop timing … — {said[0].lower()}{said[1:]}"


def test_show_prompts_off_hides_a_title_hermes_made_of_the_prompt_in_the_note_the_menu_and_the_window() -> None:
    """Hermes 0.22 titles a session from its prompt at once (``title_source = 'derived'``): that title is the
    prompt, and is hidden wherever prompts are; a title a model or the user gave is not."""
    landlord = "SLOW: email my landlord about the broken boiler"
    derived = rec("s1", title=landlord, prompt_excerpt=landlord + " and ask when", title_from_prompt=True)
    named = rec("s2", title="Quarterly report", prompt_excerpt="Summarise the Q3 numbers", started_at=STARTED + 1)
    shown, sink = model(show_prompts=True)
    scan(shown, derived)
    assert "SLOW: email my landlord" in sink.shown[0].title
    hidden, sink = model(show_prompts=False)
    scan(hidden, derived)
    note = sink.shown[0]
    view = hidden.view()
    said = [note.title, note.body, *(i.title for i in view.pending), *(i.menu_label() for i in view.pending),
            *(i.excerpt for i in view.pending)]
    assert not [s for s in said if "landlord" in s or "boiler" in s], said
    assert note.title == f"Interrupted: Turn started {time.strftime('%H:%M', time.localtime(STARTED))}"
    scan(hidden, derived, named)
    assert [i.title for i in hidden.view().pending][1] == "Quarterly report"
