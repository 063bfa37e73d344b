"""History is live and reachable without a tray.

Before: an open History window showed what the journal held when it opened; a turn interrupted, resumed and
finished meanwhile showed only after Refresh. And the status window (the stand-in for a missing tray) offered
Open turns, Settings and Quit only: History, About, the mode, auto-continue on/off and the log folder could
not be reached without a tray.

Here the real tray (``TrayApp``) runs with no tray host on the real engine, a real Hermes home and the
simulated Hermes that continues turns itself; the marker is planted as a SIGKILLed backend leaves it.
"""

from __future__ import annotations

import time
from pathlib import Path

from fakes import RecordingNotifier
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from hermes_tray.app.application import TrayApp, TrayOptions
from hermes_tray.app.history_window import COLUMNS, HistoryWindow
from hermes_tray.demo.sim_install import sim_command
from hermes_tray_core.stores.ledger import ledger
from tests.support import book
from tests.support.sim_homes import make_home, plant_marker


def _trayless(qtbot, monkeypatch, home: Path) -> TrayApp:
    from hermes_tray.engine import CoreEngine

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: False))
    monkeypatch.setattr("hermes_tray.notify.make_notifier", lambda *a, **k: RecordingNotifier())
    app = TrayApp(QApplication.instance(), TrayOptions(engine=CoreEngine([str(home)]), autostart=None,
                                                       wait_for_tray=0.2))
    app.start()
    qtbot.waitUntil(lambda: app.status_window is not None and app.status_window.isVisible(), timeout=10000)
    qtbot.waitUntil(lambda: app.controller is not None, timeout=10000)
    return app


def _entry(menu: QMenu, text: str):
    act = next((a for a in menu.actions() if a.text() == text), None)
    if act is None:  # one level down (the mode's submenu)
        act = next((b for a in menu.actions() if a.menu() is not None for b in a.menu().actions() if b.text() == text),
                   None)
    assert act is not None, (text, [a.text() for a in menu.actions()])
    return act


def _row(win: HistoryWindow) -> list[str]:
    item = win.tree.topLevelItem(0)
    return [item.text(c) for c in range(len(COLUMNS))] if item is not None else []


def test_history_opened_from_the_status_window_follows_a_turn_until_it_finishes(qtbot, monkeypatch, tmp_path,
                                                                                sim_roots) -> None:
    from hermes_tray_core import TraySettings, save_settings, settings_file

    save_settings(TraySettings(hermes_command=tuple(sim_command(sim_roots["auto-continue"]))), settings_file())
    home, key = make_home(tmp_path / "hermes", turn_seconds=1.5, title="Refactor the config parser")
    app = _trayless(qtbot, monkeypatch, home)
    try:
        menu = app.status_window.menu_button.menu()
        assert menu is app.menu and app.status_window.menu_button.isVisible()
        for text in ("History…", "About Hermes Tray", "Open log folder", "Hermes auto-continue", "Ask me",
                     "Resume automatically", "Only list them", "Settings…", "Quit"):
            assert _entry(menu, text).isEnabled(), text

        _entry(menu, "History…").trigger()  # opened before anything happened
        win = app._dialogs["history"]
        qtbot.waitUntil(win.isVisible, timeout=5000)
        assert win.tree.topLevelItemCount() == 0
        reloads = []
        monkeypatch.setattr(win, "_load", lambda f=win._load: reloads.append(1) or f())

        plant_marker(home, key, "Refactor the config parser so unknown keys warn")  # the backend died mid-turn
        qtbot.waitUntil(lambda: _row(win)[3:4] == ["Waiting for you"], timeout=20000)
        assert _row(win)[0] == "Refactor the config parser"
        assert not win.resume_button.isEnabled(), "never resumed: nothing to resume again"

        win.tree.topLevelItem(0).setExpanded(True)  # the trail stays open while it grows
        app.controller.resume(app.controller.state.pending[0].key, origin="menu")
        qtbot.waitUntil(lambda: _row(win)[3:4] == ["Resumed and finished"], timeout=30000)
        item = win.tree.topLevelItem(0)
        assert item.isExpanded() and win.tree.currentItem() is item
        trail = [item.child(i).text(0) for i in range(item.childCount())]
        assert trail[0] == "You were told" and trail[-1] == "Finished", trail
        assert "You chose Resume" in trail
        assert reloads, "History read the ledger again by itself"
    finally:
        for w in list(app._dialogs.values()):
            w.close()
        app.shutdown()


def test_resume_again_only_for_a_turn_resumed_before_that_waits_again(qtbot, tmp_path) -> None:
    t0 = time.time() - 300
    book.record("notified", home=str(tmp_path), session_key="never", started_at=t0, via="desktop-notifier")
    for ev in ("approved", "dispatched", "failed"):
        book.record(ev, home=str(tmp_path), session_key="again", started_at=t0 + 1, attempt=1, via="tray-menu")
    win = HistoryWindow(lambda: ledger().turns(500), pending=lambda ident: True, watch=[ledger().path])
    qtbot.addWidget(win)
    enabled = {}
    for i in range(win.tree.topLevelItemCount()):
        win.tree.setCurrentItem(win.tree.topLevelItem(i))
        enabled[win.selected_turn().session_key] = win.resume_button.isEnabled()
    assert enabled == {"never": False, "again": True}
    never = next(win.tree.topLevelItem(i) for i in range(2) if win.tree.topLevelItem(i).text(3) == "Waiting for you")
    assert never.child(0).text(3) == "by a notification"  # not the library's name
