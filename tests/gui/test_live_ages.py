"""Ages tick: what the window, the menu and the tooltip say is the age now, in one style everywhere.

Before: "interrupted 0 s ago" stood for 13 s and more, and "just now" beside "35 s ago".
"""

from __future__ import annotations

import time

from fakes import FakeEngine, RecordingNotifier
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from hermes_tray.app.application import IDLE_TICK_MS, VISIBLE_TICK_MS, TrayApp, TrayOptions
from hermes_tray.format import age_text
from hermes_tray.watch.detector import ScanReport


def test_one_style_for_every_age() -> None:
    assert [age_text(s) for s in (0, 4.9, 35, 59.9, 60, 119, 3599, 5400, 7200, 86400 * 2)] == [
        "0 s ago", "4 s ago", "35 s ago", "59 s ago", "1 min ago", "1 min ago", "59 min ago", "1 h ago",
        "2 h ago", "2 days ago"]


def test_the_window_menu_and_tooltip_tick(qtbot, monkeypatch, rec) -> None:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr("hermes_tray.notify.make_notifier", lambda *a, **k: RecordingNotifier())
    app = TrayApp(QApplication.instance(), TrayOptions(engine=FakeEngine(), autostart=None))
    app.start()
    try:
        # the detector's own first scan (of no homes) first, so it cannot replace the one injected below
        qtbot.waitUntil(lambda: app.controller is not None and app.menu.action_labels()[0] == "No interrupted turns",
                        timeout=5000)
        assert app._clock.interval() == IDLE_TICK_MS  # nothing on screen: only the tooltip, rarely
        scanned = time.time()
        app.controller.on_scan(ScanReport(records=(rec("s1", age_seconds=3.0),), finished=scanned))
        app._present_window(True)
        w = app.window
        assert "Interrupted 3 s ago" in w.list.item(0).text()
        assert app._clock.interval() == VISIBLE_TICK_MS
        w.list.setCurrentRow(0)
        # no new scan: the clock alone moves the age on
        qtbot.waitUntil(lambda: "Interrupted 5 s ago" in w.list.item(0).text(), timeout=4000)
        assert w.list.currentRow() == 0  # updated in place: the selection stays
        labels = [a.text() for a in app.menu.actions()]
        app.menu.refresh_ages()
        assert any(label.endswith("s ago") for label in labels)
        w.hide()
        qtbot.waitUntil(lambda: app._clock.interval() == IDLE_TICK_MS, timeout=3000)
    finally:
        app.shutdown()
