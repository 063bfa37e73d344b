"""Render the README screenshots from the real widgets, fed real states (a real decision journal
in a temp dir for History), with the installed product (``.venv-test`` after ``./tests/run``):

    .venv-test/bin/python docs/screenshots/make_screenshots.py

With no display it starts the test desktop (``tests/desktop/session.py``) for the run; with one it
uses it.

Writes into this folder: prompt-window.png, turns-window-facts.png (a waiting turn's Details: how far it got
and why it stopped), prompt-window-running.png (a continuation running beside a waiting turn with its Details,
and Recent: the window grown to fit), tray-menu.png (three waiting turns whose prompts begin alike),
turns-window-problem-recent.png, history.png (open while a turn finishes, at its default size: every column must
show whole), status-window-menu.png (the status window with the icon's menu open), turn-page.png (a turn's page:
its facts, its decisions so far, a reminder set), notification-dunst.png (a waiting turn's notification on dunst,
a real notification server, dark theme, with how far it got and why it stopped), notification-dunst-hidden.png
(the same with show_prompts off: no prompt, no title Hermes made of it), icons-22px.png. Look at every one after
a change.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
import _testpath  # noqa: E402,F401 - the installed product; tests.* (the test desktop) from this checkout

_DESKTOP = None
if not os.environ.get("DISPLAY"):
    from tests.desktop.session import Desktop, TrayKind

    _DESKTOP = Desktop(TrayKind.XEMBED).start()
    os.environ.update(_DESKTOP.env)
TMP = Path(tempfile.mkdtemp(prefix="hermes-tray-shots-"))
for _name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
    os.environ[f"HERMES_TRAY_{_name}_DIR"] = str(TMP / f"tray-{_name.lower()}")

from PySide6.QtCore import QPoint, QRect, Qt  # noqa: E402
from PySide6.QtGui import QColor, QImage, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from hermes_tray.app.application import configure_application  # noqa: E402
from hermes_tray.model.viewstate import Problem, RecentItem, RunningItem, TurnItem, ViewState, recent_items  # noqa: E402

HOME = str(Path.home() / ".hermes")


def _turn(key: str, title: str, excerpt: str, age: float, verdict: str = "actionable", reason: str = "",
          attempts: int = 0, profile: str = "default", code: str = "") -> TurnItem:
    """A row whose turn the tray saw end ``age`` seconds ago (its witness): "Interrupted … ago"."""
    return TurnItem(key=f"{HOME}\x1f{key}", home=HOME, session_key=key, title=title, excerpt=excerpt,
                    since=time.time() - age, attempts=attempts, verdict=verdict, reason=reason, profile=profile,
                    code=code or verdict, moment="interrupted", at=time.time() - age)


def _settle(app: QApplication, w) -> None:
    w.show()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)


def _reason(age: float, attempts: int, **facts: str) -> tuple[str, str, float, str]:
    """The policy's own verdict, reason, age and reason code for a marker of that age and attempt count (no
    invented words); ``facts``: the policy's other inputs (an owner, its detail)."""
    from hermes_tray_core.deciding.policy import AutoContinueConfig, Seen, decide
    from hermes_tray_core.turn import Marker

    now = time.time()
    d = decide(Marker.read({"attempts": attempts, "prompt": "…", "started_at": now - age, "auto_continue": True,
                            "writer_pid": 999_999_999}), config=AutoContinueConfig(freshness_minutes=24 * 60),
               now=now, seen=Seen(**{"writer": "dead", "lease": "free", "backend": "none", "owner": "none", **facts}))
    return str(d.verdict), d.reason, d.age_seconds, str(d.code)


FACTS_KEY = "20260301_101500_a1b2c3"
FACTS_AGE = 40 * 60  # the turn started 40 min ago …
BOOTED = 25 * 60  # … and this computer restarted 25 min ago, ending it


def facts_turn(*, title_from_prompt: bool = False):
    """A waiting turn with what Hermes kept of it and why it stopped, as the scanner records them: the progress
    a turn killed mid-way leaves (tool calls, some text, the tool it was running) and the cause the engine's own
    ``stop_cause`` gives a marker whose writer started before the computer last started (its words, with its
    fact). Nobody saw it end: its age is said from the last thing Hermes saved. ``title_from_prompt``: its title
    is the one Hermes made of the prompt (hidden with the prompt)."""
    from hermes_tray_core import Marker, ProgressStep, StepKind, Turn, TurnProgress, TurnRecord, home_path
    from hermes_tray_core.deciding.causes import stop_cause

    verdict, reason, age, code = _reason(FACTS_AGE, 0)
    now = time.time()
    started = now - FACTS_AGE
    marker = Marker.read({"attempts": 0, "prompt": "…", "started_at": started, "writer_start_time": started - 4})
    cause, fact = stop_cause(marker, now=now, boot_time=now - BOOTED)
    steps = (ProgressStep(StepKind.TEXT, paragraphs=2), ProgressStep(StepKind.TOOL, "patch"),
             ProgressStep(StepKind.TOOL, "terminal", running=True))
    progress = TurnProgress(messages=11, tool_calls=5, recent=steps, ran_for_s=11 * 60 + 20,
                            last_excerpt="terminal: pytest tests/test_config.py -q")
    prompt = "Refactor the config parser so unknown keys produce a warning instead of an error, then update the tests."
    title = prompt[:48] if title_from_prompt else "Demo: refactor the config parser"
    return TurnRecord(home=Path(HOME), profile="default", turn=Turn(home_path(HOME), FACTS_KEY, marker), title=title,
                      prompt_excerpt=prompt, age_seconds=age, writer="dead", verdict=verdict, reason=reason,
                      source="desktop", code=code, progress=progress, cause=cause, cause_fact=fact,
                      title_from_prompt=title_from_prompt)


def turns_window_facts(app: QApplication) -> None:
    """The turns window with a waiting turn's Details: how far it got and why it stopped."""
    from hermes_tray.app.prompt_window import PromptWindow
    from hermes_tray.model.viewstate import turn_item

    w = PromptWindow()
    w.resize(560, 500)
    w.set_state(ViewState(pending=(turn_item(facts_turn(), show_prompts=True),)))
    w.details_button.setChecked(True)
    _settle(app, w)
    w.grab().save(str(HERE / "turns-window-facts.png"))
    w.close()


def prompt_window(app: QApplication) -> None:
    """The turns window as a notification's Resume/Show opens it: one waiting turn, its details shown."""
    from hermes_tray.app.prompt_window import PromptWindow

    verdict, reason, age, code = _reason(240, 0)  # started 4 min ago; its Hermes seen to end 3 s ago
    pending = (replace(_turn("20260301_101500_a1b2c3", "Demo: refactor the config parser",
                             "Refactor the config parser so unknown keys produce a warning instead of an error, "
                             "then update the tests.", 240, verdict=verdict, reason=reason, code=code),
                       stated_age=age, at=time.time() - 3),)
    w = PromptWindow()
    w.resize(560, 420)
    w.set_state(ViewState(pending=pending))
    w.details_button.setChecked(True)
    _settle(app, w)
    w.grab().save(str(HERE / "prompt-window.png"))
    w.close()


def prompt_window_running(app: QApplication) -> None:
    """A continuation running while another turn waits (its Details open) and one finished under Recent, opened at
    560×380: the window grows to fit what it shows, nothing drawn over anything."""
    from hermes_tray import words
    from hermes_tray.app.prompt_window import PromptWindow
    from hermes_tray.model.viewstate import turn_item

    done = words.ending("completed", ran_in="running-backend")
    finished = RecentItem("k3", "Fix the flaky upload test", done.what, done.why, since=time.time() - 640,
                          details="Hermes finished the turn. It ran in your running Hermes (pid 48211).")
    w = PromptWindow()
    w.resize(560, 380)
    w.set_state(ViewState(pending=(turn_item(facts_turn(), show_prompts=True),), recent=(finished,),
                          running=(RunningItem("k", "Summarise the CI failures", 2, "answering · 2 updates",
                                               at=time.monotonic()),)))
    w.details_button.setChecked(True)
    _settle(app, w)
    w.grab().save(str(HERE / "prompt-window-running.png"))
    w.close()


SIMILAR = ("Refactor the config parser so that unknown keys produce a warning instead of an error, then run the "
           "tests",
           "Refactor the config parser so that unknown keys produce a warning instead of an error (round 2)",
           "Refactor the config parser so that unknown keys produce a warning, and say so in the README")


def similar_turns() -> list:
    """Three untitled turns whose prompts share their first 60 characters, as the scanner records them."""
    from hermes_tray_core import Marker, Turn, TurnRecord, home_path

    verdict, reason, age, code = _reason(40, 0)
    return [TurnRecord(home=Path(HOME), profile="default", title=None, prompt_excerpt=prompt,
                       turn=Turn(home_path(HOME), f"20260301_10{n}500_a1b2c{n}", Marker.known(time.time() - 40 - 70 * n)),
                       age_seconds=age + 70 * n, writer="dead", verdict=verdict, reason=reason, source="desktop",
                       code=code, interrupted_at=time.time() - 30 - 70 * n)  # seen to end by the tray
            for n, prompt in enumerate(SIMILAR)]


def tray_menu(app: QApplication) -> None:
    """The tray's menu, as the panel shows it: three waiting turns whose prompts begin alike, each named by
    the part that differs (``turn_names``), as the controller names them."""
    from hermes_tray.app.menu import TrayMenu
    from hermes_tray.model.viewstate import turn_item
    from hermes_tray.notify.coalesce import turn_names

    records = similar_turns()
    now = time.time()
    pending = tuple(turn_item(r, show_prompts=True, now=now, name=n)
                    for r, n in zip(records, turn_names(records, show_prompts=True), strict=True))
    menu = TrayMenu()
    menu.set_loading(False)
    menu.set_state(ViewState(pending=pending, backend_enabled=True, autostart=False))
    menu.adjustSize()
    _settle(app, menu)
    menu.grab().save(str(HERE / "tray-menu.png"))
    menu.close()


def turns_window(app: QApplication) -> None:
    from hermes_tray import words
    from hermes_tray.app.prompt_window import PromptWindow

    verdict, reason, age, code = _reason(95, 1)
    pending = (replace(_turn("20260301_101500_a1b2c3", "Refactor the config parser",
                             "Make unknown keys produce a warning instead of an error, then update the tests",
                             95, verdict=verdict, reason=reason, attempts=1, code=code), stated_age=age),)
    verdict, reason, age, code = _reason(3 * 3600, 2)
    gave_up = replace(_turn("20260301_091200_d4e5f6", "Release notes for 2.1", "", 3 * 3600, verdict=verdict,
                            reason=reason, attempts=2, code=code), stated_age=age)
    verdict, reason, age, code = _reason(600, 0, owner="alive",
                                         activity_detail="open in your running Hermes, pid 48211")
    open_there = replace(_turn("20260301_094000_99ee77", "Summarise the CI failures", "", 600, verdict=verdict,
                               reason=reason, code=code), stated_age=age)
    done = words.ending("completed", ran_in="running-backend")
    finished = RecentItem("k3", "Fix the flaky upload test", done.what, done.why, since=time.time() - 640,
                          details="Hermes finished the turn. It ran in your running Hermes (pid 48211).")
    problem = Problem(f"work: {Path.home()}/.hermes/profiles/work/desktop/interrupted_turns.json is corrupt: it "
                      "is not valid JSON. Interrupted turns in this home cannot be seen. Hermes' next write will "
                      "replace it; move it aside to keep it",
                      folder=f"{Path.home()}/.hermes/profiles/work/desktop", kind="markers",
                      home=f"{Path.home()}/.hermes/profiles/work")
    state = ViewState(pending=pending, others=(gave_up, open_there), problems=(problem,),
                      recent=recent_items((gave_up, open_there), (finished,)))
    w = PromptWindow()
    w.resize(720, 640)
    w.set_state(state)
    _settle(app, w)
    w.grab().save(str(HERE / "turns-window-problem-recent.png"))
    w.close()


def history(app: QApplication) -> None:
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray_core.stores.ledger import ledger
    from tests.support import book

    root = TMP / "home" / ".hermes"
    work = root / "profiles" / "work"
    work.mkdir(parents=True)
    t0 = time.time() - 5400
    steps = [
        (root, "20260301_101500_a1b2c3", t0, [("notified", {}), ("approved", {"via": "tray-notification"}),
                                               # the tray's own marker for the run it continues (a legacy
                                               # Hermes), in the same row
                                               ("continuing", {"attempt": 1}),
                                               ("dispatched", {"attempt": 1, "ran_in": "running-backend",
                                                               "backend_pid": 48211}),
                                               ("completed", {"where": "in your running Hermes (pid 48211)",
                                                              "ran_in": "running-backend"})]),
        (work, "20260301_103000_0badf00d", t0 + 900, [("notified", {"profile": "work"}),
                                                      ("skipped", {"via": "tray-menu"})]),
        (root, "20260301_111000_d4e5f6", t0 + 2000, [
            ("dispatched", {"attempt": 1, "ran_in": "separate-process"}),
            ("failed", {"outcome": "crashed", "reason": "the Hermes backend died during the continuation",
                        "ran_in": "separate-process"}),
            ("dispatched", {"attempt": 2, "ran_in": "separate-process"}),
            ("gave-up", {"reason": "attempt 2 of 2 crashed"})]),
        (root, "20260301_115500_c0ffee", t0 + 3000, [("notified", {}), ("approved", {}),
                                                      ("dispatched", {"attempt": 1, "ran_in": "separate-process"}),
                                                      ("interrupted", {"stopped_by": "you", "dispatched": True,
                                                                       "ran_in": "separate-process"})]),
        (root, "20260301_120000_77aa11", t0 + 4000, [("notified", {"via": "desktop-notifier"})]),
    ]
    for home, key, started, events in steps:
        for ev, fields in events:
            book.record(ev, home=str(home), session_key=key, started_at=started, **fields)
    book.record_config_change(home=str(root), key="enabled", old=True, new=False, by="tray")
    book.record_config_change(home=None, key="mode", old="ask", new="auto", by="tray")
    # The waiting turn is titled as the tray lists it; the others, whose markers are gone, by Hermes' own
    # state.db — a real one here, read by the engine exactly as in the app.
    from hermes_tray.engine import CoreEngine
    from tests.support.fixture_homes import FixtureHome

    for home, key, title in ((root, "20260301_101500_a1b2c3", "Refactor the config parser"),
                             (work, "20260301_103000_0badf00d", "Tidy the changelog"),
                             (root, "20260301_111000_d4e5f6", "Release notes for 2.1")):
        fx = FixtureHome(home)
        fx.add_session(key, title=title)
        fx.close()
    w = HistoryWindow(lambda: ledger().turns(500),
                      title_for=lambda _h, k: "Summarise the CI failures" if k == "20260301_120000_77aa11" else None,
                      hermes_titles=CoreEngine(explicit_homes=[str(root), str(work)]).session_titles,
                      watch=[ledger().path, ledger().path.with_name("ledger.sqlite3-wal")])
    _settle(app, w)  # at its default size: it sizes itself so that every column shows whole
    waiting = next(w.tree.topLevelItem(i) for i in range(w.tree.topLevelItemCount())
                   if w.tree.topLevelItem(i).text(0) == "Summarise the CI failures")
    w.tree.setCurrentItem(waiting)  # the turn waiting for you, its trail open
    waiting.setExpanded(True)
    # while it is open, the waiting turn is resumed and finishes: History follows the ledger by itself
    key, started = "20260301_120000_77aa11", t0 + 4000
    for ev, fields in (("approved", {"via": "tray-menu"}), ("dispatched", {"attempt": 1, "ran_in": "running-backend",
                                                                           "backend_pid": 48211}),
                       ("completed", {"where": "in your running Hermes (pid 48211)", "ran_in": "running-backend"})):
        book.record(ev, home=str(root), session_key=key, started_at=started, **fields)
        _settle(app, w)
    end = time.monotonic() + 10
    while w.tree.topLevelItem(0).text(3) != "Resumed and finished" and time.monotonic() < end:
        _settle(app, w)
    assert w.tree.topLevelItem(0).text(3) == "Resumed and finished", "History did not follow the ledger"
    _settle(app, w)
    w.grab().save(str(HERE / "history.png"))
    w.close()


def status_window(app: QApplication) -> None:
    """The status window (no tray) while a continuation runs, its Menu open: the icon's own menu."""
    from hermes_tray.app.menu import TrayMenu
    from hermes_tray.app.status_window import StatusWindow

    state = ViewState(running=(RunningItem("k", "Refactor the config parser so unknown keys warn", 83,
                                           "writing the answer · 14 updates", at=time.monotonic()),),
                      backend_enabled=True, autostart=False)
    menu = TrayMenu()
    menu.set_loading(False)
    menu.set_state(state)
    w = StatusWindow(menu)
    w.set_state(state)
    w.move(40, 40)
    _settle(app, w)
    menu.popup(w.menu_button.mapToGlobal(QPoint(0, w.menu_button.height())))  # as the button pops it up
    _settle(app, menu)
    frame = w.frameGeometry().united(menu.geometry()).adjusted(-12, -12, 12, 12)
    shot = app.primaryScreen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
    shot.save(str(HERE / "status-window-menu.png"))
    menu.close()
    w.close()


DUNSTRC = """[global]
    width = 460
    height = 220
    origin = top-right
    offset = 24x24
    font = DejaVu Sans 10
    frame_width = 1
    frame_color = "#5a6473"
    padding = 12
    horizontal_padding = 12
    text_icon_padding = 12
    icon_position = left
    min_icon_size = 48
    max_icon_size = 48
    show_indicators = yes
    markup = full
    format = "<b>%s</b>\\n%b"
[urgency_low]
    background = "#222222"
    foreground = "#f5f7fa"
[urgency_normal]
    background = "#222222"
    foreground = "#f5f7fa"
[urgency_critical]
    background = "#222222"
    foreground = "#f5f7fa"
    frame_color = "#d64545"
"""


def notification_on_dunst(app: QApplication, *, hidden: bool = False) -> None:
    """A waiting turn's notification as dunst (Debian's package, a real server; a dark theme) shows it: sent by
    the tray's own notifier over a bus of its own, where dunst owns the notification service. ``hidden``: with
    ``show_prompts = false``, for a turn whose title Hermes made of its prompt (notification-dunst-hidden.png)."""
    import shutil
    import signal
    import subprocess

    from hermes_tray.notify.coalesce import InterruptionNotices
    from hermes_tray.notify.desktop import DesktopNotifierBackend

    if shutil.which("dunst") is None:
        raise SystemExit("notification-dunst.png needs dunst (./tests/run installs it)")
    run = TMP / ("dunst-hidden" if hidden else "dunst")
    run.mkdir()
    (run / "dunstrc").write_text(DUNSTRC, encoding="utf-8")
    (run / "bus.conf").write_text(
        "<busconfig><type>session</type>"
        f"<listen>unix:path={run / 'bus'}</listen><auth>EXTERNAL</auth>"
        '<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>'
        '<allow own="*"/></policy>'
        "</busconfig>", encoding="utf-8")
    procs = [subprocess.Popen(["dbus-daemon", f"--config-file={run / 'bus.conf'}", "--nofork", "--nopidfile"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    end = time.monotonic() + 10
    while not (run / "bus").exists() and time.monotonic() < end:
        time.sleep(0.05)
    env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": f"unix:path={run / 'bus'}"}
    with open(run / "dunst.log", "wb") as log:
        procs.append(subprocess.Popen(["dunst", "-config", str(run / "dunstrc")], env=env, stdout=log, stderr=log))
    bus_before = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = env["DBUS_SESSION_BUS_ADDRESS"]
    notifier = None
    try:
        end = time.monotonic() + 20
        while notifier is None or not notifier.available:  # dunst takes a moment to own its name
            if time.monotonic() > end:
                raise SystemExit("dunst did not come up: " + (run / "dunst.log").read_text(errors="replace")[-800:])
            if notifier is not None:
                notifier.shutdown()
                time.sleep(0.3)
            notifier = DesktopNotifierBackend("Hermes Tray")
            notifier.wait_ready(10)
        notes = InterruptionNotices(notifier, show_prompts=lambda: not hidden)
        notes.announce([facts_turn(title_from_prompt=hidden)])  # how far it got and why it stopped, as Details says
        for _ in range(40):
            app.processEvents()
            time.sleep(0.05)
        wid = subprocess.run(["xdotool", "search", "--classname", "Dunst"], env=env, capture_output=True,
                             text=True, timeout=10).stdout.split()
        geo = subprocess.run(["xdotool", "getwindowgeometry", "--shell", wid[-1]], env=env, capture_output=True,
                             text=True, timeout=10, check=True).stdout
        g = dict(line.split("=", 1) for line in geo.split())
        x, y, wd, ht = (int(g[k]) for k in ("X", "Y", "WIDTH", "HEIGHT"))
        name = "notification-dunst-hidden.png" if hidden else "notification-dunst.png"
        app.primaryScreen().grabWindow(0, x - 12, y - 12, wd + 24, ht + 24).save(str(HERE / name))
    finally:
        if notifier is not None:
            notifier.shutdown()
        if bus_before is not None:
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus_before
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def turn_page(app: QApplication) -> None:
    """A turn's page (a double-click in the turns window or History): the same waiting turn, told about and set
    to remind in an hour; its decisions from the real ledger (after ``history``, so they are not in its rows)."""
    from hermes_tray.app.turn_page import TurnPageDialog
    from hermes_tray.model.page import page_for
    from hermes_tray.model.viewstate import turn_item
    from hermes_tray_core.stores.ledger import ledger

    rec = facts_turn()
    until = time.time() + 3600
    ledger().record("notified", rec.turn.ident, via="desktop-notifier")
    ledger().record("snoozed", rec.turn.ident, until=until, via="tray-notification")
    item = turn_item(rec, show_prompts=True, reminder=until)
    page = page_for(ViewState(pending=(item,)), ledger().turns(500), key=item.key)
    assert page is not None
    w = TurnPageDialog(page)
    w.resize(560, 560)
    _settle(app, w)
    w.grab().save(str(HERE / "turn-page.png"))
    w.close()


def icons() -> None:
    """Each tray state at its real 22 px on a light and a dark panel, and 4× (pixels kept) below."""
    states = ("idle", "attention", "busy", "paused")
    cell, zoom = 34, 4
    strip_h = 30
    width = len(states) * cell * zoom + 20
    img = QImage(width, 2 * (strip_h + 22 * zoom + 16), QImage.Format.Format_ARGB32)
    img.fill(QColor("#d0d4da"))
    p = QPainter(img)
    y = 0
    for panel, variant in (("#f3f4f6", "light"), ("#1f2933", "dark")):
        p.fillRect(QRect(0, y, width, strip_h + 22 * zoom + 16), QColor(panel))
        for i, state in enumerate(states):
            src = QImage(str(ROOT / "resources" / "icons" / "png" / "22" / f"hermes-tray-{state}-{variant}.png"))
            x = 10 + i * cell * zoom
            p.drawImage(QPoint(x, y + 4), src)  # real size, as on a panel
            p.setPen(QColor("#111827" if variant == "light" else "#f5f7fa"))
            p.drawText(QRect(x + 28, y + 4, cell * zoom - 30, 22), Qt.AlignmentFlag.AlignVCenter, state)
            p.drawImage(QPoint(x, y + strip_h), src.scaled(22 * zoom, 22 * zoom))  # 4×, nearest neighbour
        y += strip_h + 22 * zoom + 16
    p.end()
    img.save(str(HERE / "icons-22px.png"))


def main() -> int:
    app = QApplication.instance() or QApplication(["hermes-tray"])
    configure_application(app)
    prompt_window(app)
    turns_window_facts(app)
    prompt_window_running(app)
    tray_menu(app)
    turns_window(app)
    history(app)
    status_window(app)
    turn_page(app)
    notification_on_dunst(app)
    notification_on_dunst(app, hidden=True)
    icons()
    print(f"screenshots written to {HERE}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    finally:
        if _DESKTOP is not None:
            _DESKTOP.stop()
