"""Ages tick: what the window, the menu and the tooltip say is the age now, in one style everywhere.

Before: "interrupted 0 s ago" stood for 13 s and more, and "just now" beside "35 s ago".
"""

from __future__ import annotations

import time

from fakes import FakeEngine, RecordingNotifier, menu_labels
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from hermes_tray.app.application import IDLE_TICK_MS, VISIBLE_TICK_MS, TrayApp, TrayOptions
from hermes_tray.watch.detector import ScanReport
from hermes_tray_core import age_text


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
        qtbot.waitUntil(lambda: app.controller is not None and menu_labels(app.menu)[0] == "No interrupted turns",
                        timeout=5000)
        assert app._clock.interval() == IDLE_TICK_MS  # nothing on screen: only the tooltip, rarely
        scanned = time.time()
        # the policy's reasons state the age too (core.deciding.policy.age_text): they must tick with the rows
        waiting = rec("s1", age_seconds=3.0, reason="interrupted 3 s ago; would be continuation 1 of 2",
                      interrupted_at=scanned - 3.0)
        stale = rec("s2", age_seconds=3.0, verdict="stale", title="Old one",
                    reason="interrupted 3 s ago, beyond the 0 min freshness window", interrupted_at=scanned - 3.0)
        app.controller.on_scan(ScanReport(records=(waiting, stale), finished=scanned))
        app._present_window(True)
        w = app.window
        assert "Interrupted 3 s ago" in w.list.item(0).text()
        assert app._clock.interval() == VISIBLE_TICK_MS
        w.list.setCurrentRow(0)
        # the age once: the row says it; the line under the list and Details do not say it again
        window_text = "\n".join([w.list.item(0).text(), w.detail.text(), w.details.text()])
        assert window_text.count("3 s ago") == 1, window_text
        assert "Would be continuation 1 of 2" in w.details.text()  # the engine's reason: behind Details
        menu_before = [label for label in menu_labels(app.menu) if "Fix the flaky test" in label]
        assert menu_before and menu_before[0].endswith("interrupted 3 s ago")
        # no new scan: the clock alone moves the ages on — the row, its tooltip, the detail line, Recent
        qtbot.waitUntil(lambda: "Interrupted 5 s ago" in w.list.item(0).text(), timeout=4000)
        assert w.list.currentRow() == 0  # updated in place: the selection stays
        said = [age_text(s) for s in (5, 6)]
        assert not any(a in w.details.text() + w.detail.text() + w.list.item(0).toolTip() for a in said)
        recent = w.recent_list.item(0)
        assert recent.text().startswith("Old one — Too old to resume · ")
        assert "interrupted 3 s ago" not in recent.toolTip()
        assert any(f"interrupted {a}, beyond" in recent.toolTip() for a in said), recent.toolTip()
        app.menu.refresh_ages()  # what the clock calls while the menu is open
        menu_after = [label for label in menu_labels(app.menu) if "Fix the flaky test" in label]
        assert menu_after and any(menu_after[0].endswith(a) for a in said), menu_after
        w.hide()
        qtbot.waitUntil(lambda: app._clock.interval() == IDLE_TICK_MS, timeout=3000)
    finally:
        app.shutdown()


def test_a_reason_without_an_age_is_left_as_it_is() -> None:
    from hermes_tray_core import restate_age

    assert restate_age("auto-continue is disabled in this home's config.yaml", 3.0, 60.0) == (
        "auto-continue is disabled in this home's config.yaml")
    assert restate_age("interrupted 3 s ago; would be continuation 1 of 2", 3.0, 125.0) == (
        "interrupted 2 min ago; would be continuation 1 of 2")
