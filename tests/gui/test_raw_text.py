"""Nothing from a file reaches a terminal, a notification or a window raw.

Anyone who can write a Hermes home decides what its marker file, its ``state.db`` titles and even its folder
name hold. A home whose path, marker key, session title and prompt carry terminal escapes (an OSC 0 that
retitles the terminal, a screen clear, BEL), a C1 control and a right-to-left override: every human output
shows them as escapes (``\\u001b``), and ``--json`` keeps them as JSON escapes — the same characters once
parsed. Real CLI subprocesses, a real scan, the real notification builder and log notifier, the real
turns window.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from tests.support.fixture_homes import FixtureHome, env_for, marker_entry

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\x85\u202e"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
EVIL_KEY = f"k{HOSTILE}1"


def assert_clean(text: str, where: str) -> None:
    found = RAW.search(text)
    assert found is None, f"{where}: raw {found.group()!r} reached the user in {text[max(0, found.start() - 60):found.end() + 20]!r}"


@pytest.fixture()
def hostile(tmp_path):
    home = FixtureHome(tmp_path / f"home{HOSTILE}x")  # the folder name itself carries the sequences
    home.add_session("s1", title=f"Title {HOSTILE} end")
    home.write_markers({
        "s1": marker_entry(f"Prompt {HOSTILE} end", started_at=time.time() - 60),
        EVIL_KEY: marker_entry(f"Other {HOSTILE}", started_at=time.time() - 90),
    })
    home.close()
    return home, env_for(tmp_path)


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_every_command_line_output_escapes_them(hostile):
    home, env = hostile
    h = ["--home", str(home.path)]
    outputs = {
        "status": cli(env, "status", *h),
        "config show": cli(env, "config", "show", *h),
        "doctor": cli(env, "doctor", "--no-probe", *h),
        "resume": cli(env, "resume", "s1", "--wait", *h),  # no Hermes installed here: it says why, naming the home
        "skip": cli(env, "skip", "s1", *h),
    }
    outputs["history"] = cli(env, "history")  # the skip, journalled with its home
    for name, proc in outputs.items():
        assert "Traceback" not in proc.stderr, (name, proc.stderr[-1500:])
        assert_clean(proc.stdout, f"{name} (stdout)")
        assert_clean(proc.stderr, f"{name} (stderr)")
    assert outputs["skip"].returncode == 0, outputs["skip"].stderr
    assert "\\u001b]0;PWNED\\u0007" in outputs["status"].stdout  # shown, as an escape: nothing is hidden
    # history names a turn by its session and profile, never the home's folder name: nothing hostile to show


def test_json_keeps_them_as_json_escapes(hostile):
    home, env = hostile
    proc = cli(env, "status", "--json", "--home", str(home.path))
    assert_clean(proc.stdout, "status --json")
    doc = json.loads(proc.stdout)
    assert EVIL_KEY in {t["session_key"] for t in doc["turns"]}  # the very same characters, once parsed
    assert doc["homes"][0]["path"] == str(home.path)
    titled = next(t for t in doc["turns"] if t["session_key"] == "s1")
    assert titled["title"] == f"Title {HOSTILE} end"
    assert titled["prompt_excerpt"].startswith("Prompt \x1b]0;PWNED\x07\x1b[2J")  # its first line (NEL ends it)


def _records(home: FixtureHome):
    from hermes_tray_core import Home, Scanner

    records = Scanner([Home(home.path, origin="cli")]).scan().turns
    assert {r.session_key for r in records} == {"s1", EVIL_KEY}
    return records


def test_notifications_escape_them(hostile, qtbot, caplog):
    from hermes_tray.notify.base import Note
    from hermes_tray.notify.coalesce import InterruptionNotices
    from hermes_tray.notify.log import LogNotifier

    home, _env = hostile
    notifier = LogNotifier()
    notices = InterruptionNotices(notifier, show_prompts=lambda: True)
    for rec in _records(home):
        notices.announce([rec], title="Failed again", lead=f"because {HOSTILE}")  # one note each
    notices.announce(_records(home))  # and the storm note naming both
    assert len(notifier.shown) == 3
    for note in notifier.shown:
        assert_clean(note.title, "notification title")
        assert_clean(note.body, "notification body")
    assert "Title" in notifier.shown[0].title or "Title" in notifier.shown[1].title  # the name: in the title
    direct = Note("k", f"T{HOSTILE}", f"line one\nB{HOSTILE}")  # any note, from anywhere in the shell
    assert_clean(direct.title, "note title") and assert_clean(direct.body, "note body")
    assert direct.body.startswith("line one\n")  # a body's own lines stay lines


def test_the_turns_window_escapes_them(hostile, qtbot):
    from hermes_tray.app.prompt_window import PromptWindow
    from hermes_tray.model.viewstate import ViewState, turn_item

    home, _env = hostile
    w = PromptWindow()
    qtbot.addWidget(w)
    w.set_state(ViewState(pending=tuple(turn_item(r, show_prompts=True) for r in _records(home)),
                          problems=()))
    texts = []
    for i in range(w.list.count()):
        w.list.setCurrentRow(i)
        item = w.list.item(i)
        texts += [item.text(), item.toolTip()]
        texts += [lbl.text() for lbl in w.findChildren(QLabel)] + [lbl.toolTip() for lbl in w.findChildren(QLabel)]
    assert any("Title" in t for t in texts)
    for t in texts:
        assert_clean(t, "turns window")


def test_the_menu_history_and_a_turns_page_escape_them(hostile, qtbot):
    """Every other place a turn's name, prompt or home is read: the tray menu (labels and tooltips), History
    (its rows, from the real ledger, with the hostile title Hermes gave the session) and a turn's page."""
    from PySide6.QtWidgets import QWidget

    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray.app.menu import TrayMenu
    from hermes_tray.app.turn_page import TurnPageDialog
    from hermes_tray.model.page import page_for
    from hermes_tray.model.viewstate import ViewState, turn_item
    from hermes_tray_core.stores.ledger import ledger

    home, _env = hostile
    records = _records(home)
    state = ViewState(pending=tuple(turn_item(r, show_prompts=True) for r in records), problems=())
    menu = TrayMenu()
    qtbot.addWidget(menu)
    menu.set_state(state)
    texts = [t for a in menu.actions() for t in (a.text(), a.toolTip())]
    assert any("Title" in t for t in texts), texts
    for t in texts:
        assert_clean(t, "the tray menu")

    for r in records:  # the key with control characters is never recorded (an unsafe id): s1 is
        if r.session_key == "s1":
            ledger().record("notified", r.turn.ident)
    history = HistoryWindow(lambda: ledger().turns(500), title_for=lambda h, k: f"Title {HOSTILE} end")
    qtbot.addWidget(history)
    tree = history.tree
    texts += [tree.topLevelItem(r).text(c) for r in range(tree.topLevelItemCount()) for c in range(tree.columnCount())]
    texts += [tree.topLevelItem(r).toolTip(c) for r in range(tree.topLevelItemCount())
              for c in range(tree.columnCount())]
    assert any("Title" in t for t in texts[-2 * tree.topLevelItemCount() * tree.columnCount():])
    for t in texts:
        assert_clean(t, "History")

    for item in state.pending:
        page = page_for(state, ledger().turns(500), key=item.key)
        assert page is not None
        dialog = TurnPageDialog(page)
        qtbot.addWidget(dialog)
        texts += [w.text() for w in dialog.findChildren(QLabel)] + [dialog.windowTitle()]
        texts += [w.toolTip() for w in dialog.findChildren(QWidget)]
    for t in texts:
        assert_clean(t, "a turn's page")
