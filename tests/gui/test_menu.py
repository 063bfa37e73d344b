"""The tray menu: what a user reads in it and what its entries do."""

from __future__ import annotations

from hermes_tray.app.menu import TrayMenu
from hermes_tray.app.viewstate import RunningItem, ViewState, turn_item


def _state(rec, *, show_prompts: bool = True, **kw) -> ViewState:
    turns = (
        turn_item(rec("s1", title="Fix the flaky test", age_seconds=240), show_prompts=show_prompts),
        turn_item(rec("s2", title="Write the release notes", prompt_excerpt="draft notes for 2.1", age_seconds=30),
                  show_prompts=show_prompts),
    )
    return ViewState(pending=turns, show_prompts=show_prompts, **kw)


def test_lists_each_turn_with_resume_and_skip(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(_state(rec))
    labels = menu.action_labels()
    assert labels[0] == "2 interrupted turns"
    assert "Fix the flaky test — make test_upload stop timing … — 4 min ago" in labels
    assert "Write the release notes — draft notes for 2.1 — 30 s ago" in labels
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
    text = "\n".join(menu.action_labels())
    assert "timing out" not in text and "draft notes" not in text
    assert "Fix the flaky test — 4 min ago" in text


def test_mode_and_backend_switches(qtbot, rec) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(_state(rec, mode="auto", backend_enabled=False))
    backend = menu.find_action("Hermes auto-continue")
    assert backend.isCheckable() and not backend.isChecked()
    assert menu.find_action("Resume automatically").isChecked()
    assert not menu.find_action("Ask me").isChecked()
    with qtbot.waitSignal(menu.mode_selected) as got:
        menu.find_action("Only list them").trigger()
    assert got.args == ["list"]
    with qtbot.waitSignal(menu.backend_enabled_toggled) as got:
        backend.trigger()
    assert got.args == [True]


def test_empty_and_running(qtbot) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState())
    assert menu.action_labels()[0] == "No interrupted turns"
    assert not menu.actions()[0].isEnabled()
    menu.set_state(ViewState(running=(RunningItem("k", "Fix the flaky test", 12, "writing the answer · 7 updates"),)))
    assert menu.action_labels()[0] == "Resuming Fix the flaky test — 0:12"
    with qtbot.waitSignal(menu.stop_requested) as got:
        menu.find_action("Stop (ends the turn for good)").trigger()
    assert got.args == ["k"]


def test_not_rebuilt_under_the_pointer(qtbot, rec) -> None:
    """A menu that reshuffles while open makes people click the wrong turn: wait until it closes."""
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ViewState())
    menu.popup(menu.pos())
    qtbot.waitUntil(menu.isVisible)
    menu.set_state(_state(rec))
    assert menu.action_labels()[0] == "No interrupted turns"
    menu.hide()
    qtbot.waitUntil(lambda: menu.action_labels()[0] == "2 interrupted turns")


def test_extra_demo_entry(qtbot) -> None:
    menu = TrayMenu()
    qtbot.addWidget(menu)
    hits = []
    menu.add_extra_action("Demo: crash the backend", lambda: hits.append(1))
    menu.find_action("Demo: crash the backend").trigger()
    assert hits == [1]
