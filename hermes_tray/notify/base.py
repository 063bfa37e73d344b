"""The notifier interface the controller talks to: it shows :class:`~hermes_tray.notify.note.Note` values; answers
come back on ``activated`` (note key, action key; ``"default"`` is a click on the body) in the Qt thread.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from hermes_tray.notify.note import Action, Note

__all__ = ["Action", "Note", "Notifier"]


class Notifier(QObject):
    """Base: shows notes, reports presses. Subclasses implement ``show`` (and ``close``, ``prepare``, ``shutdown``)."""

    activated = Signal(str, str)  # note key, action key ("default" = body click)
    dismissed = Signal(str)  # note key: closed without an answer (the turn stays pending)
    ready = Signal()  # capabilities known (supports_actions is final)
    # the Note shown, reached the user? Every show() ends in one ``delivered``: True once the note
    # is on screen (or in the only channel this session has), False when it went nowhere a person
    # looks (the notification server is not up yet): such a note does not count as having asked.
    delivered = Signal(object, bool)

    name = "none"

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.supports_actions = False
        self.supports_click = False
        self.available = False

    def show(self, note: Note) -> None:
        """Show ``note`` (replacing the one with the same key). Never raises."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Get ready to show notes soon (load whatever is loaded lazily). Never raises."""

    def close(self, key: str) -> None:
        """Withdraw the note with ``key`` if it is still up. Never raises."""

    def shutdown(self) -> None:
        """Release the back end (threads, bus connections)."""
