"""desktop-notifier back end, run on its own asyncio loop thread.

Its own thread rather than qasync: the helper runs a ``QCoreApplication`` and the tray a
``QApplication``, and neither should have its event loop replaced for a bus connection.
Button presses arrive on that thread and are re-emitted as Qt signals (queued into the GUI
thread). On Linux the D-Bus back end is extended to pass ``replaces_id`` so a crash storm
updates one notification in place instead of stacking ten.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from concurrent.futures import Future

from PySide6.QtCore import QObject

from hermes_tray.notify.base import Note, Notifier

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0  # a failed server probe is retried by a later note, at most this often


def desktop_available() -> bool:
    """A notification server may be reachable: a session bus on Linux; always elsewhere."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DBUS_SESSION_BUS_ADDRESS")) or os.path.exists(
            f"/run/user/{os.getuid()}/bus"
        )
    return True


def _make_replacing_backend(app_name: str, app_icon):
    """A DBus back end whose next Notify replaces a given id (the spec's ``replaces_id``)."""
    from desktop_notifier.backends.dbus import DBusDesktopNotifier

    class ReplacingDBusBackend(DBusDesktopNotifier):
        next_replaces_id = 0

        async def _init_dbus(self):
            interface = await super()._init_dbus()
            original = interface.call_notify
            backend = self

            async def call_notify(app, _replaces_id, icon, summary, body, actions, hints, *args, **kwargs):
                replaces, backend.next_replaces_id = backend.next_replaces_id, 0
                return await original(app, replaces, icon, summary, body, actions, with_desktop_entry(hints),
                                      *args, **kwargs)

            interface.call_notify = call_notify
            return interface

        def platform_id(self, identifier: str) -> int | None:
            return self._platform_to_interface_notification_identifier.inverse.get(identifier)

    return ReplacingDBusBackend(app_name, app_icon)


DESKTOP_ENTRY = "hermes-tray"  # the installed hermes-tray.desktop: servers take the app's name/icon from it


def with_desktop_entry(hints):
    """The spec's ``desktop-entry`` hint added to desktop-notifier's hints (``a{sv}`` or ``a{ss}``)."""
    if not isinstance(hints, dict) or not hints:  # no hints at all: the server takes none
        return hints
    if any(hasattr(v, "signature") for v in hints.values()):
        from dbus_fast import Variant

        return {**hints, "desktop-entry": Variant("s", DESKTOP_ENTRY)}
    return {**hints, "desktop-entry": DESKTOP_ENTRY}


def kind_icon(kind: str):
    """One icon per kind of note: waiting (the attention badge), finished (a check), gave up or
    failed (a cross), anything else the plain glyph."""
    from pathlib import Path

    from desktop_notifier import Icon

    from hermes_tray.app.icons import note_icon_file

    return Icon(path=Path(note_icon_file(kind)))


class DesktopNotifierBackend(Notifier):
    """Notes through ``desktop_notifier.DesktopNotifier``; falls back to logging if the server is absent."""

    name = "desktop-notifier"

    def __init__(self, app_name: str = "Hermes Tray", parent: QObject | None = None) -> None:
        super().__init__(parent)
        from desktop_notifier import DesktopNotifier, Icon

        from hermes_tray.app.icons import IconState, icon_file

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="notifier", daemon=True)
        self._thread.start()
        icon = Icon(path=__import__("pathlib").Path(icon_file(IconState.ATTENTION, "light", 64)))
        self._notifier = DesktopNotifier(app_name=app_name, app_icon=icon)
        if sys.platform.startswith("linux"):
            try:  # in-place updates need desktop-notifier 6.x's D-Bus back end; else notes are re-sent
                backend = _make_replacing_backend(app_name, icon)
                if hasattr(backend, "_platform_to_interface_notification_identifier"):
                    self._notifier._backend = backend
            except Exception:
                log.info("desktop-notifier's D-Bus back end differs: updates replace notes by closing them")
        self._identifiers: dict[str, str] = {}  # note key -> desktop-notifier identifier (loop thread only)
        self._lock: asyncio.Lock | None = None
        self._probed_at = 0.0
        self.server_name = ""
        self._probe = self._submit(self._probe_capabilities())

    # --- loop thread -------------------------------------------------------------------------
    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _submit(self, coro) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _probe_capabilities(self) -> None:
        """First task on the loop: notes submitted meanwhile wait for it on the lock."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self._probe_locked()

    async def _probe_locked(self) -> None:
        from desktop_notifier import Capability

        self._probed_at = time.monotonic()
        try:
            caps = await asyncio.wait_for(self._notifier.get_capabilities(), 5)
        except Exception as exc:
            log.warning("no notification server (%s): notifications go to the log", type(exc).__name__)
            self.available = False
            self._notifier._backend.interface = None  # connect afresh next time
            self._notifier._backend._capabilities = None
        else:
            self.available = True
            self.supports_actions = Capability.BUTTONS in caps
            self.supports_click = Capability.ON_CLICKED in caps
            log.info(
                "notification server: actions=%s click=%s", self.supports_actions, self.supports_click
            )
        self.ready.emit()

    async def _show(self, note: Note) -> None:
        from desktop_notifier import Button, Notification, Urgency

        assert self._lock is not None
        async with self._lock:
            if not self.available and time.monotonic() - self._probed_at > RETRY_SECONDS:
                await self._probe_locked()  # the server may have started (or was slow) since
            if not self.available:
                log.info("notification (no server, not shown): %s", note.log_line or note.key)
                self.delivered.emit(note, False)
                return
            key = note.key
            buttons = tuple(
                Button(title=a.label, identifier=a.key, on_pressed=lambda k=a.key: self._pressed(key, k))
                for a in note.actions
            ) if self.supports_actions else ()
            notification = Notification(
                title=note.title,
                message=note.body,
                urgency={"low": Urgency.Low, "critical": Urgency.Critical}.get(note.urgency, Urgency.Normal),
                icon=kind_icon(note.kind),
                buttons=buttons,
                on_clicked=lambda: self._pressed(key, "default"),
                on_dismissed=lambda: self.dismissed.emit(key),
            )
            backend = self._notifier._backend
            previous = self._identifiers.get(key)
            platform_id = None
            if previous is not None and hasattr(backend, "platform_id"):
                platform_id = backend.platform_id(previous)
            if platform_id:
                backend.next_replaces_id = int(platform_id)
                backend._clear_notification_from_cache(previous)
                backend._platform_to_interface_notification_identifier.pop(platform_id, None)
            elif previous is not None:
                try:
                    await self._notifier.clear(previous)
                except Exception:
                    pass
            try:
                self._identifiers[key] = await self._notifier.send_notification(notification)
            except Exception:
                self.delivered.emit(note, False)
                raise
            self.delivered.emit(note, True)

    async def _close(self, key: str) -> None:
        assert self._lock is not None
        async with self._lock:
            identifier = self._identifiers.pop(key, None)
            if identifier is None or not self.available:
                return
            try:
                await self._notifier.clear(identifier)
            except Exception:
                pass

    def _pressed(self, key: str, action: str) -> None:
        self._identifiers.pop(key, None)
        self.activated.emit(key, action)

    # --- any thread -------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 5.0) -> bool:
        try:
            self._probe.result(timeout)
            return True
        except Exception:
            return False

    def show(self, note: Note) -> None:
        fut = self._submit(self._show(note))
        fut.add_done_callback(_log_failure)

    def close(self, key: str) -> None:
        self._submit(self._close(key)).add_done_callback(_log_failure)

    def shutdown(self) -> None:
        if not self._loop.is_running():
            return

        async def _stop() -> None:
            bus = getattr(self._notifier._backend, "bus", None)
            if bus is not None:
                try:
                    bus.disconnect()
                except Exception:
                    pass

        try:
            self._submit(_stop()).result(2)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)


def _log_failure(fut: Future) -> None:
    exc = fut.exception()
    if exc is not None:
        log.warning("notification failed: %s", type(exc).__name__)
