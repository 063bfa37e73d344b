"""The turns window never dead-ends: turns that are not waiting are listed under "Recent" with what
happened, why and what the user can still do (one button where there is something to do), and every
control is named for assistive technology and reachable from the keyboard (Qt's accessibility API).
"""

from __future__ import annotations

import time

import pytest
from fakes import FakeEngine, RecordingNotifier
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QAbstractButton, QAbstractItemView, QComboBox, QHeaderView, QSpinBox, QWidget

from hermes_tray.app.prompt_window import PromptWindow
from hermes_tray.contract import Outcome, RunResult
from hermes_tray.controller import Controller
from hermes_tray.model.viewstate import ViewState, recent_items, turn_item
from hermes_tray.watch.detector import ScanReport


def test_auto_continue_off_lists_the_turns_with_the_reason_and_one_way_to_act(qtbot, rec) -> None:
    """Before: with auto-continue off, waiting turns vanished ("No interrupted turns")."""
    held = turn_item(rec("s1", verdict="disabled", code="disabled", reason="auto-continue is disabled in config.yaml"),
                     show_prompts=True)
    state = ViewState(others=(held,), backend_enabled=False, recent=recent_items((held,)))
    assert "1 interrupted turn held: auto-continue is off" in state.tooltip()
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    w.show()
    assert w.header.text() == "1 interrupted turn held"
    assert w.recent_list.isVisible() and w.recent_list.count() == 1
    item = w.recent_list.item(0)
    assert "Fix the flaky test — Held: auto-continue is off" in item.text()
    assert "Turn auto-continue on to resume it, or skip it." in item.text()
    assert item.toolTip() == "auto-continue is disabled in config.yaml"  # the engine's reason: on demand
    assert w.recent_button.isVisible() and w.recent_button.text() == "Turn auto-continue &on"
    with qtbot.waitSignal(w.enable_requested) as got:
        w.recent_button.click()
    assert got.args == [str(held.home)]


def test_gave_up_and_finished_turns_stay_visible_under_recent(qtbot, rec) -> None:
    """Before: "Show" on "Hermes gave up on a turn" opened a window saying "Nothing is waiting"."""
    engine = FakeEngine()
    engine.resume_outcome = RunResult(Outcome.COMPLETED, "done", answer="ok")
    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(records=(rec("s1"),), finished=time.time()))
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.resume(ctrl.state.pending[0].key)
    ctrl.on_scan(ScanReport(records=(rec("s2", title="Old one", verdict="exhausted", attempts=2,
                                         reason="2 of 2 continuations used"),), finished=time.time()))
    whats = [(r.title, r.what, r.actions) for r in ctrl.state.recent]
    assert ("Old one", "Gave up after 2 tries", ("skip",)) in whats
    assert ("Fix the flaky test", "Resumed and finished", ()) in whats
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ctrl.state)
    assert w.header.text() == "No interrupted turns" and w.recent_list.count() == 2
    w.recent_list.setCurrentRow([r.title for r in ctrl.state.recent].index("Old one"))
    assert not w.recent_skip_button.isHidden() and w.recent_button.isHidden()
    with qtbot.waitSignal(w.skip_requested) as got:
        w.recent_skip_button.click()
    assert got.args == [ctrl.state.recent[0].key]


def test_a_held_turn_can_be_skipped_by_button_delete_and_right_click(qtbot, rec) -> None:
    """Issue 25.2. Before: with auto-continue off the window said "or skip it" but offered only "Turn
    auto-continue on"; right-click and Delete did nothing on it."""
    held = turn_item(rec("s1", verdict="disabled", code="disabled"), show_prompts=True)
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ViewState(others=(held,), backend_enabled=False, recent=recent_items((held,))))
    w.show()
    qtbot.waitExposed(w)
    assert w.recent_button.isVisible() and w.recent_skip_button.isVisible()
    with qtbot.waitSignal(w.skip_requested) as got:
        w.recent_skip_button.click()
    assert got.args == [held.key]
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow)
    w.recent_list.setFocus()
    with qtbot.waitSignal(w.skip_requested) as got:
        qtbot.keyClick(w.recent_list, Qt.Key.Key_Delete)
    assert got.args == [held.key]
    menu = w.context_menu_for("recent")
    assert [a.text() for a in menu.actions()] == ["Turn auto-continue on", "Skip", "Copy session ID"]
    with qtbot.waitSignal(w.skip_requested) as got:
        menu.actions()[1].trigger()
    assert got.args == [held.key]


def test_recent_follows_skip(qtbot, rec) -> None:
    """Issue 25.4. Before: after Skip, Recent still showed the older "Not resumed …" for that turn."""
    engine = FakeEngine()
    engine.resume_outcome = RunResult(Outcome.REFUSED, "Not resumed: the marker changed", code="changed")
    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(records=(rec("s1"),), finished=time.time()))
    key = ctrl.state.pending[0].key
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.resume(key)
    assert [(r.what, r.why) for r in ctrl.state.recent] == [("Not resumed", "It changed since it was shown.")]
    ctrl.on_scan(ScanReport(records=(rec("s1"),), finished=time.time()))  # still waiting: asked again
    with qtbot.waitSignal(ctrl.skip_done, timeout=5000):
        ctrl.skip(key)
    ctrl.on_scan(ScanReport(records=(), finished=time.time()))  # its marker is gone
    assert [(r.key, r.what) for r in ctrl.state.recent] == [(key, "Skipped")]


def _controls(root: QWidget) -> list[QWidget]:
    kinds = (QAbstractButton, QAbstractItemView, QComboBox, QSpinBox)
    # a view's header is announced as part of its view (its column names), not as a control
    return [w for w in root.findChildren(QWidget) if isinstance(w, kinds) and not isinstance(w, QHeaderView)
            and not w.isHidden()
            and w.isVisibleTo(root)]


def _name(w: QWidget) -> str:
    iface = QAccessible.queryAccessibleInterface(w)
    return iface.text(QAccessible.Text.Name) if iface is not None else ""


def _windows(qtbot, tmp_path, rec):
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray.app.settings_dialog import SettingsDialog
    from hermes_tray.app.status_window import StatusWindow

    pending = (turn_item(rec("s1"), show_prompts=True),)
    prompt = PromptWindow()
    prompt.set_state(ViewState(pending=pending, recent=recent_items(
        (turn_item(rec("s2", verdict="stale"), show_prompts=True),))))
    prompt.list.setCurrentRow(0)
    from hermes_tray.engine import CoreEngine
    from hermes_tray_core.hermes.homes import discover_homes

    home = tmp_path / "hermes"
    home.mkdir()
    ctrl = Controller(CoreEngine([str(home)]), RecordingNotifier())
    ctrl.on_scan(ScanReport(homes=tuple(discover_homes(explicit=[str(home)]))))
    from hermes_tray_core import TurnId, home_path

    first = TurnId(home_path(tmp_path), "s1", 1.0, 0)
    out = {"turns": prompt, "history": HistoryWindow(lambda: [{"turn": first, "last": first, "events": [
        {"event": "notified", "home": str(tmp_path), "session_key": "s1", "started_at": 1.0, "created_at": 2.0}]}]),
        "settings": SettingsDialog(ctrl), "status": StatusWindow()}
    for w in out.values():
        qtbot.addWidget(w)
        w.show()
    return out


@pytest.mark.parametrize("name", ["turns", "history", "settings", "status"])
def test_every_control_has_an_accessible_name(qtbot, tmp_path, rec, name) -> None:
    win = _windows(qtbot, tmp_path, rec)[name]
    unnamed = [f"{type(w).__name__}({getattr(w, 'text', lambda: '')()!r})" for w in _controls(win) if not _name(w)]
    assert not unnamed, unnamed


@pytest.mark.parametrize("name", ["turns", "history", "settings"])
def test_the_keyboard_reaches_every_control(qtbot, tmp_path, rec, name) -> None:
    win = _windows(qtbot, tmp_path, rec)[name]
    qtbot.waitExposed(win)
    win.activateWindow()
    # every enabled control can take Tab focus (one that cannot would never be reached, nor listed here)
    untabbable = [type(w).__name__ + ":" + _name(w) for w in _controls(win)
                  if w.isEnabled() and not w.focusPolicy() & Qt.FocusPolicy.TabFocus]
    assert not untabbable, untabbable
    wanted = {id(w) for w in _controls(win) if w.isEnabled()}
    reached = set()
    first = win.focusWidget() or win
    first.setFocus()
    for _ in range(60):
        w = win.focusWidget()
        if w is not None:
            reached.add(id(w))
        win.focusNextChild()
    missing = [type(w).__name__ + ":" + _name(w) for w in _controls(win) if id(w) in wanted - reached]
    assert not missing, missing
