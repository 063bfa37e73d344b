"""Controller test parts: a recording notifier, and an engine that acts on nothing but records for real.

``FakeEngine`` stands in for the engine's actions (skip, resume, config) so a test can script their
results; its ledger is the real one (``ledger()`` in the test's private state dir), so ask-once runs exactly as in
the tray."""

from __future__ import annotations

import threading
import time
from typing import Any

from hermes_tray.contract import BackendValues, Outcome, RunResult, ScanSummary, SkipReply
from hermes_tray.notify.base import Note, Notifier
from hermes_tray_core.stores.ledger import ledger
from tests.support import book


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
        self.skipped: list[str] = []
        self.resumed: list[str] = []
        self.resume_outcome = RunResult(Outcome.COMPLETED, "done", answer="All tests pass now.\nMore detail")
        self.skip_delay = 0.0
        self.resume_delay = 0.0
        self.backend_changes: list[tuple[list[str], dict]] = []
        self.acted_on: list[tuple[str, Any]] = []  # (action, record passed): its entry is the expected one

    def homes(self):
        return []

    def scan(self, homes):
        return [], [], ScanSummary()

    def watch_plan(self, homes):
        return [], []

    def writers(self, homes, records):
        return []

    def writer_exited(self, pid):
        return None

    def skip(self, record, *, origin):
        time.sleep(self.skip_delay)
        self.acted_on.append(("skip", record))
        self.skipped.append(record.session_key)
        self.note("skipped", record)
        return SkipReply(True)

    def resume(self, record, *, origin, on_progress, stop: threading.Event):
        self.acted_on.append(("resume", record))
        self.resumed.append(record.session_key)
        self.note("approved", record)
        from hermes_tray_core.continuing.gateway import Progress

        on_progress(Progress("running", 0.5, "message.delta", 3))
        end = time.monotonic() + self.resume_delay
        while time.monotonic() < end and not stop.is_set():
            time.sleep(0.01)
        return self.resume_outcome

    def snooze(self, record, until, *, origin):
        from hermes_tray_core import snooze_turn

        snooze_turn(record, until, via=f"tray-{origin}")  # the real ledger, as the engine writes it

    def set_backend(self, home_paths, **changes):
        self.backend_changes.append((list(home_paths), changes))
        return []

    def backend_values(self, home_path):
        return BackendValues()

    def ledger(self):
        return ledger()

    def note(self, event: str, record: Any) -> None:
        """Record ``event`` for ``record`` as another process (the CLI, an earlier tray) would."""
        ledger().record(event, record.turn.ident)

    @property
    def events(self) -> list[tuple[str, str, Any]]:
        """(event, session key, started_at) in the real ledger, oldest first."""
        return [(e["event"], e["session_key"], e["started_at"]) for e in reversed(book.history(1000))]

    def history(self, limit=500):
        return []

    def history_files(self):
        return [ledger().path]

    def session_titles(self, turns, *, prompts=True):
        return {}

    def settings(self):
        return self._settings

    def update_settings(self, changes):
        for k, v in changes.items():
            setattr(self._settings, k, v)
        return self._settings


def menu_labels(menu: Any) -> list[str]:
    """The top-level entries of a menu as a user reads them (separators as ``---``)."""
    return [a.text() if not a.isSeparator() else "---" for a in menu.actions()]


def menu_action(menu: Any, text: str) -> Any:
    """The entry labelled ``text``, in the menu or its submenus (depth first), or None."""
    stack = list(menu.actions())
    while stack:
        act = stack.pop(0)
        if act.text() == text:
            return act
        if act.menu() is not None:
            stack.extend(act.menu().actions())
    return None
