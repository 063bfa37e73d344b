"""Load the notification stack only when something could need it: desktop-notifier (asyncio, ssl, a D-Bus client)
is about a third of an idle tray's memory, so it is created when the controller first sees a running turn
(``prepare``: ready well before that turn can die) or, at the latest, for the first note.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject

from hermes_tray.notify.base import Note, Notifier

log = logging.getLogger(__name__)


class LazyNotifier(Notifier):
    def __init__(self, factory: Callable[[], Notifier], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._factory = factory
        self._real: Notifier | None = None

    @property
    def real(self) -> Notifier:
        if self._real is None:
            real = self._factory()
            real.activated.connect(self.activated.emit)
            real.dismissed.connect(self.dismissed.emit)
            real.delivered.connect(self.delivered.emit)
            real.ready.connect(self._on_ready)
            self._real = real
            self.name = real.name
            self._copy_caps()
            log.info("notifications via %s", real.name)
        return self._real

    def _copy_caps(self) -> None:
        real = self._real
        if real is not None:
            self.available = real.available
            self.supports_actions = real.supports_actions
            self.supports_click = real.supports_click

    def _on_ready(self) -> None:
        self._copy_caps()
        self.ready.emit()

    def prepare(self) -> None:
        """Create the real notifier now (a turn is running: it may need to speak soon)."""
        _ = self.real

    def show(self, note: Note) -> None:
        self.real.show(note)

    def close(self, key: str) -> None:
        if self._real is not None:
            self._real.close(key)

    def shutdown(self) -> None:
        if self._real is not None:
            self._real.shutdown()
