"""The tray icon, created only once a tray host is there: a ``QSystemTrayIcon`` created before the host is up never
registers, so availability is polled; with no tray after 2 s a small status window stands in (stock GNOME has
none), and when a host appears later the icon takes over. Left click opens the prompt window.

The one place that picks the icon's kind: on a StatusNotifierItem desktop (a watcher with a host) the tray
publishes its own item (``hermes_tray.app.sni``), the only way to say ``NeedsAttention``; elsewhere, or if that
item cannot be registered, ``QSystemTrayIcon``. Never both.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from hermes_tray.app.icons import IconState, tray_icon
from hermes_tray.model.viewstate import ViewState

log = logging.getLogger(__name__)

WAIT_FOR_TRAY_SECONDS = 2.0
POLL_MS = 250
LATE_POLL_MS = 2000  # after the status window is up: a tray host that starts later is still found


class TrayPresence(QObject):
    """Owns the icon (or reports that there is none). ``shown`` fires when the icon is visible."""

    shown = Signal()
    unavailable = Signal()  # no tray yet after the wait: the caller shows the status window
    clicked = Signal()

    def __init__(self, menu: QMenu, parent: QObject | None = None, *, wait_seconds: float = WAIT_FOR_TRAY_SECONDS) -> None:
        super().__init__(parent)
        self.menu = menu
        self.icon: Any = None  # QSystemTrayIcon or SniTrayIcon (same methods); None until shown
        self.backend = ""  # "sni" (our own StatusNotifierItem) or "qt" (QSystemTrayIcon), once shown
        self._sni: Any = None  # our item while its registration is pending or live
        self._state = ViewState()
        self._deadline = time.monotonic() + wait_seconds
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    def start(self) -> None:
        if QSystemTrayIcon.isSystemTrayAvailable():
            self._create()
        else:
            log.info("no system tray yet; waiting up to %.0f s", self._deadline - time.monotonic())
            self._timer.start()

    def _poll(self) -> None:
        if QSystemTrayIcon.isSystemTrayAvailable():
            self._timer.stop()
            self._create()
        elif time.monotonic() >= self._deadline and self._timer.interval() == POLL_MS:
            self._timer.setInterval(LATE_POLL_MS)
            log.warning("no system tray available: showing the status window until one appears")
            self.unavailable.emit()

    def _create(self) -> None:
        if self._sni is None and self._create_sni():
            return
        self._create_qt()

    def _create_sni(self) -> bool:
        """Start our own StatusNotifierItem if the desktop has a watcher with a host (Linux)."""
        if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
            return False
        from hermes_tray.app.sni.probe import watcher_present

        if not watcher_present():  # XEmbed panels: jeepney is never loaded
            return False
        try:
            from hermes_tray.app.sni.item import open_sni_tray
        except ImportError as exc:  # jeepney missing: Qt's tray still works
            log.warning("cannot publish the tray item (%s): using Qt's tray icon", exc)
            return False
        sni = open_sni_tray(self.menu, tray_icon(IconState(self._state.icon_state)),
                            tray_icon(IconState.ATTENTION))
        if sni is None:
            return False
        sni.setParent(self)
        self._sni = sni
        sni.setToolTip(self._state.tooltip())
        sni.set_needs_attention(self._state.needs_attention)
        sni.activated.connect(self._on_activated)
        sni.registered.connect(self._on_sni_registered)
        sni.failed.connect(self._on_sni_failed)
        sni.register()
        return True

    @property
    def registering(self) -> bool:
        """Our item waits for the watcher's answer (``shown`` follows, from it or from the fallback)."""
        return self._sni is not None and self.icon is None

    def _on_sni_registered(self) -> None:
        if self.icon is None and self._sni is not None:
            self.icon, self.backend = self._sni, "sni"
            self.shown.emit()

    def _on_sni_failed(self, why: str) -> None:
        sni, self._sni = self._sni, None
        if sni is None:
            return
        if self.icon is sni:
            self.icon = None
        sni.deleteLater()
        self._create_qt()

    def _create_qt(self) -> None:
        icon = QSystemTrayIcon(tray_icon(IconState(self._state.icon_state)), self)
        icon.setContextMenu(self.menu)
        icon.setToolTip(self._state.tooltip())
        icon.activated.connect(self._on_activated)
        icon.show()
        self.icon, self.backend = icon, "qt"
        self.shown.emit()

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.clicked.emit()

    def set_state(self, state: ViewState) -> None:
        previous = self._state
        self._state = state
        icon = self.icon if self.icon is not None else self._sni  # a pending item is kept current too
        if icon is None:
            return
        if state.icon_state != previous.icon_state:
            icon.setIcon(tray_icon(IconState(state.icon_state)))
        if icon is self._sni:
            icon.set_needs_attention(state.needs_attention)
        self.refresh_tooltip()

    def refresh_tooltip(self) -> None:
        """Re-say the tooltip's elapsed times as of now (only sent when the text changed), on whichever
        icon shows: Qt's, or our own StatusNotifierItem."""
        icon = self.icon if self.icon is not None else self._sni
        if icon is not None:
            tip = self._state.tooltip()
            if tip != icon.toolTip():
                icon.setToolTip(tip)

    def hide(self) -> None:
        """On quit: Qt's icon goes from the tray; our item leaves the bus, so the watcher drops it."""
        if self.icon is not None:
            self.icon.hide()
        if self._sni is not None:
            self._sni.close()
