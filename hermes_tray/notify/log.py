"""Fallback notifier: no notification server (SSH, minimal desktops, headless helper) → the log."""

from __future__ import annotations

import logging

from hermes_tray.notify.base import Note, Notifier

log = logging.getLogger("hermes_tray.notifications")


class LogNotifier(Notifier):
    """Writes each note to the log. No buttons: decisions go through the menu, window or CLI."""

    name = "log"

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.available = True
        self.shown: list[Note] = []

    def show(self, note: Note) -> None:
        self.shown.append(note)
        del self.shown[:-50]
        # never the body: it may quote the prompt (show_prompts); log_line is identity only
        log.info("notification: %s", note.log_line or note.key)
        self.delivered.emit(note, True)  # the log is this session's only channel
