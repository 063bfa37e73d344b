"""History: one row per interrupted turn, from the real ledger (real SQLite on disk).

Before: a raw event log (notified / approved / dispatched / completed rows), the home column
``default`` on some rows and a full path on others, Detail always empty.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from hermes_tray.app.history_window import COLUMNS, TURN_ROLE, HistoryWindow
from hermes_tray_core.stores.ledger import ledger
from tests.support import book


def _journal(tmp_path: Path) -> tuple[str, str]:
    root = tmp_path / ".hermes"
    work = root / "profiles" / "work"
    for h in (root, work):
        h.mkdir(parents=True)
    t0 = time.time() - 600
    d = book
    # a turn resumed (by the user) and finished in the running backend
    for ev, extra in (("notified", {"via": "desktop-notifier"}), ("approved", {"via": "tray-notification"}),
                      ("dispatched", {"attempt": 1, "ran_in": "running-backend"}),
                      ("completed", {"where": "in your running Hermes (pid 4242)"})):
        d.record(ev, home=str(root), session_key="s-done", started_at=t0, **extra)
    # a turn skipped, in the work profile
    d.record("notified", home=str(work), session_key="s-skip", started_at=t0 + 1)
    d.record("skipped", home=str(work), session_key="s-skip", started_at=t0 + 1, via="tray-menu")
    # a turn Hermes gave up on after two continuations
    for ev, extra in (("dispatched", {"attempt": 1}), ("failed", {"outcome": "crashed", "reason": "backend died"}),
                      ("dispatched", {"attempt": 2}), ("gave-up", {"reason": "attempt 2 of 2 crashed"})):
        d.record(ev, home=str(root), session_key="s-gone", started_at=t0 + 2, **extra)
    # a turn still waiting
    d.record("notified", home=str(root), session_key="s-wait", started_at=t0 + 3)
    return str(root.resolve()), str(work.resolve())


def _key(win: HistoryWindow, item) -> str:
    return next(t.session_key for t in win._turns if id(t) == item.data(0, TURN_ROLE))


def _rows(win: HistoryWindow) -> dict[str, list[str]]:
    t = win.tree
    return {_key(win, t.topLevelItem(r)): [t.topLevelItem(r).text(c) for c in range(len(COLUMNS))]
            for r in range(t.topLevelItemCount()) if t.topLevelItem(r).data(0, TURN_ROLE) is not None}


def test_one_row_per_turn_with_what_happened_and_where(qtbot, tmp_path) -> None:
    root, work = _journal(tmp_path)
    waiting = {(root, "s-wait")}
    win = HistoryWindow(lambda: ledger().turns(500),
                        title_for=lambda h, k: "Fix the flaky test" if k == "s-done" else None,
                        pending=lambda ident: (str(ident.home), ident.key) in waiting)
    qtbot.addWidget(win)
    rows = _rows(win)
    assert set(rows) == {"s-done", "s-skip", "s-gone", "s-wait"}  # 12 events, 4 turns
    assert rows["s-done"][0] == "Fix the flaky test"
    assert rows["s-done"][3] == "Resumed and finished"
    assert rows["s-done"][4] == "Your running Hermes"  # the pid is in its tooltip
    assert rows["s-skip"][1] == "work" and rows["s-skip"][3] == "Skipped"
    assert rows["s-done"][1] == "default"  # one spelling per home, never a path in one row and a name in another
    assert rows["s-gone"][3] == "Gave up after 2 tries"
    assert rows["s-wait"][3] == "Waiting for you"
    assert all(r[2].startswith("Started ") for r in rows.values())  # when each was interrupted is not known
    assert win.summary.text() == "4 interrupted turns, newest first"

    # the event trail on expand
    done = next(win.tree.topLevelItem(i) for i in range(4) if _key(win, win.tree.topLevelItem(i)) == "s-done")
    assert done.toolTip(4) == "in your running Hermes (pid 4242)" and "Session ID: s-done" in done.toolTip(0)
    assert [done.child(i).text(0) for i in range(done.childCount())] == ["You were told", "You chose Resume",
                                                                          "Sent to Hermes", "Finished"]

    # filter by home
    win.home_filter.setCurrentIndex(win.home_filter.findData(work))
    assert set(_rows(win)) == {"s-skip"}
    win.home_filter.setCurrentIndex(0)

    # copy the session id; "Resume again" only for a turn resumed before that waits now
    waiting.add((root, "s-done"))  # its marker is back: it waits again
    for i in range(win.tree.topLevelItemCount()):
        item = win.tree.topLevelItem(i)
        win.tree.setCurrentItem(item)
        key = _key(win, item)
        assert win.resume_button.isEnabled() == (key == "s-done"), key  # s-wait was never resumed
    win.copy_button.click()
    assert QGuiApplication.clipboard().text() == win.selected_turn().session_key
    again = next(win.tree.topLevelItem(i) for i in range(4) if _key(win, win.tree.topLevelItem(i)) == "s-done")
    win.tree.setCurrentItem(again)
    with qtbot.waitSignal(win.resume_requested) as got:
        win.resume_button.click()
    assert got.args == [win.selected_turn().last] and got.args[0].key == "s-done" and str(got.args[0].home) == root


def test_history_works_from_the_keyboard(qtbot, tmp_path) -> None:
    _journal(tmp_path)
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    win.tree.setFocus()
    first = win.tree.currentItem()
    qtbot.keyClick(win.tree, Qt.Key.Key_Down)
    assert win.tree.currentItem() is not first
    qtbot.keyClick(win.tree, Qt.Key.Key_Right)  # expand: the event trail
    assert win.tree.currentItem().isExpanded()


def test_a_turn_whose_marker_is_gone_is_titled_from_hermes_state_db(qtbot, tmp_path) -> None:
    """Before: finished and skipped turns (their marker gone, so the tray no longer lists them) read
    "session 2026…". The title is Hermes' fact: it is read from that home's state.db (read-only), off
    the GUI thread, and the rows are re-titled when it answers."""
    from support.fixture_homes import FixtureHome

    from hermes_tray.engine import CoreEngine

    root, work = _journal(tmp_path)
    for path, key, title in ((root, "s-done", "Fix the flaky test"), (work, "s-skip", "Write the release notes")):
        home = FixtureHome(Path(path))
        home.add_session(key, title=title)
        home.close()
    engine = CoreEngine(explicit_homes=[root, work])
    win = HistoryWindow(lambda: ledger().turns(500), hermes_titles=engine.session_titles)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: _rows(win)["s-skip"][0] == "Write the release notes", timeout=5000)
    rows = _rows(win)
    assert rows["s-done"][0] == "Fix the flaky test"
    assert rows["s-gone"][0].startswith("Turn started ")  # no title in state.db: its time names it


def test_a_title_hermes_made_of_the_prompt_is_left_out_while_prompts_are_hidden(qtbot, tmp_path) -> None:
    from support.fixture_homes import FixtureHome

    from hermes_tray.engine import CoreEngine

    root, _work = _journal(tmp_path)
    home = FixtureHome(Path(root))
    home.add_session("s-done", title="SLOW: email my landlord about the broken boiler", title_source="derived")
    home.close()
    engine = CoreEngine(explicit_homes=[root])
    assert engine.session_titles([(root, "s-done")]) == {(root, "s-done"): home_title(home)}
    assert engine.session_titles([(root, "s-done")], prompts=False) == {}
    win = HistoryWindow(lambda: ledger().turns(500),
                        hermes_titles=lambda turns: engine.session_titles(turns, prompts=False))
    qtbot.addWidget(win)
    qtbot.wait(300)
    assert _rows(win)["s-done"][0].startswith("Turn started ")


def home_title(home) -> str:
    return home.db().execute("SELECT title FROM sessions WHERE id = 's-done'").fetchone()[0]


def test_the_when_column_says_interrupted_only_when_that_moment_was_seen(qtbot, tmp_path) -> None:
    """The tray's witness saw the turn's Hermes end (``stopped``): that moment; else only when it started."""
    t0 = time.time() - 3600
    d = book
    d.record("stopped", home=str(tmp_path), session_key="s-seen", started_at=t0, attempts=0, pid=4242)  # the witness
    d.record("notified", home=str(tmp_path), session_key="s-seen", started_at=t0, attempts=0)
    d.record("notified", home=str(tmp_path), session_key="s-unseen", started_at=t0, attempts=0)
    d.record("stopped", home=str(tmp_path), session_key="s-alone", started_at=t0, attempts=0, pid=4243)
    d.record("skipped", home=str(tmp_path), session_key="s-race", started_at=t0, attempts=0)
    d.record("stopped", home=str(tmp_path), session_key="s-race", started_at=t0, attempts=0, pid=4244)
    seen = next(e["created_at"] for e in book.history(10) if e["event"] == "stopped")
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    rows = _rows(win)
    assert COLUMNS[2] == "When"
    assert rows["s-seen"][2] == "Interrupted " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seen))
    assert rows["s-seen"][3] == "Waiting for you"  # told after it was seen to end
    assert rows["s-unseen"][2] == "Started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))
    assert rows["s-alone"][3] == "Interrupted"  # only seen to end (list mode): never the ledger's own word
    assert rows["s-race"][3] == "Skipped"  # a witness's record landing after a decision does not hide it


def test_a_stop_says_who_stopped_it(qtbot, tmp_path) -> None:
    root = tmp_path / ".hermes"
    root.mkdir()
    d = book
    t0 = time.time() - 60
    for key, by in (("s-you", "you"), ("s-hermes", "hermes"), ("s-old", None)):
        d.record("dispatched", home=str(root), session_key=key, started_at=t0, attempt=1)
        d.record("interrupted", home=str(root), session_key=key, started_at=t0, dispatched=True,
                 **({"stopped_by": by} if by else {}))
    d.record("interrupted", home=str(root), session_key="s-early", started_at=t0, stopped_by="you", dispatched=False)
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    rows = _rows(win)
    assert rows["s-early"][3] == "Stopped before it started"
    assert rows["s-you"][3] == "Stopped by you"
    assert rows["s-hermes"][3] == "Interrupted again in Hermes"
    # an older journal's event did not say who: never "Stopped" (the word for your own Stop)
    assert rows["s-old"][3] == "Interrupted again"


def test_what_happened_is_not_cut(qtbot, tmp_path) -> None:
    """Before: "gave up after 2 continuations (attempt …" — the column a user reads was clipped."""
    _journal(tmp_path)
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    win.resize(760, 420)
    win.show()
    gone = next(win.tree.topLevelItem(i) for i in range(4) if _key(win, win.tree.topLevelItem(i)) == "s-gone")
    assert gone.text(3) == "Gave up after 2 tries" and "attempt 2 of 2 crashed" in gone.toolTip(3)
    needed = win.tree.fontMetrics().horizontalAdvance(gone.text(3))
    assert win.tree.columnWidth(3) >= needed


def test_at_its_default_size_every_column_shows_whole_with_a_real_profile(qtbot, tmp_path) -> None:
    """Issue 25.5. Before: "Where it ran" read "in your running Her…" at the default width, with no tooltip,
    and the Profile column held a home path, "default" or "tray settings"."""
    root, work = _journal(tmp_path)
    other = tmp_path / "elsewhere" / "hermes-home"  # a home that is no profile: Hermes calls it default
    other.mkdir(parents=True)
    d = book
    d.record("dispatched", home=str(other), session_key="s-sep", started_at=time.time() - 30, attempt=1,
             ran_in="separate-process")
    d.record("completed", home=str(other), session_key="s-sep", started_at=time.time() - 30,
             where="in a separate Hermes process", ran_in="separate-process")
    d.record_config_change(home=None, key="mode", old="ask", new="auto", by="tray")
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    tree, fm = win.tree, win.tree.fontMetrics()
    for r in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(r)
        for c in range(len(COLUMNS)):
            if item.text(c):
                assert fm.horizontalAdvance(item.text(c)) <= tree.columnWidth(c), (c, item.text(c))
                assert item.toolTip(c), (c, item.text(c))  # the whole text (and more) on hover
    right = tree.header().sectionViewportPosition(len(COLUMNS) - 1) + tree.columnWidth(len(COLUMNS) - 1)
    assert right <= tree.viewport().width() + 1  # the last column is not pushed out of view
    rows = _rows(win)
    assert rows["s-sep"][1] == "default" and rows["s-sep"][4] == "Separate Hermes process"
    profiles = {tree.topLevelItem(r).text(1) for r in range(tree.topLevelItemCount())}
    assert profiles <= {"default", "work", ""}, profiles  # never a path, never "tray settings"


def test_a_title_lookup_that_missed_is_asked_again_at_the_next_refresh(qtbot, tmp_path) -> None:
    """state.db busy (or no title yet) the first time: Refresh asks again, instead of "session <id>" for good."""
    _journal(tmp_path)
    answers = [{}, None]

    def titles(turns):
        answer = answers.pop(0)
        return answer if answer is not None else {t: f"Title of {t[1]}" for t in turns}

    win = HistoryWindow(lambda: ledger().turns(500), hermes_titles=titles)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: not win._asked, timeout=5000)  # the first (empty) answer arrived
    assert _rows(win)["s-skip"][0].startswith("Turn in work, started ")
    win.reload()
    qtbot.waitUntil(lambda: _rows(win)["s-skip"][0] == "Title of s-skip", timeout=5000)


def test_history_with_home_given_lists_only_that_home(qtbot, tmp_path) -> None:
    """Issue 25.5. Before: with ``--home`` given, History still listed ~/.hermes's settings changes."""
    from hermes_tray.engine import CoreEngine

    root, work = _journal(tmp_path)
    book.record_config_change(home=root, key="enabled", old=True, new=False, by="cli")
    book.record_config_change(home=None, key="mode", old="ask", new="auto", by="tray")
    win = HistoryWindow(CoreEngine(explicit_homes=[work]).history)
    qtbot.addWidget(win)
    rows = [[win.tree.topLevelItem(r).text(c) for c in range(len(COLUMNS))]
            for r in range(win.tree.topLevelItemCount())]
    assert set(_rows(win)) == {"s-skip"}
    assert [r[0] for r in rows if "settings" in r[0]] == ["Tray settings changed"]  # this tray's own: kept
    assert win.summary.text() == "1 interrupted turn, 1 settings change, newest first"


def test_a_turn_offered_again_after_its_continuation_is_one_row_and_counted_once(qtbot, tmp_path) -> None:
    """Issue 42.8. Before: a turn offered again (its continuation died, or the tray quit while it ran) showed as
    two rows, and History counted 19 turns where there were 17. The run that became the new interruption ties it
    to its turn when it is recorded: one row, counted once, whose trail holds both."""
    from hermes_tray_core.continuing.claim import claim, release
    from hermes_tray_core.turn import Turn

    home = tmp_path / ".hermes"
    home.mkdir()
    t0 = time.time() - 600
    first = Turn.of(home, "s-again", {"started_at": t0, "attempts": 0})
    book.record("notified", home=home, session_key="s-again", started_at=t0, attempts=0)
    held = claim(first, purpose="resume", via="tray-menu", ttl=30)  # the run and its claim: one transaction
    ledger().record("approved", first.ident, run=held.run, via="tray-menu")
    ledger().record("dispatched", first.ident, run=held.run, attempt=1, ran_in="separate-process")
    # the tray quit while it ran: the marker its continuation left, put back at the turn's own count, is seen by
    # the run as it ends; offered again after the quit, it is the same turn
    again_at = time.time() - 30
    ledger().record("interrupted", first.ident, run=held.run, marker_started=again_at, stopped_by="shutdown",
                    dispatched=True)
    release(held)
    book.record("notified", home=home, session_key="s-again", started_at=again_at, attempts=0)
    book.record("notified", home=home, session_key="s-other", started_at=t0 + 5, attempts=0)
    win = HistoryWindow(lambda: ledger().turns(500))
    qtbot.addWidget(win)
    assert sorted(_key(win, win.tree.topLevelItem(i)) for i in range(win.tree.topLevelItemCount())) == \
        ["s-again", "s-other"]
    assert win.summary.text() == "2 interrupted turns, newest first"
    again = next(win.tree.topLevelItem(i) for i in range(2) if _key(win, win.tree.topLevelItem(i)) == "s-again")
    assert [again.child(i).text(0) for i in range(again.childCount())] == [
        "You were told", "You chose Resume", "Sent to Hermes", "Left waiting: the tray quit", "You were told"]
    assert win.selected_turn() is not None


def test_where_it_ran_is_not_cut_when_titles_arrive_after_the_first_fill(qtbot, tmp_path) -> None:
    """Issue 42.8. Before: Hermes' titles came back after the window was sized; the title column grew and pushed
    "Where it ran" out of view. The window grows with its columns (up to the screen), else the title gives way."""
    root, _work = _journal(tmp_path)
    long_title = "Refactor the configuration parser so that every unknown key warns once"
    win = HistoryWindow(lambda: ledger().turns(500), hermes_titles=lambda turns: {t: long_title for t in turns})
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    qtbot.waitUntil(lambda: long_title in [r[0] for r in _rows(win).values()], timeout=5000)
    qtbot.wait(50)
    tree, fm = win.tree, win.tree.fontMetrics()
    last = len(COLUMNS) - 1
    right = tree.header().sectionViewportPosition(last) + tree.columnWidth(last)
    assert right <= tree.viewport().width() + 1, (right, tree.viewport().width())
    done = next(tree.topLevelItem(r) for r in range(tree.topLevelItemCount()) if tree.topLevelItem(r).text(last))
    assert fm.horizontalAdvance(done.text(last)) <= tree.columnWidth(last)
