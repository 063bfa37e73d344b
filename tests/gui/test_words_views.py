"""What the views say, checked against the writing rules (tests/test_words.py) as they render it: the tooltip,
the menu, the turns window, History and every notification of a turn's life, on the real controller."""

from __future__ import annotations

import time

from fakes import FakeEngine, RecordingNotifier
from PySide6.QtWidgets import QLabel, QPushButton
from test_words import broken_rules

from hermes_tray.app.menu import TrayMenu
from hermes_tray.app.prompt_window import PromptWindow
from hermes_tray.contract import Outcome, RunResult
from hermes_tray.controller import Controller
from hermes_tray.model.viewstate import Problem, ViewState, recent_items, turn_item
from hermes_tray.watch.detector import ScanReport


def _menu_texts(menu) -> list[str]:
    out, stack = [], list(menu.actions())
    while stack:
        a = stack.pop()
        out += [a.text(), a.toolTip()]
        if a.menu() is not None:
            stack += a.menu().actions()
    return [t for t in out if t]


def _window_texts(w: PromptWindow) -> list[str]:
    texts = [lbl.text() for lbl in w.findChildren(QLabel)] + [b.text() for b in w.findChildren(QPushButton)]
    texts += [w.list.item(i).text() for i in range(w.list.count())]
    texts += [w.recent_list.item(i).text() for i in range(w.recent_list.count())]
    return [t for t in texts if t]


def _ended(qtbot, rec, outcome: RunResult, *, stop: bool = False, demo: bool = False):
    engine = FakeEngine()
    engine.resume_outcome = outcome
    engine.resume_delay = 10 if stop else 0
    notes = RecordingNotifier()
    ctrl = Controller(engine, notes, demo=demo)
    ctrl.on_scan(ScanReport(records=(rec("s1", title=None, profile="work"),), finished=time.time()))
    key = ctrl.state.pending[0].key
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.resume(key)
        if stop:
            qtbot.waitUntil(lambda: bool(ctrl.state.running))
            ctrl.stop(key)
    return ctrl, notes


def test_every_string_a_turn_shows_follows_the_rules(qtbot, rec) -> None:
    outcomes = [RunResult(Outcome.COMPLETED, "done", ran_in="running-backend", where="in your running Hermes (pid 7)"),
                RunResult(Outcome.REFUSED, "Not resumed: x", code="not-actionable", verdict="running"),
                RunResult(Outcome.REFUSED, "Not resumed: y", code="claimed-elsewhere"),
                RunResult(Outcome.GAVE_UP, "Not resumed: gave up — already continued 2 time(s)", attempts=2),
                RunResult(Outcome.TIMED_OUT, "no activity for 600s (the continuation was interrupted and will not be "
                                             "continued again)", ran_in="separate-process")]
    texts: list[str] = []
    for out in outcomes:
        ctrl, notes = _ended(qtbot, rec, out)
        qtbot.wait(10)
        for n in notes.shown:
            texts += [n.title, n.body]
        texts += [r.what for r in ctrl.state.recent] + [r.why for r in ctrl.state.recent]
        texts += [r.can_do for r in ctrl.state.recent]
    ctrl, notes = _ended(qtbot, rec, RunResult(Outcome.INTERRUPTED, "stopped"), stop=True)
    texts += [t for n in notes.shown for t in (n.title, n.body)]
    held = tuple(turn_item(rec(f"h{v}", verdict=v, code=c, attempts=2), show_prompts=True)
                 for v, c in (("disabled", "disabled"), ("stale", "stale"), ("exhausted", "exhausted"),
                              ("running", "owner-alive"), ("running", "writer-alive"), ("not-ours", "no-prompt")))
    state = ViewState(pending=(turn_item(rec("p1"), show_prompts=True),), others=held, backend_enabled=None,
                      problems=(Problem("default: /h/desktop/interrupted_turns.json is corrupt", kind="markers",
                                        home="/h"),), recent=recent_items(held), autostart=False)
    texts += state.tooltip().splitlines()
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(state)
    texts += [t for t in _menu_texts(menu) if not t.startswith("⚠")]  # a problem's own text is the details
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    texts += [t for t in _window_texts(w) if not t.startswith("⚠") and "Session ID" not in t]
    broken = {t: broken_rules(t) for t in texts if broken_rules(t)}
    assert not broken, broken


def test_where_it_ran_is_said_and_the_demo_sends_no_one_to_a_hermes_app(qtbot, rec) -> None:
    """Issue 25.7: finished notifications never said where the turn ran; the demo said "Open the session in
    Hermes" where there is no Hermes; "interrupted" was said of a turn the user stopped."""
    _ctrl, notes = _ended(qtbot, rec, RunResult(Outcome.COMPLETED, "done", ran_in="separate-process"))
    assert "It ran in a separate Hermes process." in notes.shown[-1].body
    ctrl, notes = _ended(qtbot, rec, RunResult(Outcome.INTERRUPTED, "the continuation was interrupted"), stop=True,
                         demo=True)
    said = "\n".join([notes.shown[-1].title, notes.shown[-1].body, *(r.what + r.why + r.can_do
                                                                        for r in ctrl.state.recent)])
    assert "Stopped" in said and "You stopped it." in said and "interrupted" not in said.lower()
    assert "Hermes by hand" not in said and "Open the session" not in said
    state = ViewState(others=(turn_item(rec("x", verdict="stale", code="stale"), show_prompts=True),))
    demo = recent_items(state.others, in_app=False)[0]
    assert "Hermes by hand" not in demo.can_do and demo.actions == ("skip",)


def test_the_tooltip_never_says_what_the_tray_would_do_when_auto_continue_is_off(rec) -> None:
    """Issue 25.7: "Hermes auto-continue is off" stood above "Asks before resuming"."""
    held = turn_item(rec("s1", verdict="disabled", code="disabled"), show_prompts=True)
    tip = ViewState(others=(held,), backend_enabled=False, mode="ask").tooltip().splitlines()
    assert tip == ["Hermes Tray", "1 interrupted turn held: auto-continue is off", "Hermes auto-continue is off"]
    mixed = ViewState(backend_enabled=None, mode="ask").tooltip().splitlines()
    assert mixed[-2:] == ["Hermes auto-continue is off in some homes", "Asks before resuming"]


def test_an_untitled_session_is_named_by_its_prompt_profile_and_time(qtbot, rec) -> None:
    """Issue 25.6: "session 20261202…" in the notification, the list, the progress row and Recent, all alike."""
    started = time.time() - 120
    engine = FakeEngine()
    engine.resume_delay = 10
    notes = RecordingNotifier()
    ctrl = Controller(engine, notes)
    r1 = rec("20261202_101500_aaaaaa", title=None, prompt_excerpt="Refactor the config parser so unknown keys warn")
    r2 = rec("20261202_101501_bbbbbb", title=None, profile="work", started_at=started,
             prompt_excerpt="Write the release notes for 2.1")
    ctrl.on_scan(ScanReport(records=(r1, r2), finished=time.time()))
    names = [t.title for t in ctrl.state.pending]
    assert names == ["“Refactor the config parser so unknown…”", "“Write the release notes for 2.1”"]
    assert "20261202" not in notes.shown[-1].body and "Refactor the config parser" in notes.shown[-1].body
    ctrl.resume(ctrl.state.pending[0].key)
    qtbot.waitUntil(lambda: bool(ctrl.state.running))
    assert ctrl.state.running[0].title == names[0]  # the progress row
    ctrl.stop(ctrl.state.running[0].key)
    qtbot.waitUntil(lambda: not ctrl.state.running, timeout=5000)
    assert ctrl.state.recent[0].title == names[0]  # Recent
    hidden = turn_item(r2, show_prompts=False)  # prompts hidden: the profile and the time name it
    assert hidden.title == f"Turn in work, started {time.strftime('%H:%M', time.localtime(started))}"
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ViewState(pending=(hidden,), show_prompts=False))
    w.details_button.setChecked(True)
    assert "Session ID: 20261202_101501_bbbbbb" in w.details.text()  # the id, on demand


def test_the_windows_say_no_internals_over_every_state(qtbot, tmp_path, monkeypatch) -> None:
    """The windows' half of tests/test_no_internals.py: over the same states on disk (a corrupt marker file, one
    that is a directory, malformed entries, a config.yaml that is a directory, a state.db that is not SQLite…),
    every text of the menu, the tooltip, the turns window (with Details open), the status window and History
    (with the journal's timings and the notifier's name in it) is free of errno text, exception class names,
    temp-file names, library names, raw floats and timing keys."""
    from PySide6.QtWidgets import QTreeWidgetItemIterator

    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray.app.status_window import StatusWindow
    from hermes_tray.engine import CoreEngine
    from hermes_tray_core.stores.ledger import ledger
    from tests.support.fixture_homes import FixtureHome
    from tests.test_no_internals import STATES, internals

    texts: list[tuple[str, str]] = []
    for n, (name, build) in enumerate(STATES.items()):
        home = FixtureHome(tmp_path / f"state-{n}" / "hermes")
        if build is not None:
            build(home)
        engine = CoreEngine([str(home.path)])
        turns, problems, extra = engine.scan(engine.homes())
        ctrl = Controller(engine, RecordingNotifier())
        ctrl.on_scan(ScanReport(records=tuple(turns), problems=tuple(problems), homes=tuple(engine.homes()),
                                extra=extra, finished=time.time()))
        state = ctrl.state
        menu = TrayMenu()
        status = StatusWindow(menu)
        w = PromptWindow()
        for widget in (menu, status, w):
            qtbot.addWidget(widget)
        menu.set_state(state)
        status.set_state(state)
        w.set_state(state)
        w.details_button.setChecked(True)
        said = [*state.tooltip().splitlines(), *_menu_texts(menu), *_window_texts(w), status.text.text()]
        for row in range(w.list.count()):
            w.list.setCurrentRow(row)
            said += [w.detail.text(), w.details.text(), w.list.item(row).toolTip()]
        texts += [(name, t) for t in said]
        (tmp_path / "tray-config" / "config.toml").unlink(missing_ok=True)
    win = HistoryWindow(lambda: ledger().turns(500), watch=[ledger().path])
    qtbot.addWidget(win)
    it = QTreeWidgetItemIterator(win.tree)
    while it.value() is not None:
        item = it.value()
        texts += [("history", item.text(c)) for c in range(win.tree.columnCount())]
        texts += [("history tooltip", item.toolTip(c)) for c in range(win.tree.columnCount())]
        it += 1
    assert any(where == "history" and t == "Sent to Hermes" for where, t in texts)  # the ledger was there
    bad = {f"{where}: {t}": found for where, text in texts for t in text.splitlines() if (found := internals(t))}
    assert not bad, bad
