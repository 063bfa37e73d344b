"""The assembled tray (offscreen): icon first, then the engine; menu, window and notifications are
wired to the same coordinator, so what a user clicks reaches the engine."""

from __future__ import annotations

from fakes import FakeEngine, RecordingNotifier, menu_action, menu_labels
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from hermes_tray.app.application import TrayApp, TrayOptions
from hermes_tray.watch.detector import ScanReport


def _tray(qtbot, monkeypatch, engine: FakeEngine) -> TrayApp:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    notifier = RecordingNotifier()
    monkeypatch.setattr("hermes_tray.notify.make_notifier", lambda *a, **k: notifier)
    hits = []
    app = TrayApp(QApplication.instance(), TrayOptions(engine=engine, autostart=None,
                                                       extra_actions=[("Demo: crash the backend", lambda: hits.append(1))]))
    app.hits = hits
    app.start()
    assert app.presence.icon is not None, "the icon comes first"
    assert menu_labels(app.menu)[0] == "Looking for interrupted turns…"
    qtbot.waitUntil(lambda: app.controller is not None and menu_labels(app.menu)[0] == "No interrupted turns",
                    timeout=5000)
    return app


def test_menu_window_and_notification_reach_the_engine(qtbot, monkeypatch, rec) -> None:
    engine = FakeEngine()
    app = _tray(qtbot, monkeypatch, engine)
    try:
        app.controller.on_scan(ScanReport(records=(rec("s1"), rec("s2", title="Second"))))
        assert app.presence.icon.toolTip().splitlines()[1] == "2 interrupted turns waiting"
        notes = app.notifier.shown
        assert notes and notes[-1].title == "2 Hermes turns interrupted"

        sub = next(a.menu() for a in app.menu.actions() if a.text().startswith("Second"))
        with qtbot.waitSignal(app.controller.skip_done, timeout=5000):
            sub.actions()[1].trigger()  # Skip
        assert engine.skipped == ["s2"]

        app.presence.clicked.emit()  # left click on the icon
        assert app.window.isVisible() and app.window.list.count() == 1
        with qtbot.waitSignal(app.controller.rescan_requested, timeout=5000):
            app.window.resume_button.click()
        assert engine.resumed == ["s1"]

        menu_action(app.menu, "Demo: crash the backend").trigger()
        assert app.hits == [1]
        menu_action(app.menu, "Only list them").trigger()
        qtbot.waitUntil(lambda: engine.settings().mode == "list" and app.controller.state.mode == "list",
                        timeout=5000)
    finally:
        app.shutdown()


class _BrokenEngine(FakeEngine):
    def homes(self):
        raise RuntimeError("homes exploded")


def test_engine_start_failure_is_shown_not_loading_forever(qtbot, monkeypatch) -> None:
    """An exception while starting the engine: the menu and tooltip say so, Quit still works."""
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr("hermes_tray.notify.make_notifier", lambda *a, **k: RecordingNotifier())
    quits = []
    monkeypatch.setattr(TrayApp, "quit", lambda self: quits.append(1))
    app = TrayApp(QApplication.instance(), TrayOptions(engine=_BrokenEngine(), autostart=None))
    app.start()
    try:
        qtbot.waitUntil(lambda: app.start_error is not None, timeout=5000)
        labels = menu_labels(app.menu)
        assert "Looking for interrupted turns…" not in labels
        assert any("could not start" in label and "homes exploded" in label for label in labels)
        assert "could not start" in app.presence.icon.toolTip()
        menu_action(app.menu, "Quit").trigger()
        assert quits == [1]
    finally:
        app.shutdown()


def test_a_failing_notification_does_not_use_up_the_question(qtbot, rec) -> None:
    """announce() raising (a notifier bug): the scan is still published and the turn is asked later."""
    from hermes_tray.controller import Controller

    class Flaky(RecordingNotifier):
        fail = True

        def show(self, note):
            if self.fail:
                raise RuntimeError("notifier bug")
            super().show(note)

    notes = Flaky()
    ctrl = Controller(FakeEngine(), notes)
    r = rec("s1")
    ctrl.on_scan(ScanReport(records=(r,)))
    assert len(ctrl.state.pending) == 1  # published despite the failure
    notes.fail = False
    ctrl.on_scan(ScanReport(records=(r,)))
    assert len(notes.shown) == 1


def test_the_demo_never_registers_start_at_login(monkeypatch, tmp_path) -> None:
    """Ticking "Start at login" inside the demo registered the demo for every login: the demo's tray
    has no autostart at all (the entry is greyed out)."""
    import hermes_tray.app as app_pkg
    from hermes_tray.demo.home import create_demo

    seen = []
    monkeypatch.setattr("hermes_tray.app.application.run_tray", lambda options: seen.append(options) or 0)
    demo = create_demo(tmp_path / "demo", start_turn=False)
    try:
        assert app_pkg.run_demo(demo) == 0
    finally:
        demo.cleanup()
    (options,) = seen
    assert options.autostart is None
    assert [label for label, _cb in options.extra_actions] == ["Demo: crash the backend"]


def test_window_titles_name_the_window_once_and_about_says_what_was_found(qtbot, monkeypatch, tmp_path) -> None:
    """Qt adds the application name to a title: "Hermes Tray — Settings — Hermes Tray" was the result
    of adding it by hand too. The About box names the version, the Hermes found and the homes."""
    from hermes_tray.app.about import AboutDialog
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray.app.prompt_window import PromptWindow
    from hermes_tray_core import __version__

    for w in (PromptWindow(), HistoryWindow(lambda: [])):
        qtbot.addWidget(w)
        assert "Hermes Tray" not in w.windowTitle(), w.windowTitle()
    missing = tmp_path / "no-hermes" / "bin" / "python"
    about = AboutDialog([str(tmp_path / ".hermes")], [str(missing)])
    qtbot.addWidget(about)
    text = about.text.text()
    assert f"Hermes Tray {__version__}" in text and str(tmp_path / ".hermes") in text
    assert "LGPL-3.0" in text and "https://pypi.org/project/hermes-agent/" in text
    qtbot.waitUntil(lambda: "looking" not in about.text.text(), timeout=10000)
    assert "not usable" in about.text.text()  # the Hermes it was pointed at does not exist: said, not hidden
    about.show()
    qtbot.waitExposed(about)
    label = about.text
    assert label.height() >= label.heightForWidth(label.width()), "the About text is cut"


def test_about_links_only_to_places_that_exist(qtbot) -> None:
    """Before: About linked "hermes-tray on PyPI", a page for a package that is not published. Now its links are
    Hermes Agent's page (published: the tests install it from the index) and files on this machine: the read me
    this installation carries, the third-party notices."""
    import re
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    from hermes_tray.app.about import AboutDialog

    about = AboutDialog([])
    qtbot.addWidget(about)
    qtbot.waitUntil(lambda: "Read me" in about.text.text() and "Third-party" in about.text.text(), timeout=10_000)
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', about.text.text())
    web = [href for href, _name in links if not href.startswith("file:")]
    assert web == ["https://pypi.org/project/hermes-agent/"], links
    files = {name: Path(unquote(urlparse(href).path)) for href, name in links if href.startswith("file:")}
    assert set(files) == {"Read me", "Third-party software and licences"}, links
    assert all(f.is_file() for f in files.values())
    assert files["Read me"].read_text(encoding="utf-8").startswith("# hermes-tray")


def test_with_no_program_to_open_it_the_log_folder_and_the_notices_show_their_path(qtbot, monkeypatch,
                                                                                  tmp_path) -> None:
    """Issue 25.10. Before: "Open log folder" and About's "Third-party software and licences" did nothing on a
    desktop with no launcher (only stderr said so). Now a window shows the path, with Copy path."""
    from PySide6.QtGui import QDesktopServices, QGuiApplication

    from hermes_tray.app.about import AboutDialog
    from hermes_tray_core.stores.paths import log_dir

    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url.toString()) and False))
    app = _tray(qtbot, monkeypatch, FakeEngine())
    try:
        menu_action(app.menu, "Open log folder").trigger()
        box = app._dialogs["path"]
        assert box is not None and box.isVisible() and opened
        qtbot.addWidget(box)  # closed with the test: a window left open would take the next test's focus
        assert box.informativeText() == str(log_dir())
        copy = next(b for b in box.buttons() if b.text() == "&Copy path")
        copy.click()
        assert QGuiApplication.clipboard().text() == str(log_dir()) and box.isVisible()
        notices = tmp_path / "THIRD-PARTY-NOTICES.txt"
        notices.write_text("notices")
        about = AboutDialog([])
        qtbot.addWidget(about)
        about.open_link(notices.as_uri())
        assert about.shown_path is not None and about.shown_path.informativeText() == str(notices)
        about.shown_path.close()
    finally:
        app.shutdown()
