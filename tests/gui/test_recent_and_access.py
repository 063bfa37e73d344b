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
from hermes_tray.app.viewstate import ViewState, recent_items, turn_item
from hermes_tray.contract import Outcome, RunResult
from hermes_tray.controller import Controller
from hermes_tray.watch.detector import ScanReport


def test_auto_continue_off_lists_the_turns_with_the_reason_and_one_way_to_act(qtbot, rec) -> None:
    """Before: with auto-continue off, waiting turns vanished ("No interrupted turns")."""
    held = turn_item(rec("s1", verdict="disabled", reason="auto-continue is disabled in config.yaml"),
                     show_prompts=True)
    state = ViewState(others=(held,), backend_enabled=False, recent=recent_items((held,)))
    assert "1 interrupted turn not continued: auto-continue is off" in state.tooltip()
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    w.show()
    assert w.header.text() == "1 interrupted turn not continued"
    assert w.recent_list.isVisible() and w.recent_list.count() == 1
    row = w.recent_list.item(0).text()
    assert "Fix the flaky test" in row and "auto-continue is off" in row
    assert "Why: auto-continue is disabled in config.yaml" in row
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
    ctrl.on_scan(ScanReport(records=(rec("s2", title="Old one", verdict="exhausted",
                                         reason="2 of 2 continuations used"),), finished=time.time()))
    whats = [(r.title, r.what, r.action) for r in ctrl.state.recent]
    assert ("Old one", "Hermes gave up on it (its continuations were used up)", "skip") in whats
    assert ("Fix the flaky test", "Resumed and finished", "") in whats
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ctrl.state)
    assert w.header.text() == "No interrupted turns" and w.recent_list.count() == 2
    w.recent_list.setCurrentRow([r.title for r in ctrl.state.recent].index("Old one"))
    with qtbot.waitSignal(w.skip_requested) as got:
        w.recent_button.click()
    assert got.args == [ctrl.state.recent[0].key]


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
    from hermes_tray.engine import CoreEngine
    from hermes_tray_core.homes import discover_homes

    home = tmp_path / "hermes"
    home.mkdir()
    ctrl = Controller(CoreEngine([str(home)]), RecordingNotifier())
    ctrl.on_scan(ScanReport(homes=tuple(discover_homes(explicit=[str(home)]))))
    out = {"turns": prompt, "history": HistoryWindow(lambda: [
        {"event": "notified", "home": str(tmp_path), "session_key": "s1", "started_at": 1.0, "created_at": 2.0}]),
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
