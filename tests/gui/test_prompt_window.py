"""The prompt window: keyboard-operable decisions, live updates, progress with Stop, prompt privacy."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from hermes_tray.app.prompt_window import PromptWindow
from hermes_tray.model.viewstate import RunningItem, ViewState, turn_item


def _window(qtbot) -> PromptWindow:
    w = PromptWindow()
    qtbot.addWidget(w)
    return w


def _turns(rec, show=True):
    return (
        turn_item(rec("s1", title="Fix the flaky test", attempts=1, profile="work", interrupted_at=time.time() - 300),
                  show_prompts=show),
        turn_item(rec("s2", title="Write the release notes", prompt_excerpt="draft notes for 2.1"), show_prompts=show),
    )


def _all_text(w: PromptWindow) -> str:
    parts = [w.list.item(i).text() for i in range(w.list.count())]
    parts += [lbl.text() for lbl in w.findChildren(QLabel)]
    return "\n".join(parts)


def test_shows_turns_with_title_excerpt_when_attempts_and_profile(qtbot, rec) -> None:
    w = _window(qtbot)
    w.set_state(ViewState(pending=_turns(rec)))
    assert w.header.text() == "2 interrupted turns"
    first = w.list.item(0).text()
    assert "Fix the flaky test" in first
    assert "“make test_upload stop timing out on CI”" in first
    assert "Interrupted 5 min ago · 1 try so far · work profile" in first
    assert "Started 5 min ago" in w.list.item(1).text()  # when it was interrupted is not known: never "Interrupted"
    assert w.resume_button.isDefault()


def test_enter_resumes_the_selected_turn(qtbot, rec) -> None:
    w = _window(qtbot)
    state = ViewState(pending=_turns(rec))
    w.set_state(state)
    w.present(activate=True)
    qtbot.waitExposed(w)
    qtbot.waitUntil(w.isActiveWindow)
    w.list.setFocus()
    qtbot.keyClick(w.list, Qt.Key.Key_Down)
    with qtbot.waitSignal(w.resume_requested) as got:
        qtbot.keyClick(w.list, Qt.Key.Key_Return)
    assert got.args == [state.pending[1].key]
    with qtbot.waitSignal(w.skip_requested) as got:
        qtbot.keyClick(w.list, Qt.Key.Key_Delete)
    assert got.args == [state.pending[1].key]
    with qtbot.waitSignal(w.disable_requested):
        w.disable_button.click()


def test_live_update_keeps_the_selection_on_its_turn(qtbot, rec) -> None:
    w = _window(qtbot)
    turns = _turns(rec)
    w.set_state(ViewState(pending=turns))
    w.list.setCurrentRow(1)
    newcomer = turn_item(rec("s0", title="A brand new one"), show_prompts=True)
    w.set_state(ViewState(pending=(newcomer, *turns)))
    assert w.selected_key() == turns[1].key
    w.set_state(ViewState(pending=(newcomer,)))  # the selected turn vanished (resumed elsewhere)
    assert w.selected_key() == newcomer.key
    w.set_state(ViewState())
    assert w.header.text() == "No interrupted turns"
    assert not w.resume_button.isEnabled()


def test_running_continuation_shows_progress_and_stop(qtbot) -> None:
    w = _window(qtbot)
    w.set_state(ViewState(running=(RunningItem("k1", "Fix the flaky test", 65, "writing the answer · 12 updates"),)))
    row = w._running_rows["k1"]
    assert row.label.text() == "Resuming Fix the flaky test"
    assert row.status.text() == "1:05 · writing the answer · 12 updates"
    # before pressing it, the row itself says what Stop means (Hermes' own Stop: the turn ends for good)
    assert row.stop_button.text() == "Stop for good"
    assert "for good" in row.hint.text() and "It is not resumed again." in row.hint.text()
    assert not row.hint.isHidden()
    with qtbot.waitSignal(w.stop_requested) as got:
        row.stop_button.click()
    assert got.args == ["k1"]
    assert w.button_row.isHidden(), "no decision to take while only a continuation runs"
    w.set_state(ViewState())
    assert "k1" not in w._running_rows


def test_prompt_text_never_shown_when_show_prompts_off(qtbot, rec) -> None:
    w = _window(qtbot)
    w.set_state(ViewState(pending=_turns(rec, show=False), show_prompts=False))
    text = _all_text(w)
    assert "timing out" not in text and "draft notes" not in text
    assert "Prompt hidden" in text


def test_shown_by_a_notification_it_does_not_take_focus(qtbot, rec) -> None:
    w = _window(qtbot)
    w.set_state(ViewState(pending=_turns(rec)))
    w.present(activate=False)
    assert w.testAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
    w.hide()
    w.present(activate=True)
    assert not w.testAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)


def test_answer_of_a_finished_turn(qtbot) -> None:
    w = _window(qtbot)
    w.show_answer("Fix the flaky test", "Done: the upload test now mocks the network.\nDetails…")
    assert not w.answer.isHidden()
    assert w.answer.toPlainText().startswith("Done: the upload test")


def _drawn(w: PromptWindow) -> list:
    """The window's visible leaf widgets (those that paint their own content), with their rectangles in it."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QAbstractButton, QAbstractScrollArea, QProgressBar

    out = []
    for child in w.findChildren(QWidget):
        if not child.isVisibleTo(w) or not isinstance(child, (QLabel, QAbstractButton, QAbstractScrollArea,
                                                               QProgressBar)):
            continue
        if any(isinstance(p, QAbstractScrollArea) for p in _parents(child, w)):
            continue  # a scroll area's own parts
        out.append((child, QRect(child.mapTo(w, child.rect().topLeft()), child.size())))
    return out


def _name(widget) -> str:
    return f"{type(widget).__name__} {getattr(widget, 'text', lambda: '')()[:30]!r}"


def _parents(child, top):
    p = child.parentWidget()
    while p is not None and p is not top:
        yield p
        p = p.parentWidget()


def test_nothing_is_drawn_over_anything_with_everything_open(qtbot, rec) -> None:
    """A list, Details, Recent and a running continuation, all at once in a 560×380 window: the window grows with
    its content, so each widget gets the room it needs and none is drawn over another (before: the running
    continuation's lines were drawn over each other)."""
    import dataclasses

    from hermes_tray.model.viewstate import RecentItem

    w = _window(qtbot)
    w.resize(560, 380)
    facts = ("Ran 4 tool calls in at least 2 min; then ran terminal, ran read_file, wrote 2 paragraphs",
             "Why it stopped: Hermes stopped (cause unknown)")
    turns = tuple(dataclasses.replace(t, facts=facts) for t in _turns(rec))
    recent = tuple(RecentItem(f"r{i}", f"Turn {i}", "Skipped", why="You skipped it.", since=0.0) for i in range(3))
    w.set_state(ViewState(pending=turns, recent=recent,
                          running=(RunningItem("k1", "Fix the flaky test", 65, "writing the answer · 12 updates"),)))
    w.details_button.setChecked(True)
    w.show()
    qtbot.waitExposed(w)
    qtbot.wait(50)
    drawn = _drawn(w)
    for i, (a, ra) in enumerate(drawn):
        for b, rb in drawn[i + 1:]:
            if not (a.isAncestorOf(b) or b.isAncestorOf(a)):
                assert not ra.intersects(rb), f"{_name(a)} {ra} is drawn over {_name(b)} {rb}"
    for widget, r in drawn:
        if isinstance(widget, QLabel) and widget.text():
            need = widget.heightForWidth(r.width()) if widget.wordWrap() else widget.sizeHint().height()
            assert r.height() >= need, f"{widget.text()[:40]!r}: {r.height()} px for {need}"
    assert w.width() >= 560 and w.height() >= 380
