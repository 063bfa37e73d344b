"""Turns tell apart at a glance: the menu, the turns window and the notifications name each waiting turn by
what differs between it and the others listed (the part of the prompt, else the time), never the same text
twice in one line; a notification's title says what happened to which turn ("Interrupted: <name>"), so the
titles of separate notes differ, and its body gives the facts without naming the turn again."""

from __future__ import annotations

import time

from fakes import FakeEngine, RecordingNotifier

from hermes_tray.app.menu import TrayMenu
from hermes_tray.format import repeats, tell_apart
from hermes_tray.notify.coalesce import turn_names
from hermes_tray.watch.detector import ScanReport

SHARED = "SLOW: please refactor the configuration parser module so that "  # 60+ characters alike
PROMPTS = (SHARED + "unknown keys warn instead of raising", SHARED + "comments survive a round trip",
           SHARED + "unknown keys warn instead of raising (round 2)")


def _turns(rec, **fields):
    assert all(p[:60] == PROMPTS[0][:60] for p in PROMPTS)
    return [rec(f"s{n}", title=None, prompt_excerpt=p, started_at=time.time() - 60 * (3 - n), **fields)
            for n, p in enumerate(PROMPTS)]


def _menu_turn_labels(menu: TrayMenu) -> list[str]:
    return [a.text() for a in menu.actions() if a.menu() is not None and a.data()]


def test_three_untitled_turns_alike_for_60_characters_read_apart_in_the_menu_and_the_notifications(qtbot, rec):
    """Before: "SLOW: please refactor the parser … — SLOW: please refactor the par… — 11 s ago" for each: the
    prompt twice, both cut before the part that differs; the notification said the prompt in its title and
    again in its body; then every note's title was the same "Hermes turn interrupted"."""
    engine = FakeEngine()
    notes = RecordingNotifier()
    from hermes_tray.controller import Controller

    ctrl = Controller(engine, notes)
    clock = [100.0]
    ctrl.model.notes.clock = lambda: clock[0]
    turns = _turns(rec)
    for n in range(1, 4):  # interrupted one after the other: a notification each
        ctrl.on_scan(ScanReport(records=tuple(turns[:n]), finished=time.time()))
        clock[0] += 5
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(ctrl.state)
    labels = _menu_turn_labels(menu)
    assert len(labels) == 3 and len(set(labels)) == 3, labels
    for label in labels:
        parts = label.split(" — ")[:-1]  # the age is the last part
        assert not any(repeats(a, b) for i, a in enumerate(parts) for b in parts[i + 1:]), label
    assert any("(round 2)" in x for x in labels) and any("comments survive" in x for x in labels), labels

    shown = [n for n in notes.shown if n.kind == "waiting"]
    assert len(shown) == 3
    assert len({n.title for n in shown}) == 3, [n.title for n in shown]  # separate notes, different titles
    for n in shown:
        what, _, name = n.title.partition(": ")
        assert what == "Interrupted" and name  # what happened, to which turn
        lines = n.body.splitlines()
        assert not any(repeats(name, line) for line in lines), (name, lines)  # the body never names it again
        assert not any(repeats(a, b) for i, a in enumerate(lines) for b in lines[i + 1:])
    assert [n.title.partition(": ")[2] for n in shown[1:]] == [t.title for t in ctrl.state.pending[1:]]  # as listed


def test_a_storm_of_such_turns_names_each_apart_in_its_one_notification(qtbot, rec):
    from hermes_tray.controller import Controller

    notes = RecordingNotifier()
    ctrl = Controller(FakeEngine(), notes)
    ctrl.on_scan(ScanReport(records=tuple(_turns(rec)), finished=time.time()))
    note = notes.shown[-1]
    assert note.title == "3 Hermes turns interrupted"
    names = [t.title for t in ctrl.state.pending]
    assert len(set(names)) == 3 and note.body == ", ".join(names)


def test_prompts_hidden_or_equal_are_told_apart_by_their_time_then_a_number(rec):
    at = time.mktime((2026, 12, 3, 14, 2, 5, 0, 0, -1))
    hidden = turn_names([rec("a", title=None, started_at=at), rec("b", title=None, started_at=at + 1)])
    assert hidden == ["Turn started 14:02:05", "Turn started 14:02:06"]
    same = turn_names([rec("a", title=None, prompt_excerpt="do it", started_at=at - 120),
                       rec("b", title=None, prompt_excerpt="do it", started_at=at)], show_prompts=True)
    assert same == ["“do it”, started 14:00", "“do it”, started 14:02"]
    twins = turn_names([rec("a", title="Fix CI", started_at=at), rec("b", title="Fix CI", started_at=at)])
    assert twins == ["Fix CI, started 14:02:05 (1 of 2)", "Fix CI, started 14:02:05 (2 of 2)"]
    titled = turn_names([rec("a", title="Demo: refactor the config parser and test it all", prompt_excerpt=PROMPTS[0]),
                         rec("b", title="Demo: refactor the config parser and test it all",
                             prompt_excerpt=PROMPTS[1])], show_prompts=True)
    assert len(set(titled)) == 2 and all(len(t) <= 44 for t in titled), titled


def test_tell_apart_keeps_what_differs_within_the_width():
    out = tell_apart(PROMPTS, 42)
    assert len(set(out)) == 3 and all(len(x) <= 42 for x in out)
    assert out[1].startswith("SLOW: please … comments survive") and "(round 2)" in out[2]
    assert tell_apart(["one", "two"], 42) == ["one", "two"]  # nothing alike: as they are
