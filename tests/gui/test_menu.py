"""The tray menu: what a user reads in it and what its entries do."""

from __future__ import annotations

import time

from fakes import menu_action, menu_labels

from hermes_tray.app.menu import TrayMenu
from hermes_tray.model.viewstate import RunningItem, ViewState, turn_item


def _state(rec, *, show_prompts: bool = True, **kw) -> ViewState:
    turns = (
        # the moment s1 was interrupted is known (its Hermes' end, seen); of s2 only when it started
        turn_item(rec("s1", title="Fix the flaky test", age_seconds=240, interrupted_at=time.time() - 240),
                  show_prompts=show_prompts),
        turn_item(rec("s2", title="Write the release notes", prompt_excerpt="draft notes for 2.1", age_seconds=30,
                      started_at=time.time() - 30), show_prompts=show_prompts),
    )
    return ViewState(pending=turns, show_prompts=show_prompts, **{"autostart": False, **kw})


def test_lists_each_turn_with_resume_and_skip(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(_state(rec))
    labels = menu_labels(menu)
    assert labels[0] == "2 interrupted turns"
    assert "Fix the flaky test — make test_upload stop timing … — interrupted 4 min ago" in labels
    assert "Write the release notes — draft notes for 2.1 — started 30 s ago" in labels
    assert "Resume all" in labels
    for entry in ("Hermes auto-continue", "When a turn is interrupted", "Settings…", "History…",
                  "Open log folder", "Start at login", "About Hermes Tray", "Quit"):
        assert entry in labels, entry
    sub = next(a.menu() for a in menu.actions() if a.text().startswith("Fix the flaky test"))
    assert [a.text() for a in sub.actions()][:2] == ["Resume", "Skip"]


def test_resume_and_skip_report_the_turn(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    state = _state(rec)
    menu.set_state(state)
    sub = next(a.menu() for a in menu.actions() if a.text().startswith("Write the release notes"))
    with qtbot.waitSignal(menu.resume_requested) as got:
        sub.actions()[0].trigger()
    assert got.args == [state.pending[1].key]
    with qtbot.waitSignal(menu.skip_requested) as got:
        sub.actions()[1].trigger()
    assert got.args == [state.pending[1].key]


def test_prompts_hidden_when_show_prompts_is_off(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(_state(rec, show_prompts=False))
    text = "\n".join(menu_labels(menu))
    assert "timing out" not in text and "draft notes" not in text
    assert "Fix the flaky test — interrupted 4 min ago" in text


def test_mode_and_backend_switches(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(_state(rec, mode="auto", backend_enabled=False))
    backend = menu_action(menu, "Hermes auto-continue")
    assert backend.isCheckable() and not backend.isChecked()
    assert menu_action(menu, "Resume automatically").isChecked()
    assert not menu_action(menu, "Ask me").isChecked()
    with qtbot.waitSignal(menu.mode_selected) as got:
        menu_action(menu, "Only list them").trigger()
    assert got.args == ["list"]
    with qtbot.waitSignal(menu.backend_enabled_toggled) as got:
        backend.trigger()
    assert got.args == [True]


def test_empty_and_running(qtbot) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState())
    assert menu_labels(menu)[0] == "No interrupted turns"
    assert not menu.actions()[0].isEnabled()
    menu.set_state(ViewState(running=(RunningItem("k", "Fix the flaky test", 12, "writing the answer · 7 updates"),)))
    assert menu_labels(menu)[0] == "Resuming Fix the flaky test — 0:12"
    with qtbot.waitSignal(menu.stop_requested) as got:
        menu_action(menu, "Stop for good").trigger()
    assert got.args == ["k"]


def test_not_rebuilt_under_the_pointer(qtbot, rec) -> None:
    """A menu that reshuffles while open makes people click the wrong turn: wait until it closes."""
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState())
    menu.popup(menu.pos())
    qtbot.waitUntil(menu.isVisible)
    menu.set_state(_state(rec))
    assert menu_labels(menu)[0] == "No interrupted turns"
    menu.hide()
    qtbot.waitUntil(lambda: menu_labels(menu)[0] == "2 interrupted turns")


def test_choosing_an_entry_of_a_menu_that_changed_while_open_does_what_it_says(qtbot, rec) -> None:
    """Return on Quit while a continuation's elapsed time changed under the open menu: Qt hides the menu first,
    then activates the entry; rebuilding on hide deleted the entry mid-activation (SIGSEGV on XEmbed trays)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    running = RunningItem("k", "Fix the flaky test", 12, "writing the answer")
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState(running=(running,)))
    menu.popup(menu.pos())
    qtbot.waitUntil(menu.isVisible)
    menu.set_state(ViewState(running=(RunningItem("k", "Fix the flaky test", 13, "writing the answer"),)))
    menu.setActiveAction(menu_action(menu, "Quit"))
    with qtbot.waitSignal(menu.quit_requested, timeout=2000):
        QTest.keyClick(menu, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: menu_labels(menu)[0] == "Resuming Fix the flaky test — 0:13")


def test_extra_demo_entry(qtbot) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    hits = []
    menu.add_extra_action("Demo: crash the backend", lambda: hits.append(1))
    menu_action(menu, "Demo: crash the backend").trigger()
    assert hits == [1]


def test_a_held_turn_can_be_skipped_or_turned_back_on_from_the_menu(qtbot, rec) -> None:
    """Issue 25.2. Before: with auto-continue off the menu had one entry that only opened the window."""
    held = turn_item(rec("s1", verdict="disabled", code="disabled", reason="auto-continue is disabled in config.yaml"),
                     show_prompts=True)
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState(others=(held,), backend_enabled=False, autostart=False))
    assert menu_labels(menu)[0] == "1 interrupted turn held: auto-continue is off"
    sub = next(a.menu() for a in menu.actions() if a.menu() is not None and a.data() == held.key)
    assert [a.text() for a in sub.actions()] == ["Turn auto-continue on", "Skip"]
    with qtbot.waitSignal(menu.skip_requested) as got:
        sub.actions()[1].trigger()
    assert got.args == [held.key]
    with qtbot.waitSignal(menu.enable_requested) as got:
        sub.actions()[0].trigger()
    assert got.args == [held.home]


def test_an_unreadable_store_never_reads_no_interrupted_turns(qtbot) -> None:
    """Issue 25.8. Before: "No interrupted turns" was the first menu entry and tooltip line above the warning."""
    from hermes_tray.model.viewstate import Problem

    bad = Problem("default: /h/.hermes/desktop/interrupted_turns.json is corrupt", folder="/h/.hermes/desktop",
                  kind="markers", home="/h/.hermes")
    state = ViewState(problems=(bad,))
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(state)
    assert menu_labels(menu)[0] == "Cannot read the interrupted turns in /h/.hermes"
    tip = state.tooltip().splitlines()
    assert tip[1] == "Cannot read the interrupted turns in /h/.hermes" and "No interrupted turns" not in tip


def test_start_at_login_greyed_out_says_why(qtbot) -> None:
    """Issue 25.10. Before: greyed out in the demo, with no reason."""
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_loading(False)
    menu.set_state(ViewState(autostart=None, demo=True))
    login = menu_action(menu, "Start at login — not in the demo")
    assert login is not None and not login.isEnabled() and "every login" in login.toolTip()
    menu.set_state(ViewState(autostart=None))
    assert menu_action(menu, "Start at login — not available here") is not None
    menu.set_state(ViewState(autostart=False))
    assert menu_action(menu, "Start at login").isEnabled()


def test_a_storm_lists_ten_turns_and_counts_the_rest(qtbot, rec) -> None:
    """A 10,000-entry marker file must not build 10,000 submenus: ten, then how many more."""
    turns = tuple(turn_item(rec(f"s{i}"), show_prompts=True) for i in range(25))
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState(pending=turns, autostart=False))
    assert sum(1 for a in menu.actions() if a.menu() is not None and a.data()) == 10
    assert "15 more turns in the turns window…" in menu_labels(menu)
