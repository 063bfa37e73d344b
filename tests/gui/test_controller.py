"""What the user experiences from the coordinator: asked once, storms coalesced, modes obeyed."""

from __future__ import annotations

import time

import pytest
from fakes import FakeEngine, RecordingNotifier, menu_labels

from hermes_tray.contract import Outcome, RunResult
from hermes_tray.controller import Controller
from hermes_tray.watch.detector import ScanReport


def make(engine: FakeEngine | None = None):
    engine = engine or FakeEngine()
    notifier = RecordingNotifier()
    return Controller(engine, notifier), engine, notifier


def scan(ctrl: Controller, *records) -> None:
    ctrl.on_scan(ScanReport(records=tuple(records)))


def settle(qtbot, ctrl: Controller) -> None:
    """Wait until the writes handed to the controller's write worker have come back."""
    qtbot.waitUntil(lambda: ctrl.writes.pending == 0, timeout=5000)


def test_one_turn_one_notification_with_buttons(qtbot, rec) -> None:
    ctrl, engine, notes = make()
    r = rec("s1")
    scan(ctrl, r)
    scan(ctrl, r)  # seen again by a later scan: not asked again
    settle(qtbot, ctrl)
    assert len(notes.shown) == 1
    note = notes.shown[0]
    assert note.title == "Interrupted: Fix the flaky test"
    assert [(a.key, a.label) for a in note.actions] == [("default", "Show"), ("resume", "Resume"), ("skip", "Skip"),
                                                         ("snooze", "Remind me in 1 hour"),
                                                         ("disable", "Disable auto-continue")]  # a click: Show
    assert "make test_upload stop timing out on CI" in note.body
    assert ("notified", "s1", r.started_at) in engine.events
    assert ctrl.state.icon_state == "attention"


def test_asked_before_restart_is_not_asked_again(qtbot, rec) -> None:
    engine = FakeEngine()
    r = rec("s1")
    engine.note("notified", r)
    ctrl, _, notes = make(engine)
    scan(ctrl, r)
    assert notes.shown == []
    assert len(ctrl.state.pending) == 1  # an ignored notification leaves the turn pending in the menu


def test_crash_storm_is_one_notification_updated_in_place(qtbot, rec) -> None:
    ctrl, engine, notes = make()
    s1 = rec("s1")
    scan(ctrl, s1)
    scan(ctrl, s1, rec("s2"), rec("s3", title="Third"))
    keys = {n.key for n in notes.shown}
    assert len(keys) == 1, "every update must reuse the first notification"
    latest = notes.shown[-1]
    assert latest.title == "3 Hermes turns interrupted"
    assert [a.label for a in latest.actions] == ["Resume all", "Skip all", "Open"]
    ctrl.on_note_activated(latest.key, "skip-all")
    settle(qtbot, ctrl)
    assert sorted(engine.skipped) == ["s1", "s2", "s3"]


def test_after_the_window_a_new_turn_gets_a_new_notification(qtbot, rec) -> None:
    ctrl, engine, notes = make()
    clock = [100.0]
    ctrl.model.notes.clock = lambda: clock[0]
    scan(ctrl, rec("s1"))
    clock[0] += 2.5
    scan(ctrl, rec("s1"), rec("s2"))
    assert len({n.key for n in notes.shown}) == 2


def test_prompt_not_in_notification_when_show_prompts_off(qtbot, rec) -> None:
    ctrl, engine, notes = make(FakeEngine(show_prompts=False))
    scan(ctrl, rec("s1", title=None))
    body = notes.shown[0].body + notes.shown[0].title
    assert "timing out" not in body
    assert "Turn started " in body and "s1" not in body  # its profile and time name it; the id is on demand


def test_resume_button_runs_continuation_and_reports_finished(qtbot, rec) -> None:
    ctrl, engine, notes = make()
    scan(ctrl, rec("s1"))
    first = notes.shown[0]
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.on_note_activated(first.key, "resume")
    assert engine.resumed == ["s1"]
    finished = notes.shown[-1]
    assert finished.title == "Hermes turn finished"
    assert "All tests pass now." in finished.body and "More detail" not in finished.body
    with qtbot.waitSignal(ctrl.answer_ready) as got:
        ctrl.on_note_activated(finished.key, "default")
    assert got.args[1].startswith("All tests pass now.")


def test_running_continuation_is_busy_with_progress_and_stop(qtbot, rec) -> None:
    engine = FakeEngine()
    engine.resume_delay = 10
    ctrl, _, notes = make(engine)
    scan(ctrl, rec("s1"))
    key = ctrl.state.pending[0].key
    ctrl.resume(key)
    qtbot.waitUntil(lambda: bool(ctrl.state.running) and ctrl.state.running[0].status == "writing the answer · 3 updates")
    assert ctrl.state.icon_state == "busy"
    assert ctrl.state.pending == ()
    engine.resume_outcome = RunResult(Outcome.INTERRUPTED, "stopped")
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.stop(key)
    assert notes.shown[-1].title == "Turn stopped"
    assert "You stopped it. It is not resumed again." in notes.shown[-1].body  # and after: what Stop did
    assert ctrl.state.running == ()


def test_auto_mode_resumes_at_once_and_notifies_after(qtbot, rec) -> None:
    ctrl, engine, notes = make(FakeEngine(mode="auto"))
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        scan(ctrl, rec("s1"))
    assert engine.resumed == ["s1"]
    assert [n.title for n in notes.shown] == ["Hermes turn finished"]


def test_off_mode_only_lists(qtbot, rec) -> None:
    ctrl, engine, notes = make(FakeEngine(mode="off"))
    scan(ctrl, rec("s1"))
    qtbot.wait(50)
    assert notes.shown == [] and engine.resumed == []
    assert len(ctrl.state.pending) == 1


def test_resurrected_skip_is_removed_again_without_asking(qtbot, rec) -> None:
    engine = FakeEngine()
    r = rec("s1")
    engine.note("skipped", r)
    ctrl, _, notes = make(engine)
    scan(ctrl, r)
    settle(qtbot, ctrl)
    assert engine.skipped == ["s1"]
    assert notes.shown == []


def test_turn_resolved_elsewhere_withdraws_its_notification(qtbot, rec, monkeypatch) -> None:
    from hermes_tray.model import turns

    monkeypatch.setattr(turns, "VANISHED_GRACE", 0.3)
    ctrl, engine, notes = make()
    scan(ctrl, rec("s1"), rec("s2"))
    key = notes.shown[-1].key
    scan(ctrl, rec("s2"))  # s1 resumed by the CLI / another process
    qtbot.waitUntil(lambda: notes.on_screen()[key].title.startswith("Interrupted: "), timeout=3000)
    scan(ctrl)
    assert key in notes.on_screen(), "kept while the marker may only be flickering"
    qtbot.waitUntil(lambda: key not in notes.on_screen(), timeout=3000)


def test_a_flickering_marker_is_one_notification_that_keeps_naming_its_turns(qtbot, rec) -> None:
    """Issue 35.7. A writer rewriting the marker file continuously makes turns vanish and come back many times a
    second. Before: each return before the "notified" write landed asked again, each vanishing shrank or
    withdrew the note (506 notifications in 2 minutes, a turn named 18 times). Now: one note, naming both."""
    import threading

    ctrl, engine, notes = make()
    hold = threading.Event()
    ctrl.writes.pool.submit(hold.wait)  # the journal's "notified" write is still queued, as under load
    s1, s2 = rec("s1"), rec("s2")
    try:
        scan(ctrl, s1, s2)
        for _ in range(50):
            scan(ctrl, s2)
            scan(ctrl, s1)
            scan(ctrl)
            scan(ctrl, s1, s2)
    finally:
        hold.set()
    settle(qtbot, ctrl)
    assert len(notes.shown) == 1, [n.title for n in notes.shown]
    (note,) = notes.on_screen().values()
    assert note.title == "2 Hermes turns interrupted"
    assert [e for e in engine.events if e[0] == "notified"] == [("notified", "s1", s1.started_at),
                                                                ("notified", "s2", s2.started_at)]


def test_disable_button_turns_backend_off_for_that_home(qtbot, rec) -> None:
    ctrl, engine, notes = make()
    scan(ctrl, rec("s1"))
    ctrl.on_note_activated(notes.shown[0].key, "disable")
    settle(qtbot, ctrl)
    assert engine.backend_changes == [(["/home/u/.hermes"], {"enabled": False})]


@pytest.mark.parametrize("verdict", ["running", "stale", "exhausted", "disabled", "not-ours"])
def test_only_actionable_turns_are_asked_about(qtbot, rec, verdict) -> None:
    ctrl, engine, notes = make()
    scan(ctrl, rec("s1", verdict=verdict), rec("w1", source="webui"))
    assert notes.shown == [] and ctrl.state.pending == ()
    assert len(ctrl.state.others) == 2


def test_notifications_off_still_lists(qtbot, rec) -> None:
    ctrl, engine, notes = make(FakeEngine(notify=False))
    scan(ctrl, rec("s1"))
    assert notes.shown == [] and len(ctrl.state.pending) == 1


def _failing_resume(qtbot, rec, message="the Hermes backend died during the continuation. The turn stays "
                    "marked as interrupted (attempt 2), so it can be continued again within the retry budget."):
    engine = FakeEngine()
    engine.resume_outcome = RunResult(Outcome.CRASHED, message, ran_in="separate-process")
    ctrl, _, notes = make(engine)
    scan(ctrl, rec("s1", attempts=1))
    before = len(notes.shown)
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.resume(ctrl.state.pending[0].key)
    return ctrl, notes, before


def test_the_last_failed_continuation_is_one_accurate_notification(qtbot, rec) -> None:
    """Before: "failed again … can be continued again" and "gave up after 2 automatic continuations"
    3 ms apart, for two manual resumes."""
    ctrl, notes, before = _failing_resume(qtbot, rec)
    assert len(notes.shown) == before  # not yet: the scan the finish triggers says what it was
    exhausted = rec("s1", attempts=2, verdict="exhausted", started_at=1.0)
    scan(ctrl, exhausted)
    scan(ctrl, exhausted)
    qtbot.wait(50)
    after = notes.shown[before:]
    assert [n.title for n in after] == ["Hermes gave up on a turn"]
    body = after[0].body
    assert "Gave up after 2 tries" in body and "Finish it in Hermes by hand" in body
    assert "automatic" not in body and "can be continued again" not in body
    assert after[0].kind == "gave-up" and after[0].urgency == "critical"


def test_a_failed_continuation_with_budget_left_says_it_is_still_waiting(qtbot, rec) -> None:
    ctrl, notes, before = _failing_resume(qtbot, rec)
    scan(ctrl, rec("s1", attempts=2))  # still actionable: the budget allows another try
    after = notes.shown[before:]
    assert [n.title for n in after] == ["Interrupted again: Fix the flaky test"]  # one note, not also "interrupted"
    assert "Hermes exited before it finished." in after[0].body and after[0].kind == "waiting"
    assert [a.label for a in after[0].actions][1:3] == ["Resume", "Skip"]  # the ask itself: act on it here
    assert ctrl.state.pending and ctrl.state.pending[0].session_key == "s1"


def test_a_failure_is_said_even_when_no_scan_follows(qtbot, rec) -> None:
    from hermes_tray.controller import FAILURE_VERDICT_MS

    ctrl, notes, before = _failing_resume(qtbot, rec)
    qtbot.waitUntil(lambda: len(notes.shown) > before, timeout=FAILURE_VERDICT_MS + 2000)
    assert [n.title for n in notes.shown[before:]] == ["Hermes turn failed again"]


def test_the_helper_offers_no_button_without_an_action(qtbot, rec) -> None:
    """The headless helper has no window: no "Show" / "Open" that would do nothing."""
    from hermes_tray.controller import Controller

    notifier = RecordingNotifier()
    ctrl = Controller(FakeEngine(), notifier, role="helper")
    scan(ctrl, rec("s1"), rec("s2"))
    labels = {a.label for n in notifier.shown for a in n.actions}
    assert labels and "Open" not in labels and "Show" not in labels
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.resume(ctrl.state.pending[0].key)
    finished = [n for n in notifier.shown if n.title == "Hermes turn finished"]
    assert finished and finished[0].actions == () and finished[0].kind == "finished"
    assert finished[0].urgency == "low"


def test_hostile_records_never_crash_and_never_become_markup(qtbot, rec) -> None:
    """Whatever the engine hands over (odd types, control characters, markup, huge text) is shown safely."""
    ctrl, engine, notes = make()
    weird = [
        rec("s1", title=None, prompt_excerpt=None, profile=None, attempts="2", age_seconds=float("nan")),
        rec("s2", title=12345, prompt_excerpt="<b>bold</b> & <a href='x'>link</a>\x00\x1b[31m", attempts=-1),
        rec("s3", title="t" * 10_000, prompt_excerpt="p" * 100_000, started_at=float("inf"), age_seconds=None),
    ]
    scan(ctrl, *weird)
    note = notes.shown[-1]
    assert note.title == "3 Hermes turns interrupted"
    assert "<" not in note.body and "\x00" not in note.body and len(note.body) < 1000
    items = ctrl.state.pending
    assert len(items) == 3
    assert all("<" not in i.excerpt and "\x1b" not in i.excerpt for i in items)
    from hermes_tray.app.menu import TrayMenu

    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ctrl.state)
    assert all(len(label) < 200 for label in menu_labels(menu))


def test_skipped_elsewhere_then_resurrected_is_skipped_again_silently(qtbot, rec) -> None:
    """Asked about, skipped from the CLI, then written back by a non-locking Hermes writer."""
    ctrl, engine, notes = make()
    r = rec("s1")
    scan(ctrl, r)
    assert len(notes.shown) == 1
    engine.note("skipped", r)  # `hermes-tray skip s1`
    scan(ctrl)  # the marker is gone
    scan(ctrl, r)  # ...and back, byte for byte
    settle(qtbot, ctrl)
    assert engine.skipped == ["s1"]
    assert len(notes.shown) == 1, "never asked again"
    assert ctrl.state.pending == ()


@pytest.mark.parametrize("action", ["skip", "resume"])
def test_old_notification_never_acts_on_a_newer_interruption(qtbot, rec, action) -> None:
    """Turn A is notified; a new interruption B of the same session replaces it between scans.
    A's Skip/Resume must not act on B (which the user never saw): nothing is done, the user is told."""
    ctrl, engine, notes = make()
    messages: list[str] = []
    ctrl.message.connect(messages.append)
    a = rec("s1", started_at=1000.0, prompt_excerpt="turn A", entry={"prompt": "A", "started_at": 1000.0})
    scan(ctrl, a)
    note_a = notes.shown[0]
    b = rec("s1", started_at=2000.0, prompt_excerpt="turn B", entry={"prompt": "B", "started_at": 2000.0})
    scan(ctrl, b)
    assert note_a.key not in notes.on_screen(), "A's notification is withdrawn once A is replaced"
    assert any("turn B" in n.body for n in notes.on_screen().values()), "B is asked about on its own"
    ctrl.on_note_activated(note_a.key, action)
    assert engine.acted_on == []
    assert messages and "out of date" in messages[-1]
    assert len(ctrl.state.pending) == 1  # B still waits for an answer


@pytest.mark.parametrize("action", ["skip", "resume"])
def test_notification_passes_the_entry_it_showed_as_expected(qtbot, rec, action) -> None:
    """Same turn, marker rewritten since (same start and attempts): the engine compares against
    the entry the notification showed, not the current one."""
    ctrl, engine, notes = make()
    shown = rec("s1", started_at=1000.0, entry={"prompt": "A", "started_at": 1000.0, "writer_pid": 1})
    scan(ctrl, shown)
    now = rec("s1", started_at=1000.0, entry={"prompt": "A", "started_at": 1000.0, "writer_pid": 2})
    scan(ctrl, now)
    ctrl.on_note_activated(notes.shown[0].key, action)
    qtbot.waitUntil(lambda: bool(engine.acted_on), timeout=2000)
    assert engine.acted_on[0][0] == action
    assert engine.acted_on[0][1].entry == shown.entry
    qtbot.waitUntil(lambda: not ctrl.state.running, timeout=2000)


def test_note_whose_turn_changed_while_still_shown_does_nothing(qtbot, rec) -> None:
    """Two turns in one note; one is replaced by a newer interruption before the user answers:
    Skip all skips the unchanged one only and says the other changed."""
    ctrl, engine, notes = make()
    messages: list[str] = []
    ctrl.message.connect(messages.append)
    a, other = rec("s1", started_at=1000.0), rec("s2", started_at=1000.0)
    scan(ctrl, a, other)
    key = notes.shown[-1].key
    # the controller's record of s1 changes identity without a scan that withdraws the note
    ctrl.model.records[ctrl.state.pending[0].key] = rec("s1", started_at=2000.0)
    ctrl.on_note_activated(key, "skip-all")
    settle(qtbot, ctrl)
    assert [r.session_key for _a, r in engine.acted_on] == ["s2"]
    assert messages and "changed since the notification" in messages[-1]


def test_unshown_notification_does_not_use_up_ask_once(qtbot, rec, monkeypatch) -> None:
    """At login the notification server may not be up: a note that went only to the log is not
    'notified'; the turn is asked about again later, and journalled once a note reaches the user."""
    ctrl, engine, notes = make()
    ctrl.model.ask.retry_seconds = 0.0
    notes.deliver = False
    r = rec("s1")
    scan(ctrl, r)
    assert len(notes.shown) == 1
    assert not any(e == "notified" for e, *_ in engine.events)
    notes.deliver = True
    scan(ctrl, r)  # the server is up now
    settle(qtbot, ctrl)
    assert len(notes.shown) == 2
    assert ("notified", "s1", r.started_at) in engine.events
    scan(ctrl, r)
    assert len(notes.shown) == 2, "asked once it was seen, and only once"
    assert [e for e, *_ in engine.events].count("notified") == 1


def test_desktop_notifier_without_a_server_reports_not_delivered(qtbot, rec, tmp_path, monkeypatch) -> None:
    """The real desktop-notifier back end with a session bus address but no server behind it."""
    pytest.importorskip("desktop_notifier")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    from hermes_tray.notify.desktop import DesktopNotifierBackend

    notifier = DesktopNotifierBackend("Hermes Tray test")
    try:
        notifier.wait_ready(10)
        engine = FakeEngine()
        ctrl = Controller(engine, notifier)
        with qtbot.waitSignal(notifier.delivered, timeout=10000) as blocker:
            scan(ctrl, rec("s1"))
        assert blocker.args[1] is False
        qtbot.wait(50)
        assert not any(e == "notified" for e, *_ in engine.events)
    finally:
        notifier.shutdown()


class _ChildEngine(FakeEngine):
    """resume() runs a real child process, as the gateway does; ``stop_takes`` seconds to stop it
    once asked (None: never stops it by itself)."""

    def __init__(self, stop_takes: float | None, *, ignore_term: bool = False) -> None:
        super().__init__()
        self.stop_takes = stop_takes
        self.ignore_term = ignore_term
        self.child = None

    def resume(self, record, *, origin, on_progress, stop):
        import subprocess
        import sys

        code = "import signal, time\n"
        if self.ignore_term:
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        code += "time.sleep(120)\n"
        self.child = subprocess.Popen([sys.executable, "-c", code])
        stop.wait()
        if self.stop_takes is None:
            self.child.wait()  # a stop that never ends by itself
        else:
            time.sleep(self.stop_takes)  # interrupt grace, gateway shutdown…
            self.child.terminate()
            self.child.wait()
        return RunResult(Outcome.INTERRUPTED, "stopped")


def _alive(proc) -> bool:
    return proc is not None and proc.poll() is None


def test_quitting_kills_nothing_and_waits_only_a_moment_for_a_run_that_does_not_return(qtbot, rec) -> None:
    """Quitting is a crash with manners: runs are told, given a moment to say how they were left, and then the tray
    goes. A Hermes process a continuation started is never killed by it (its keeper carries the turn on)."""
    import hermes_tray.controller as controller_mod

    engine = _ChildEngine(stop_takes=None, ignore_term=True)
    ctrl, _, _ = make(engine)
    scan(ctrl, rec("s1"))
    ctrl.resume(ctrl.state.pending[0].key)
    qtbot.waitUntil(lambda: _alive(engine.child), timeout=5000)
    started = time.monotonic()
    try:
        ctrl.shutdown()
        took = time.monotonic() - started
        assert controller_mod.QUIT_WAIT_S - 0.5 <= took < controller_mod.QUIT_WAIT_S + 3, took
        assert _alive(engine.child), "quitting killed a process a continuation started"
    finally:
        engine.child.kill()
        engine.child.wait()


def test_quitting_is_never_your_stop_and_your_stop_is(qtbot, rec) -> None:
    """The engine is told why a run must stop: Quit (logout, SIGTERM, an update) lets the continuation go on in
    Hermes; only the Stop button ends it for good."""
    from hermes_tray_core import StopReason

    reasons: list = []

    class Engine(FakeEngine):
        def resume(self, record, *, origin, on_progress, stop):
            stop.wait(10)
            reasons.append((record.session_key, stop.reason))
            return RunResult(Outcome.INTERRUPTED, "stopped")

    ctrl, _, _ = make(Engine())
    scan(ctrl, rec("s1"), rec("s2"))
    k1, k2 = (i.key for i in ctrl.state.pending)
    ctrl.resume(k1)
    ctrl.resume(k2)
    ctrl.stop(k1)  # the user's Stop
    qtbot.waitUntil(lambda: len(reasons) == 1, timeout=5000)
    ctrl.shutdown(wait=5)  # then Quit
    assert dict(reasons) == {"s1": StopReason.USER, "s2": StopReason.SHUTDOWN}


def test_a_stop_hermes_file_could_not_record_is_said_in_one_sentence(qtbot, rec) -> None:
    """Your Stop holds (the tray's journal), but Hermes' own file could not be changed: the note and Recent say so,
    and what to do, in words (no errno, no temp-file name)."""

    class Engine(FakeEngine):
        def resume(self, record, *, origin, on_progress, stop):
            stop.wait(10)
            return RunResult(Outcome.INTERRUPTED, "stopped", marker_left="read-only file system")

    ctrl, _, notes = make(Engine())
    scan(ctrl, rec("s1"))
    key = ctrl.state.pending[0].key
    ctrl.resume(key)
    ctrl.stop(key)
    qtbot.waitUntil(lambda: any(n.kind == "stopped" for n in notes.shown), timeout=5000)
    (note,) = [n for n in notes.shown if n.kind == "stopped"]
    said = "Hermes' file could not be changed: read-only file system. It is still never resumed; Skip clears it"
    assert said in note.body, note.body
    (recent,) = [r for r in ctrl.state.recent if r.key == key]
    assert recent.what == "Stopped" and said in recent.can_do


def test_only_turns_a_delivered_note_showed_count_as_asked(qtbot, rec) -> None:
    """Delivery reports come later (the notifier's own thread). A coalesced note grows between
    shows: the version showing s1 reached the user, the version adding s2 did not. s1 is asked,
    s2 is not, although both were in the note when the first report arrived."""

    class Deferred(RecordingNotifier):
        def show(self, note):
            self.shown.append(note)  # delivered later, by the test

    notes = Deferred()
    engine = FakeEngine()
    ctrl = Controller(engine, notes)
    s1, s2 = rec("s1"), rec("s2")
    scan(ctrl, s1)
    scan(ctrl, s1, s2)
    first, second = notes.shown
    assert first.key == second.key
    notes.delivered.emit(first, True)
    notes.delivered.emit(second, False)
    settle(qtbot, ctrl)
    asked = {k for e, k, _s in engine.events if e == "notified"}
    assert asked == {"s1"}


def test_a_late_answer_after_quitting_writes_nothing_and_does_not_raise(qtbot, rec) -> None:
    """A notification delivered while the tray quits: its journal write is dropped, not an exception."""
    ctrl, engine, notes = make()
    ctrl.shutdown()
    scan(ctrl, rec("s1"))  # the note is shown and delivered after the write worker stopped
    assert len(notes.shown) == 1 and ctrl.writes.pending == 0
    assert engine.events == []
