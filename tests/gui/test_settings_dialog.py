"""Settings: backend keys land in each home's config.yaml (comments kept), tray keys in config.toml,
bad input is flagged inline and blocks saving, and changes apply without a restart."""

from __future__ import annotations

from pathlib import Path

from fakes import RecordingNotifier
from PySide6.QtWidgets import QDialogButtonBox

from hermes_tray.app.settings_dialog import SettingsDialog
from hermes_tray.controller import Controller
from hermes_tray.engine import CoreEngine
from hermes_tray.watch.detector import ScanReport
from hermes_tray_core.hermes.homes import discover_homes
from hermes_tray_core.stores.settings import load_settings

CONFIG = """\
# my Hermes config
model:
  default: gpt-x  # keep me
desktop:
  auto_continue:
    enabled: true
    freshness_minutes: 15
    max_attempts: 2
"""


def _controller(tmp_path: Path, homes: list[Path]) -> Controller:
    for h in homes:
        h.mkdir(parents=True, exist_ok=True)
        (h / "config.yaml").write_text(CONFIG)
    engine = CoreEngine([str(h) for h in homes])
    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(homes=tuple(discover_homes(explicit=[str(h) for h in homes]))))
    return ctrl


def test_backend_values_written_to_config_yaml_keeping_comments(qtbot, tmp_path) -> None:
    home = tmp_path / "hermes"
    ctrl = _controller(tmp_path, [home])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    assert dlg.freshness.value() == 15 and dlg.attempts.value() == 2 and dlg.enabled_box.isChecked()
    dlg.freshness.setValue(30)
    dlg.attempts.setValue(3)
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    text = (home / "config.yaml").read_text()
    assert "freshness_minutes: 30" in text and "max_attempts: 3" in text
    assert "# my Hermes config" in text and "default: gpt-x  # keep me" in text
    assert not dlg.isVisible()


def test_all_homes_writes_every_home(qtbot, tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ctrl = _controller(tmp_path, [a, b])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    assert dlg.home_combo.itemText(0) == "All homes"
    dlg.enabled_box.setChecked(False)
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    for h in (a, b):
        assert "enabled: false" in (h / "config.yaml").read_text()


def test_tray_settings_apply_without_restart(qtbot, tmp_path) -> None:
    ctrl = _controller(tmp_path, [tmp_path / "h"])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    dlg.mode_combo.setCurrentIndex(dlg.mode_combo.findData("auto"))
    dlg.prompts_box.setChecked(False)
    assert dlg.idle_timeout.value() == 600  # Hermes' own inactivity limit, by default
    dlg.idle_timeout.setValue(900)
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert ctrl.settings.mode == "auto" and ctrl.state.mode == "auto"
    saved = load_settings()
    assert saved.mode == "auto" and saved.show_prompts is False and saved.continuation_idle_timeout == 900.0


def test_bad_hermes_command_is_flagged_inline_and_blocks_saving(qtbot, tmp_path) -> None:
    ctrl = _controller(tmp_path, [tmp_path / "h"])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.command_edit.setText('"/opt/hermes/bin/hermes')  # unbalanced quote
    assert not dlg.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()
    assert dlg.command_note.isVisible() and "quote" in dlg.command_note.text()
    dlg.command_edit.setText("/nonexistent/hermes --profile x")
    assert dlg.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()  # a warning, not an error
    assert "not found" in dlg.command_note.text()
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert load_settings().hermes_command == ("/nonexistent/hermes", "--profile", "x")


def test_unparseable_config_is_reported_and_left_alone(qtbot, tmp_path) -> None:
    home = tmp_path / "h"
    ctrl = _controller(tmp_path, [home])
    broken = "desktop: [unclosed\n"
    (home / "config.yaml").write_text(broken)
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.home_note.isVisible()
    dlg.freshness.setValue(45)
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert (home / "config.yaml").read_text() == broken


def test_hermes_command_with_tilde_is_saved_expanded_and_shown_short(qtbot, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    ctrl = _controller(tmp_path, [tmp_path / "h"])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    dlg.command_edit.setText("~/.local/bin/hermes")
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert load_settings().hermes_command == (str(tmp_path / ".local/bin/hermes"),)
    again = SettingsDialog(ctrl)
    qtbot.addWidget(again)
    assert again.command_edit.text() == "~/.local/bin/hermes"


def test_menu_switch_turns_hermes_auto_continue_off_in_every_existing_home(qtbot, tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ctrl = _controller(tmp_path, [a, b])
    ctrl.on_scan(ScanReport(homes=tuple(discover_homes(explicit=[str(a), str(b), str(tmp_path / "missing")]))))
    messages: list[str] = []
    ctrl.message.connect(messages.append)
    with qtbot.waitSignal(ctrl.rescan_requested, timeout=5000):
        ctrl.set_backend_enabled(False)
    assert messages == []
    for h in (a, b):
        assert "enabled: false" in (h / "config.yaml").read_text()
    assert not (tmp_path / "missing").exists()


def test_settings_and_menu_changes_are_journalled_and_shown_in_history(qtbot, tmp_path) -> None:
    """Every change the tray writes — backend keys from the dialog or the menu switch, its own settings —
    is a config-changed decision in the ledger, and the History window lists it."""
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray_core.stores.ledger import ledger

    home = tmp_path / "hermes"
    ctrl = _controller(tmp_path, [home])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    dlg.freshness.setValue(30)
    dlg.mode_combo.setCurrentIndex(dlg.mode_combo.findData("auto"))
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    ctrl.set_backend_enabled(False)
    ctrl.set_backend_enabled(False)  # no change: nothing recorded
    assert ctrl.drain(5)
    changes = [e for e in ledger().history(50) if e["event"] == "config-changed"]
    got = {(e["home"], e["key"], repr(e["old"]), repr(e["new"]), e["by"]) for e in changes}
    assert got == {
        (str(home.resolve()), "freshness_minutes", "15", "30", "tray"),
        (None, "mode", "'ask'", "'auto'", "tray"),
        (str(home.resolve()), "enabled", "True", "False", "tray"),
    }, got
    assert changes[0]["key"] == "enabled"  # newest first
    win = HistoryWindow(ctrl.engine.history)
    qtbot.addWidget(win)
    tree = win.tree
    rows = [[tree.topLevelItem(r).text(c) for c in range(tree.columnCount())] for r in range(tree.topLevelItemCount())]
    assert rows[0][0] == "Hermes settings changed" and rows[0][1] == "default" and rows[0][2]  # a real time stamp
    details = [r[3] for r in rows]
    assert "enabled: on → off, from the tray" in details
    assert "freshness_minutes: 15 → 30, from the tray" in details
    assert any(r[0] == "Tray settings changed" and r[1] == "" and r[3] == "mode: ask → auto, from the tray"
               for r in rows)


def test_a_managed_value_is_shown_locked_and_never_written(qtbot, tmp_path, monkeypatch) -> None:
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "config.yaml").write_text("desktop:\n  auto_continue:\n    enabled: false\n")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    home = tmp_path / "hermes"
    ctrl = _controller(tmp_path, [home])
    dlg = SettingsDialog(ctrl)
    qtbot.addWidget(dlg)
    assert not dlg.enabled_box.isChecked()  # what Hermes uses: the administrator's value
    assert not dlg.enabled_box.isEnabled() and str(managed / "config.yaml") in dlg.enabled_box.toolTip()
    assert dlg.freshness.isEnabled() and "administrator" in dlg.home_note.text()
    dlg.enabled_box.setChecked(True)  # even if it were toggled, the managed key is never written
    dlg.freshness.setValue(40)
    with qtbot.waitSignal(ctrl.applied, timeout=5000):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    text = (home / "config.yaml").read_text()
    assert "freshness_minutes: 40" in text and "enabled: true" in text  # the user's own line is untouched
