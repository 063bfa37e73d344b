"""Fakes for controller tests: a recording notifier and an in-memory engine."""

from __future__ import annotations

import threading
import time
from typing import Any

from hermes_tray.app.settings_model import BackendValues
from hermes_tray.controller import Outcome
from hermes_tray.notify.base import Note, Notifier


class RecordingNotifier(Notifier):
    name = "recording"

    def __init__(self) -> None:
        super().__init__()
        self.available = self.supports_actions = self.supports_click = True
        self.shown: list[Note] = []
        self.closed: list[str] = []

    deliver = True  # False: like a notifier whose server is not up yet

    def show(self, note: Note) -> None:
        self.shown.append(note)
        self.delivered.emit(note, self.deliver)

    def close(self, key: str) -> None:
        self.closed.append(key)

    def on_screen(self) -> dict[str, Note]:
        """What the user sees: the latest version of each note not withdrawn."""
        out: dict[str, Note] = {}
        for n in self.shown:
            out[n.key] = n
        for k in self.closed:
            out.pop(k, None)
        return out


class Settings:
    def __init__(self, **kw: Any) -> None:
        self.mode = kw.get("mode", "ask")
        self.notify = kw.get("notify", True)
        self.show_prompts = kw.get("show_prompts", True)
        self.homes = ()
        self.hermes_command = None


class FakeEngine:
    def __init__(self, **settings: Any) -> None:
        self._settings = Settings(**settings)
        self.journal: list[tuple[str, str, Any]] = []
        self.skipped: list[str] = []
        self.resumed: list[str] = []
        self.resume_outcome = Outcome("completed", "done", answer="All tests pass now.\nMore detail")
        self.resume_delay = 0.0
        self.backend_changes: list[tuple[list[str], dict]] = []
        self.acted_on: list[tuple[str, Any]] = []  # (action, record passed): its entry is the expected one

    def homes(self):
        return []

    def scan(self, homes):
        return [], [], {}

    def watch_plan(self, homes):
        return [], []

    def writers(self, homes, records):
        return []

    def skip(self, record, *, origin):
        self.acted_on.append(("skip", record))
        self.skipped.append(record.session_key)
        self.journal.append(("skipped", record.session_key, record.started_at))
        return True, ""

    def resume(self, record, *, origin, on_progress, stop: threading.Event):
        self.acted_on.append(("resume", record))
        self.resumed.append(record.session_key)
        self.journal.append(("approved", record.session_key, record.started_at))
        from hermes_tray_core.gateway import Progress

        on_progress(Progress("running", 0.5, "message.delta", 3))
        end = time.monotonic() + self.resume_delay
        while time.monotonic() < end and not stop.is_set():
            time.sleep(0.01)
        return self.resume_outcome

    def set_backend(self, home_paths, **changes):
        self.backend_changes.append((list(home_paths), changes))
        return []

    def backend_values(self, home_path):
        return BackendValues()

    def _events(self, record):
        return [e for e, k, s in self.journal if k == record.session_key and s == record.started_at]

    def asked_before(self, record):
        return any(e in ("notified", "approved", "skipped") for e in self._events(record))

    def skipped_before(self, record):
        return "skipped" in self._events(record)

    def record(self, event, record, **fields):
        self.journal.append((event, record.session_key, record.started_at))

    def history(self, limit=500):
        return []

    def settings(self):
        return self._settings

    def update_settings(self, changes):
        for k, v in changes.items():
            setattr(self._settings, k, v)
        return self._settings
