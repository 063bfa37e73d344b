"""Decide with the facts: what each turn was doing and why it stopped, where the user reads about it (Details, the
notification, the menu's tooltip); "remind me later" that survives a restart and brings the turn back with exactly
one notification; a turn's page, opened by a double-click in the turns window and in History.

The real ledger (the test's private state dir), real scanner records with the engine's own progress and
cause types, a real Qt event loop; the engine's actions are scripted (``fakes.FakeEngine``).
"""

from __future__ import annotations

import time

import pytest
from fakes import FakeEngine, RecordingNotifier, menu_labels
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from hermes_tray.app.application import TrayApp, TrayOptions
from hermes_tray.controller import Controller
from hermes_tray.watch.detector import ScanReport
from hermes_tray_core import StepKind, StopCause, TurnProgress
from hermes_tray_core.hermes.progress import ProgressStep
from hermes_tray_core.stores.ledger import ledger
from tests.support import book

PROGRESS = TurnProgress(messages=4, tool_calls=2, ran_for_s=75.0, last_excerpt="read_file: notes.txt",
                        recent=(ProgressStep(StepKind.TOOL, "terminal"), ProgressStep(StepKind.TOOL, "read_file")))
RESTARTED = "its Hermes process started at 09:12, before this computer last started, at 09:40"


class JournalEngine(FakeEngine):
    """History and the turn's page read the real ledger."""

    def history(self, limit=500):
        return ledger().turns(limit)


def turn(rec, key="s1", **fields):
    return rec(key, progress=PROGRESS, cause=StopCause.RESTARTED, cause_fact=RESTARTED, started_at=1_800_000_000.0,
               **fields)


def scan(ctrl, *records) -> None:
    ctrl.on_scan(ScanReport(records=tuple(records), finished=time.time()))


def settle(qtbot, ctrl) -> None:
    qtbot.waitUntil(lambda: ctrl.writes.pending == 0, timeout=5000)


def snoozes() -> list[dict]:
    return [e for e in book.history(1000) if e["event"] == "snoozed"]


# --- what it was doing, and why it stopped -----------------------------------------------------------------------


def test_details_the_notification_and_the_menu_say_what_it_was_doing_and_why_it_stopped(qtbot, rec) -> None:
    from hermes_tray.app.menu import TrayMenu
    from hermes_tray.app.prompt_window import PromptWindow

    notes = RecordingNotifier()
    ctrl = Controller(FakeEngine(), notes)
    scan(ctrl, turn(rec))
    (note,) = notes.shown
    assert note.title == "Interrupted: Fix the flaky test"
    body = note.body.splitlines()
    assert body == ["“make test_upload stop timing out on CI”",
                    "Progress: 4 messages, 2 tool calls — last: read_file: notes.txt",
                    f"Why it stopped: the computer restarted ({RESTARTED})",
                    "Resume it, skip it, or turn auto-continue off."]

    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ctrl.state)
    w.details_button.setChecked(True)
    details = w.details.text().splitlines()
    assert "Progress: 4 messages, 2 tool calls." in details
    assert "Last steps: ran terminal, ran read_file." in details
    assert "Last it said or did: read_file: notes.txt" in details
    assert f"Why it stopped: the computer restarted ({RESTARTED})" in details

    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ctrl.state)
    tip = next(a for a in menu.actions() if a.data() == ctrl.state.pending[0].key).toolTip().splitlines()
    assert tip[2:] == ["Progress: 4 messages, 2 tool calls — last: read_file: notes.txt",
                       f"Why it stopped: the computer restarted ({RESTARTED})"]


def test_prompts_hidden_hide_the_last_thing_it_said_everywhere_and_nothing_kept_is_said_as_such(qtbot, rec) -> None:
    from hermes_tray.app.prompt_window import PromptWindow

    notes = RecordingNotifier()
    ctrl = Controller(FakeEngine(show_prompts=False), notes)
    nothing = rec("s2", title="Second", progress=TurnProgress(), cause=StopCause.UNKNOWN)
    scan(ctrl, turn(rec), nothing)
    scan(ctrl, turn(rec), nothing)
    seen = " ".join(n.title + n.body for n in notes.shown)
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ctrl.state)
    w.details_button.setChecked(True)
    for row in range(2):
        w.list.setCurrentRow(row)
        seen += w.details.text() + w.list.item(row).text()
    seen += " ".join(i.progress + i.cause for i in ctrl.state.pending)
    assert "notes.txt" not in seen and "timing out" not in seen
    assert "Progress: 4 messages, 2 tool calls" in seen
    w.list.setCurrentRow(1)
    assert "Hermes kept nothing of this turn's progress." in w.details.text()
    assert "Why it stopped: Hermes stopped (cause unknown)" in w.details.text()


# --- remind me later ---------------------------------------------------------------------------------------------


def test_remind_me_in_1_hour_outlives_a_restart_then_brings_the_turn_back_with_one_note(qtbot, rec) -> None:
    t0 = time.time()
    now = [t0]
    engine = FakeEngine()
    notes = RecordingNotifier()
    ctrl = Controller(engine, notes)
    ctrl.model.ask.wall_clock = lambda: now[0]  # the tray's clock seam
    r = turn(rec)
    scan(ctrl, r)
    (asked,) = notes.shown
    ctrl.on_note_activated(asked.key, "snooze")  # the notification's "Remind me in 1 hour" (the server closes it)
    settle(qtbot, ctrl)
    (snoozed,) = snoozes()
    assert snoozed["session_key"] == "s1" and snoozed["until"] == pytest.approx(t0 + 3600, abs=1)
    assert ctrl.state.pending[0].reminder == snoozed["until"]  # still listed, saying when it comes back
    ctrl.shutdown()

    restarted = RecordingNotifier()  # the tray starts again: same ledger, nothing else kept
    again = Controller(FakeEngine(), restarted)
    again.model.ask.wall_clock = lambda: now[0]
    for minutes in (0, 30, 59):
        now[0] = t0 + minutes * 60
        scan(again, r)
    assert restarted.shown == [], "nothing before its time"
    assert again.state.pending[0].reminder_text().startswith("Reminder")
    now[0] = t0 + 3601
    for _ in range(3):
        scan(again, r)
    settle(qtbot, again)
    (reminder,) = restarted.shown
    assert reminder.title == "Reminder: Fix the flaky test" and reminder.body.startswith("You asked to be reminded")
    assert [a.key for a in reminder.actions][1:3] == ["resume", "skip"]
    again.shutdown()

    third = RecordingNotifier()
    later = Controller(FakeEngine(), third)
    later.model.ask.wall_clock = lambda: now[0] + 60
    scan(later, r)
    assert third.shown == [], "exactly one reminder, also across another restart"
    assert engine.resumed == [] and engine.skipped == [], "a snooze never continues or skips anything"


def test_a_snoozed_turn_is_never_continued_in_auto_mode_and_is_reminded_of(qtbot, rec) -> None:
    now = [time.time()]
    r = turn(rec)
    engine = FakeEngine(mode="auto")
    engine.note("notified", r)  # asked before (as after a continuation that failed): auto mode leaves it
    first = Controller(engine, RecordingNotifier())
    scan(first, r)
    assert first.snooze(first.state.pending[0].key, "1h")
    settle(qtbot, first)
    first.shutdown()
    notes = RecordingNotifier()
    ctrl = Controller(engine, notes)
    ctrl.model.ask.wall_clock = lambda: now[0] + 3601
    scan(ctrl, r)
    qtbot.wait(50)
    assert engine.resumed == [] and [n.title for n in notes.shown] == ["Reminder: Fix the flaky test"]


def test_a_turn_that_went_stale_during_its_snooze_is_listed_under_recent_with_why_not_announced(qtbot, rec) -> None:
    now = [time.time()]
    r = turn(rec)
    first = Controller(FakeEngine(), RecordingNotifier())
    first.model.ask.wall_clock = lambda: now[0]
    scan(first, r)
    first.snooze(first.state.pending[0].key, "1h", origin="window")
    settle(qtbot, first)
    first.shutdown()
    notes = RecordingNotifier()
    ctrl = Controller(FakeEngine(), notes)
    ctrl.model.ask.wall_clock = lambda: now[0] + 3601
    stale = r._replace(verdict="stale", code="stale", reason="interrupted 61 min ago; older than 15 min")
    scan(ctrl, stale)
    scan(ctrl, stale)
    assert notes.shown == [] and ctrl.state.pending == ()
    (row,) = ctrl.state.recent
    assert row.what == "Too old to resume"
    assert row.why.startswith("It stopped waiting before your reminder.")


def test_the_menu_and_the_window_remind_later_and_history_shows_it(qtbot, monkeypatch, rec) -> None:
    app = _tray(qtbot, monkeypatch, JournalEngine())
    try:
        c = app.controller
        scan(c, turn(rec), turn(rec, "s2", title="Second"))
        (storm,) = app.notifier.on_screen().values()
        sub = next(a.menu() for a in app.menu.actions() if a.text().startswith("Fix the flaky test"))
        next(a for a in sub.actions() if a.text() == "Remind me in 1 hour").trigger()
        qtbot.waitUntil(lambda: len(snoozes()) == 1, timeout=5000)
        settle(qtbot, c)
        assert [t.session_key for t in app.notifier.on_screen()[storm.key].subjects] == ["s2"]  # its note lets go
        app.window.set_state(c.state)
        app.window.list.setCurrentRow(1)
        tomorrow = next(a for a in app.window.snooze_button.menu().actions() if a.text() == "Remind me tomorrow morning")
        tomorrow.trigger()
        qtbot.waitUntil(lambda: len(snoozes()) == 2, timeout=5000)
        by_key = {e["session_key"]: e for e in snoozes()}
        assert by_key["s1"]["via"] == "tray-menu" and by_key["s2"]["via"] == "tray-window"
        assert time.localtime(by_key["s2"]["until"]).tm_hour == 9  # tomorrow morning
        settle(qtbot, c)
        assert all(item.reminder is not None for item in c.state.pending)
        app.show_history()
        history = app._dialogs["history"]
        qtbot.waitUntil(lambda: history.tree.topLevelItemCount() == 2, timeout=5000)
        rows = [history.tree.topLevelItem(i).text(3) for i in range(2)]
        assert all(text.startswith("Reminder") for text in rows), rows
    finally:
        app.shutdown()


# --- a turn's page -----------------------------------------------------------------------------------------------


def _tray(qtbot, monkeypatch, engine) -> TrayApp:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    notifier = RecordingNotifier()
    monkeypatch.setattr("hermes_tray.notify.make_notifier", lambda *a, **k: notifier)
    app = TrayApp(QApplication.instance(), TrayOptions(engine=engine, autostart=None))
    app.start()
    # the detector's first scan (of nothing) is in: the turns the test scans are not replaced by it
    qtbot.waitUntil(lambda: app.controller is not None and menu_labels(app.menu)[0] == "No interrupted turns",
                    timeout=5000)
    return app


def _double_click(qtbot, view, item) -> None:
    """As a person does it: press and release, then the second press (QTest's double click alone is not one)."""
    view.scrollToItem(item)
    pos = view.visualItemRect(item).center()
    qtbot.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def _page(qtbot, app):
    qtbot.waitUntil(lambda: "page" in app._dialogs and app._dialogs["page"].isVisible(), timeout=5000)
    return app._dialogs["page"]


def test_a_double_click_in_the_turns_window_opens_the_turns_page_whose_buttons_act(qtbot, monkeypatch, rec) -> None:
    engine = JournalEngine()
    app = _tray(qtbot, monkeypatch, engine)
    try:
        c = app.controller
        scan(c, turn(rec, attempts=1))
        settle(qtbot, c)  # "notified" is in the ledger
        app.presence.clicked.emit()
        w = app.window
        _double_click(qtbot, w.list, w.list.item(0))
        page = _page(qtbot, app)
        assert page.windowTitle().startswith("Fix the flaky test")
        assert "1 try so far" in page.findChildren(type(page.state))[1].text()
        texts = "\n".join(label.text() for label in page.findChildren(type(page.state)))
        assert "“make test_upload stop timing out on CI”" in texts
        assert "Progress: 4 messages, 2 tool calls." in page.facts.text()
        assert "Last it said or did: read_file: notes.txt" in page.facts.text()
        assert f"Why it stopped: the computer restarted ({RESTARTED})" in page.facts.text()
        trail = [page.decisions.topLevelItem(i).text(1) for i in range(page.decisions.topLevelItemCount())]
        assert trail == ["You were told"]
        assert page.resume_button.isVisible() and page.skip_button.isVisible() and page.snooze_button.isVisible()
        with qtbot.waitSignal(c.rescan_requested, timeout=5000):
            page.resume_button.click()
        assert engine.resumed == ["s1"] and not page.isVisible()
    finally:
        app.shutdown()


def test_a_double_click_in_history_opens_the_same_page_and_its_buttons_act(qtbot, monkeypatch, rec) -> None:
    engine = JournalEngine()
    app = _tray(qtbot, monkeypatch, engine)
    try:
        c = app.controller
        scan(c, turn(rec))
        settle(qtbot, c)
        app.show_history()
        history = app._dialogs["history"]
        qtbot.waitUntil(lambda: history.tree.topLevelItemCount() == 1, timeout=5000)
        _double_click(qtbot, history.tree, history.tree.topLevelItem(0))
        page = _page(qtbot, app)
        assert page.windowTitle().startswith("Fix the flaky test")
        assert f"Why it stopped: the computer restarted ({RESTARTED})" in page.facts.text()
        assert not history.tree.topLevelItem(0).isExpanded()  # the arrow shows the trail; a double-click the page
        page.snooze_button.menu().actions()[0].trigger()  # Remind me in 1 hour
        qtbot.waitUntil(lambda: len(snoozes()) == 1, timeout=5000)
        assert snoozes()[0]["via"] == "tray-history"
        _double_click(qtbot, history.tree, history.tree.topLevelItem(0))
        page = _page(qtbot, app)
        trail = [page.decisions.topLevelItem(i).text(1) for i in range(page.decisions.topLevelItemCount())]
        assert trail == ["You were told", "Remind me later"]
        with qtbot.waitSignal(c.skip_done, timeout=5000):
            page.skip_button.click()
        assert engine.skipped == ["s1"]
    finally:
        app.shutdown()
