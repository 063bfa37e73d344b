"""Problems are states: a corrupt marker store, a missing home, a failed start are said where the user looks.

Real homes and the real engine: a corrupt ``interrupted_turns.json`` on disk, the scan the tray
runs, the controller's state, and the widgets built from it.
"""

from __future__ import annotations

from pathlib import Path

from fakes import RecordingNotifier, menu_labels

from hermes_tray.app.menu import LABEL_CHARS, TrayMenu
from hermes_tray.app.prompt_window import PromptWindow
from hermes_tray.app.status_window import StatusWindow
from hermes_tray.controller import Controller
from hermes_tray.engine import CoreEngine
from hermes_tray.model.viewstate import Problem, RunningItem, ViewState
from hermes_tray.watch.detector import ScanReport
from tests.support.fixture_homes import FixtureHome


def _state_of(engine: CoreEngine, qtbot) -> ViewState:
    homes = engine.homes()
    turns, problems, extra = engine.scan(homes)
    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(records=tuple(turns), problems=tuple(problems), homes=tuple(homes), extra=extra))
    return ctrl.state


def test_corrupt_marker_store_is_an_attention_state_with_a_banner(qtbot, tmp_path: Path) -> None:
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Fix the flaky test")
    home.marker_file.parent.mkdir(parents=True, exist_ok=True)
    home.marker_file.write_text('{"s1": {"prompt": "half a wri')  # torn: not JSON
    state = _state_of(CoreEngine([str(home.path)]), qtbot)

    assert state.icon_state == "attention" and state.needs_attention
    tip = state.tooltip().splitlines()
    # Issue 25.8: the tray does not know that nothing waits there, so it never says "No interrupted turns"
    assert "No interrupted turns" not in tip
    assert tip[1] == f"Cannot read the interrupted turns in {home.path}", tip
    assert any(line.startswith("⚠ ") and "corrupt" in line for line in tip), tip
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_loading(False)
    menu.set_state(state)
    assert menu_labels(menu)[0].startswith("Cannot read the interrupted turns in ")

    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    w.show()
    assert w.header.text() == "Interrupted turns cannot all be seen"
    assert w.banner.isVisible()
    assert "corrupt" in w.banner.text.text() and "hermes-tray doctor" in w.banner.text.text()
    assert w.banner.folder_button.isVisible()
    with qtbot.waitSignal(w.open_folder_requested) as got:
        w.banner.folder_button.click()
    assert got.args == [str(home.path / "desktop")]


def test_menu_labels_are_elided_with_the_full_text_in_the_tooltip(qtbot) -> None:
    long = ("default: /home/someone/with/a/very/long/path/.hermes/desktop/interrupted_turns.json is corrupt "
            "(Expecting value); interrupted turns in this home cannot be seen. Hermes' next write will replace it")
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState(problems=(Problem(long, folder="/home/someone/.hermes/desktop"),),
                             running=(RunningItem("k", "A title that goes on and on " * 4, 3, "working"),)))
    for act in menu.actions():
        assert len(act.text()) <= LABEL_CHARS + 2, act.text()  # "⚠ " prefix
    problem = next(a for a in menu.actions() if a.text().startswith("⚠"))
    assert problem.toolTip() == long and problem.text().endswith("…")
    assert problem.isEnabled()  # it opens the turns window, where the banner is
    with qtbot.waitSignal(menu.open_requested):
        problem.trigger()


def test_no_home_says_so_and_where_it_watches(qtbot, tmp_path: Path) -> None:
    missing = tmp_path / "no-hermes-yet"
    state = _state_of(CoreEngine([str(missing)]), qtbot)
    assert not state.homes_found and state.icon_state == "idle"
    assert not state.attention_problems  # a home not made yet is not a fault
    text = state.no_home_text()
    assert "No Hermes home found" in text and str(missing) in text
    assert text in state.tooltip()

    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(state)
    assert menu_labels(menu)[0].startswith("No Hermes home found yet")
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    assert w.header.text() == "No Hermes home found" and "watching" in w.subheader.text()

    # Hermes runs for the first time: the home appears and the next scan says the usual
    FixtureHome(missing).add_session("s1", title="Hello")
    state = _state_of(CoreEngine([str(missing)]), qtbot)
    assert state.homes_found and state.tooltip().splitlines()[1] == "No interrupted turns"


def test_status_window_shows_a_running_continuation_uncut(qtbot) -> None:
    sw = StatusWindow()
    qtbot.addWidget(sw)
    sw.show()
    sw.set_state(ViewState(running=(RunningItem("k", "Refactor the config parser so unknown keys warn", 75,
                                                 "writing the answer · 12 updates"),)))
    label = sw.text
    needed = label.heightForWidth(label.width())
    assert label.height() >= needed, (label.height(), needed)
    assert label.width() >= label.fontMetrics().horizontalAdvance("Resuming Refactor the config")
