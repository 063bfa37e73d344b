"""Settings: Hermes' auto-continue keys per home (or all homes), written to ``config.yaml`` through the engine, and
the tray's own. Values are checked as they are typed (OK stays disabled, the line under the field says why);
changes apply without a restart.
"""

from __future__ import annotations

import os
import shlex
import shutil
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from hermes_tray.app.icons import app_icon
from hermes_tray.app.widgets import text
from hermes_tray.format import short_path
from hermes_tray.model.settings import BackendValues, SettingsModel, SettingsSnapshot

ALL_HOMES = "__all__"
__all__ = ["BackendValues", "SettingsDialog", "SettingsModel", "SettingsSnapshot"]
MODE_LABELS = (("ask", "Ask me (notification with buttons)"), ("auto", "Resume automatically"), ("list", "Only list them"))


def _join(args) -> str:  # noqa: ANN001
    """``shlex.join`` that leaves a leading ``~`` readable (it is expanded again on save)."""
    import re

    return " ".join(a if re.fullmatch(r"[\w@%+=:,./~-]+", a) else shlex.quote(a) for a in args)


def _spin(low: int, high: int, suffix: str, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSuffix(suffix)
    box.setToolTip(tip)
    return box


class SettingsDialog(QDialog):
    applied = Signal()

    def __init__(self, model: SettingsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setWindowTitle("Settings")  # Qt adds " — Hermes Tray"
        self.setWindowIcon(app_icon())
        self._snap = model.snapshot()

        root = QVBoxLayout(self)
        backend_box = QGroupBox("Hermes auto-continue (written to each home's config.yaml)")
        bform = QFormLayout(backend_box)
        self.home_combo = QComboBox()
        if len(self._snap.homes) > 1:
            self.home_combo.addItem("All homes", ALL_HOMES)
        for path, label in self._snap.homes:
            self.home_combo.addItem(label, path)
        self.home_combo.currentIndexChanged.connect(self._load_home)
        bform.addRow("Home", self.home_combo)
        self.enabled_box = QCheckBox("Continue interrupted turns")
        bform.addRow("Enabled", self.enabled_box)
        self.freshness = _spin(1, 24 * 60, " min", "Turns older than this are not continued (Hermes' freshness window)")
        bform.addRow("Freshness window", self.freshness)
        self.attempts = _spin(1, 20, "", "How many automatic continuations one turn may get")
        bform.addRow("Retry budget", self.attempts)
        self.home_note = text()
        bform.addRow(self.home_note)
        self._tooltips = {"enabled": self.enabled_box.toolTip(), "freshness_minutes": self.freshness.toolTip(),
                          "max_attempts": self.attempts.toolTip()}
        root.addWidget(backend_box)

        tray_box = QGroupBox("This tray")
        tform = QFormLayout(tray_box)
        self.mode_combo = QComboBox()
        for value, label in MODE_LABELS:
            self.mode_combo.addItem(label, value)
        tform.addRow("When a turn is interrupted", self.mode_combo)
        self.notify_box = QCheckBox("Show desktop notifications")
        tform.addRow(self.notify_box)
        self.prompts_box = QCheckBox("Show prompt text in notifications and lists")
        self.prompts_box.setToolTip("Off: notifications name the session only (they can appear on the lock screen)")
        tform.addRow(self.prompts_box)
        self.autostart_box = QCheckBox("Start at login")
        tform.addRow(self.autostart_box)
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("hermes (found on PATH)")
        self.command_edit.setToolTip("The Hermes launcher to run continuations with, e.g. ~/.local/bin/hermes")
        tform.addRow("Hermes command", self.command_edit)
        self.command_note = text()
        tform.addRow(self.command_note)
        from hermes_tray_core import MAX_IDLE_TIMEOUT, MIN_IDLE_TIMEOUT

        self.idle_timeout = _spin(int(MIN_IDLE_TIMEOUT), int(MAX_IDLE_TIMEOUT), " s",
                                  "A continuation is stopped after this long without any sign of progress from "
                                  "Hermes (600 s, as Hermes itself); there is no limit on its total time")
        self.idle_timeout.setSingleStep(60)
        tform.addRow("Stop a silent continuation after", self.idle_timeout)
        root.addWidget(tray_box)

        self.error_label = text()
        self.error_label.setStyleSheet("color: #b3261e;")
        self.error_label.setVisible(False)
        root.addWidget(self.error_label)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Apply
            | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(lambda: self._apply(close=True))
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QDialogButtonBox.StandardButton.Apply).clicked.connect(lambda: self._apply())
        root.addWidget(self.buttons)

        self.command_edit.textChanged.connect(self._validate)
        self._fill_tray()
        self._load_home()
        self._validate()

    # --- loading ------------------------------------------------------------------------------
    def _fill_tray(self) -> None:
        s = self._snap
        self.mode_combo.setCurrentIndex(max(0, self.mode_combo.findData(s.mode)))  # a mode not offered here: the first
        self.notify_box.setChecked(s.notify)
        self.prompts_box.setChecked(s.show_prompts)
        self.autostart_box.setChecked(bool(s.autostart))
        self.autostart_box.setEnabled(s.autostart is not None)
        if s.autostart is None:
            self.autostart_box.setToolTip("Not available on this system")
        self.command_edit.setText(_join(short_path(a) for a in s.hermes_command) if s.hermes_command else "")
        self.command_edit.setCursorPosition(0)  # the program's name, not the tail of its arguments
        self.idle_timeout.setValue(int(round(s.continuation_idle_timeout)))

    def _selected_homes(self) -> list[str]:
        value = self.home_combo.currentData()
        if value == ALL_HOMES:
            return [p for p, _ in self._snap.homes]
        return [value] if value else []

    def _load_home(self) -> None:
        homes = self._selected_homes()
        values = [self._snap.backend.get(h, BackendValues()) for h in homes]
        broken = [h for h, v in zip(homes, values, strict=True) if v.error]
        first = next((v for v in values if not v.error), BackendValues())
        self.enabled_box.setChecked(first.enabled)
        self.freshness.setValue(int(first.freshness_minutes))
        self.attempts.setValue(int(first.max_attempts))
        notes = []
        if len(homes) > 1 and len({(v.enabled, v.freshness_minutes, v.max_attempts) for v in values if not v.error}) > 1:
            notes.append("The homes differ; saving writes these values to every home.")
        for h in broken:
            notes.append(f"{h}: {self._snap.backend[h].error} — left unchanged.")
        # Keys the administrator's managed config pins: shown as Hermes uses them, never editable here.
        pinned = {k for v in values if not v.error for k in v.managed}
        for key, widget in (("enabled", self.enabled_box), ("freshness_minutes", self.freshness),
                            ("max_attempts", self.attempts)):
            widget.setEnabled(key not in pinned)
            where = next((v.managed_path for v in values if key in v.managed and v.managed_path), None)
            widget.setToolTip(f"Set by your administrator in {where}: Hermes uses this value and it cannot be "
                              "changed here." if key in pinned else self._tooltips.get(key, ""))
        if pinned:
            notes.append(f"{', '.join(sorted(pinned))}: set by your administrator's managed config, which wins "
                         "over config.yaml; not changed here.")
        self.home_note.setText("\n".join(notes))
        self.home_note.setVisible(bool(notes))

    # --- validation ---------------------------------------------------------------------------
    def command_problem(self) -> tuple[str | None, str | None]:
        """(error, warning) for the Hermes command field."""
        text = self.command_edit.text().strip()
        if not text:
            return None, None
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            return f"Hermes command: {exc} (check the quotes)", None
        if not argv:
            return "Hermes command: empty", None
        if shutil.which(os.path.expanduser(argv[0])) is None:
            return None, f"“{argv[0]}” is not found or not executable; continuations would fail until it is."
        return None, None

    def _validate(self) -> bool:
        error, warning = self.command_problem()
        if error:
            self.command_note.setText(error)
            self.command_note.setStyleSheet("color: #b3261e;")
        elif warning:
            self.command_note.setText(warning)
            self.command_note.setStyleSheet("color: #8a5a00;")
        else:
            self.command_note.setText("")
        self.command_note.setVisible(bool(error or warning))
        ok = error is None
        for b in (QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Apply):
            self.buttons.button(b).setEnabled(ok)
        return ok

    # --- applying -----------------------------------------------------------------------------
    def changes(self) -> tuple[dict[str, dict[str, Any]], dict[str, Any], bool | None]:
        """Only what differs from what was loaded, so untouched homes are never rewritten."""
        wanted = {
            "enabled": self.enabled_box.isChecked(),
            "freshness_minutes": self.freshness.value(),
            "max_attempts": self.attempts.value(),
        }
        backend: dict[str, dict[str, Any]] = {}
        for h in self._selected_homes():
            cur = self._snap.backend.get(h, BackendValues())
            if cur.error:
                continue
            diff = {k: v for k, v in wanted.items() if getattr(cur, k) != v and k not in cur.managed}
            if diff:
                backend[h] = diff
        s = self._snap
        tray: dict[str, Any] = {key: value for key, value, old in (
            ("mode", self.mode_combo.currentData(), s.mode), ("notify", self.notify_box.isChecked(), s.notify),
            ("show_prompts", self.prompts_box.isChecked(), s.show_prompts)) if value != old}
        text = self.command_edit.text().strip()
        # "~/.local/bin/hermes" is what people type; the engine gets real paths
        command = [os.path.expanduser(a) if a.startswith("~") else a for a in shlex.split(text)] if text else None
        if command != (list(s.hermes_command) if s.hermes_command else None):
            tray["hermes_command"] = command
        if self.idle_timeout.value() != int(round(s.continuation_idle_timeout)):
            tray["continuation_idle_timeout"] = float(self.idle_timeout.value())
        autostart = None
        if s.autostart is not None and self.autostart_box.isChecked() != s.autostart:
            autostart = self.autostart_box.isChecked()
        return backend, tray, autostart

    def _apply(self, *, close: bool = False) -> None:
        """Hand the changes to the model (it writes off the GUI thread); the dialog waits, responsive,
        with its buttons off, and closes on OK once everything went through."""
        if not self._validate():
            return
        backend, tray, autostart = self.changes()
        self.setEnabled(False)
        self.model.apply(backend, tray, autostart, on_done=lambda problems: self._applied(problems, close))

    def _applied(self, problems: list[str], close: bool) -> None:
        self.setEnabled(True)
        self._snap = self.model.snapshot()
        self._load_home()
        self.error_label.setText("\n".join(problems))
        self.error_label.setVisible(bool(problems))
        self.applied.emit()
        if close and not problems:
            self.accept()

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.key() == Qt.Key.Key_Escape:
            self.reject()
            return
        super().keyPressEvent(event)
