"""Render the README screenshots from the real widgets, fed real states (a real decision journal
in a temp dir for History), with the installed product (``.venv-test`` after ``./tests/run``):

    .venv-test/bin/python docs/screenshots/make_screenshots.py

With no display it starts the test desktop (``tests/desktop/session.py``) for the run; with one it
uses it.

Writes into this folder: prompt-window.png, prompt-window-running.png, tray-menu.png,
turns-window-problem-recent.png, history.png (at its default size: every column must show whole),
status-window-running.png, icons-22px.png. Look at every one after a change.
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
from hermes_tray.app.viewstate import Problem, RecentItem, RunningItem, TurnItem, ViewState, recent_items  # noqa: E402

HOME = str(Path.home() / ".hermes")


def _turn(key: str, title: str, excerpt: str, age: float, verdict: str = "actionable", reason: str = "",
          attempts: int = 0, profile: str = "default", code: str = "") -> TurnItem:
    return TurnItem(key=f"{HOME}\x1f{key}", home=HOME, session_key=key, title=title, excerpt=excerpt,
                    since=time.time() - age, attempts=attempts, verdict=verdict, reason=reason, profile=profile,
                    code=code or verdict)


def _settle(app: QApplication, w) -> None:
    w.show()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)


def _reason(age: float, attempts: int, **facts: str) -> tuple[str, str, float, str]:
    """The policy's own verdict, reason, age and reason code for a marker of that age and attempt count (no
    invented words); ``facts``: the policy's other inputs (an owner, its detail)."""
    from hermes_tray_core.deciding.policy import AutoContinueConfig, decide

    now = time.time()
    d = decide({"attempts": attempts, "prompt": "…", "started_at": now - age, "auto_continue": True,
                "writer_pid": 999_999_999}, config=AutoContinueConfig(freshness_minutes=24 * 60), writer="dead",
               now=now, lease="free", backend="none", **{"owner": "none", **facts})
    return str(d.verdict), d.reason, d.age_seconds, str(d.code)


def prompt_window(app: QApplication) -> None:
    """The turns window as a notification's Resume/Show opens it: one waiting turn, its details shown."""
    from hermes_tray.app.prompt_window import PromptWindow

    verdict, reason, age, code = _reason(3, 0)
    pending = (replace(_turn("20260301_101500_a1b2c3", "Demo: refactor the config parser",
                             "Refactor the config parser so unknown keys produce a warning instead of an error, "
                             "then update the tests.", 3, verdict=verdict, reason=reason, code=code),
                       stated_age=age),)
    w = PromptWindow()
    w.resize(560, 420)
    w.set_state(ViewState(pending=pending))
    w.details_button.setChecked(True)
    _settle(app, w)
    w.grab().save(str(HERE / "prompt-window.png"))
    w.close()


def prompt_window_running(app: QApplication) -> None:
    from hermes_tray.app.prompt_window import PromptWindow

    w = PromptWindow()
    w.resize(560, 380)
    w.set_state(ViewState(running=(RunningItem("k", "Demo: refactor the config parser", 2, "answering · 2 updates",
                                               at=time.monotonic()),)))
    _settle(app, w)
    w.grab().save(str(HERE / "prompt-window-running.png"))
    w.close()


def tray_menu(app: QApplication) -> None:
    """The tray's menu, as the panel shows it: a waiting turn, a held one (auto-continue off in a profile)."""
    from hermes_tray.app.menu import TrayMenu

    verdict, reason, age, code = _reason(1, 0)
    waiting = replace(_turn("20260301_101500_a1b2c3", "Demo: refactor the config parser",
                            "Refactor the config parser so unknown keys produce a warning", 1, verdict=verdict,
                            reason=reason, code=code), stated_age=age)
    menu = TrayMenu()
    menu.set_loading(False)
    menu.set_state(ViewState(pending=(waiting,), backend_enabled=None, autostart=False))
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
    problem = Problem(f"work: {Path.home()}/.hermes/profiles/work/desktop/interrupted_turns.json is corrupt "
                      "(Expecting ',' delimiter); interrupted turns in this home cannot be seen. Hermes' next "
                      "write will replace it; move it aside to keep it",
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
    from hermes_tray_core.stores import decisions

    root = TMP / "home" / ".hermes"
    work = root / "profiles" / "work"
    work.mkdir(parents=True)
    d = decisions.default_journal()
    t0 = time.time() - 5400
    steps = [
        (root, "20260301_101500_a1b2c3", t0, [("notified", {}), ("approved", {"via": "tray-notification"}),
                                               # the tray's own marker for the run it continues (a legacy
                                               # Hermes): a run of its own, shown in the same row
                                               ("continuing", {"attempt": 1, "original_started_at": t0,
                                                               "at": t0 + 60}),
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
        (root, "20260301_120000_77aa11", t0 + 4000, [("notified", {})]),
    ]
    for home, key, started, events in steps:
        for ev, fields in events:
            at = fields.pop("at", started)
            d.record(ev, home=str(home), session_key=key, started_at=at, **fields)
    decisions.record_config_change(home=str(root), key="enabled", old=True, new=False, by="tray")
    decisions.record_config_change(home=None, key="mode", old="ask", new="auto", by="tray")
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
    w = HistoryWindow(lambda: decisions.history(500),
                      title_for=lambda _h, k: "Summarise the CI failures" if k == "20260301_120000_77aa11" else None,
                      pending=lambda _h, k: k == "20260301_120000_77aa11",
                      hermes_titles=CoreEngine(explicit_homes=[str(root), str(work)]).session_titles)
    _settle(app, w)  # at its default size: it sizes itself so that every column shows whole
    w.tree.setCurrentItem(w.tree.topLevelItem(0))
    _settle(app, w)
    w.grab().save(str(HERE / "history.png"))
    w.close()


def status_window(app: QApplication) -> None:
    from hermes_tray.app.status_window import StatusWindow

    w = StatusWindow()
    w.set_state(ViewState(running=(RunningItem("k", "Refactor the config parser so unknown keys warn", 83,
                                               "writing the answer · 14 updates", at=time.monotonic()),)))
    _settle(app, w)
    w.grab().save(str(HERE / "status-window-running.png"))
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
    prompt_window_running(app)
    tray_menu(app)
    turns_window(app)
    history(app)
    status_window(app)
    icons()
    print(f"screenshots written to {HERE}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    finally:
        if _DESKTOP is not None:
            _DESKTOP.stop()
