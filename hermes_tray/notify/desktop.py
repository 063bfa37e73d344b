"""desktop-notifier back end, run on its own asyncio loop thread rather than qasync: neither the helper's
``QCoreApplication`` nor the tray's ``QApplication`` should have its event loop replaced for a bus connection.
Button presses arrive on that thread and are re-emitted as Qt signals. Public API throughout, except on Linux
(:func:`_replacing_dbus`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from PySide6.QtCore import QObject

from hermes_tray.notify.base import Notifier
from hermes_tray.notify.note import STAYS, Note

if TYPE_CHECKING:
    from desktop_notifier import Capability, Icon, Notification

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0  # a failed server probe is retried by a later note, at most this often
T = TypeVar("T")


def desktop_available() -> bool:
    """A notification server may be reachable: a session bus on Linux; always elsewhere."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DBUS_SESSION_BUS_ADDRESS")) or os.path.exists(
            f"/run/user/{os.getuid()}/bus"
        )
    return True


class _Channel(Protocol):
    """What the back end needs of desktop-notifier: its public calls, and an in-place update where one exists."""

    async def send(self, notification: Notification) -> None: ...
    async def clear(self, identifier: str) -> None: ...
    async def get_capabilities(self) -> frozenset[Capability]: ...
    def replace_next(self, identifier: str) -> bool:
        """The next note replaces the one sent as ``identifier`` on screen: True if the server can."""
        ...
    def label_default(self, label: str) -> None:
        """The next note's default action (a click on it) is labelled ``label``, or left out when ""."""
        ...


class _Public:
    """``desktop_notifier.DesktopNotifier`` (its public API): an update is a clear, then a new note."""

    def __init__(self, app_name: str, icon: Icon) -> None:
        from desktop_notifier import DesktopNotifier

        self._notifier = DesktopNotifier(app_name=app_name, app_icon=icon)

    async def send(self, notification: Notification) -> None:
        await self._notifier.send_notification(notification)

    async def clear(self, identifier: str) -> None:
        await self._notifier.clear(identifier)

    async def get_capabilities(self) -> frozenset[Capability]:
        return await self._notifier.get_capabilities()

    def replace_next(self, identifier: str) -> bool:
        return False

    def label_default(self, label: str) -> None:
        return None  # macOS and Windows have no list of actions for a blank entry to show in


def _replacing_dbus(app_name: str, icon: Icon) -> _Channel:
    """desktop-notifier's D-Bus back end, extended where its public API has no way: its ``Notify`` call gets
    the ``replaces_id`` of the note it updates (desktop-notifier always sends 0, so a storm would stack ten
    notes instead of updating one), the ``desktop-entry`` hint (servers take the app's name and icon from the
    installed entry), and a labelled default action or none (desktop-notifier always sends ``default`` with an
    empty label: dunst lists it as a blank entry in its menu). It also closes every note the user answered
    (``CloseNotification``): dunst's action menu invokes without closing. Not public API: this relies on four
    members of ``desktop_notifier.backends.dbus.DBusDesktopNotifier`` (6.x, pinned ``<7`` in pyproject.toml):
    ``_init_dbus`` (it returns the proxy whose ``call_notify`` is wrapped),
    ``_platform_to_interface_notification_identifier`` (our identifier -> the server's id),
    ``_clear_notification_from_cache`` (the replaced note's bookkeeping) and ``_on_action`` (the server's
    ``ActionInvoked``). If they are missing the caller falls back to :class:`_Public`.
    tests/e2e/test_storm_and_restart.py (``replaces_id``, an answered note closed on a server that leaves it
    up) and tests/e2e/test_demo_sni.py (``desktop-entry``) read what a real server receives."""
    from desktop_notifier.backends.dbus import DBusDesktopNotifier

    class ReplacingDBus(DBusDesktopNotifier):
        next_replaces_id = 0
        next_default = ""
        closing: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to its tasks

        async def _init_dbus(self) -> Any:
            interface: Any = await super()._init_dbus()  # dbus-fast generates its call_* methods at run time
            original = interface.call_notify
            backend = self

            async def call_notify(app: str, _replaces_id: int, icon: str, summary: str, body: str,
                                  actions: list[str], hints: Any, *args: Any, **kwargs: Any) -> Any:
                replaces, backend.next_replaces_id = backend.next_replaces_id, 0
                default, backend.next_default = backend.next_default, ""
                return await original(app, replaces, icon, summary, body, labelled_default(actions, default),
                                      with_desktop_entry(hints), *args, **kwargs)

            interface.call_notify = call_notify
            return interface

        def replace_next(self, identifier: str) -> bool:
            ids = self._platform_to_interface_notification_identifier
            platform_id = ids.inverse.get(identifier)
            if not platform_id:
                return False
            self.next_replaces_id = int(platform_id)
            ids.pop(platform_id, None)
            self._clear_notification_from_cache(identifier)
            return True

        def label_default(self, label: str) -> None:
            self.next_default = label

        def _on_action(self, nid: int, action_key: str) -> None:
            ours = nid in self._platform_to_interface_notification_identifier  # GNOME tells every app of every press
            super()._on_action(nid, action_key)
            if ours:
                task = asyncio.ensure_future(self._close_answered(nid))
                self.closing.add(task)
                task.add_done_callback(self.closing.discard)

        async def _close_answered(self, nid: int) -> None:
            """An answered note goes, whatever the server did: dunst's action menu runs an action and leaves the
            note up, still offering buttons that now do nothing, and later notes stack beside it."""
            from dbus_fast.errors import DBusError

            with suppress(DBusError, OSError, EOFError):  # closed already (an error reply), or the bus went away
                await self.interface.call_close_notification(nid)  # type: ignore[union-attr]

    backend = ReplacingDBus(app_name, icon)
    if not hasattr(backend, "_platform_to_interface_notification_identifier") or not hasattr(
            DBusDesktopNotifier, "_on_action"):
        raise AttributeError("desktop-notifier's D-Bus back end differs")
    return backend


def _channel(app_name: str, icon: Icon) -> _Channel:
    if sys.platform.startswith("linux"):
        try:
            return _replacing_dbus(app_name, icon)
        except Exception:  # boundary: desktop-notifier's private D-Bus class, whatever its version holds
            log.info("desktop-notifier's D-Bus back end differs: updates replace notes by closing them")
    return _Public(app_name, icon)


def labelled_default(actions: list[str], label: str) -> list[str]:
    """The spec's flat ``[key, label, …]`` list with its ``default`` action labelled ``label``, or without it
    when ``label`` is "" (a note that does nothing when clicked offers nothing)."""
    out: list[str] = []
    for key, text in zip(actions[0::2], actions[1::2], strict=False):
        if key != "default":
            out += [key, text]
        elif label:
            out += [key, label]
    return out


DESKTOP_ENTRY = "hermes-tray"  # the installed hermes-tray.desktop: servers take the app's name/icon from it


def with_desktop_entry(hints: Any) -> Any:
    """The spec's ``desktop-entry`` hint added to desktop-notifier's hints (``a{sv}`` or ``a{ss}``)."""
    if not isinstance(hints, dict) or not hints:  # no hints at all: the server takes none
        return hints
    if any(hasattr(v, "signature") for v in hints.values()):
        from dbus_fast import Variant

        return {**hints, "desktop-entry": Variant("s", DESKTOP_ENTRY)}
    return {**hints, "desktop-entry": DESKTOP_ENTRY}


def kind_icon(kind: str) -> Icon:
    """One icon per kind of note: waiting (the attention badge), finished (a check), gave up or
    failed (a cross), anything else the plain glyph."""
    from desktop_notifier import Icon

    from hermes_tray.resources import note_icon_file

    return Icon(path=Path(note_icon_file(kind)))


class DesktopNotifierBackend(Notifier):
    """Notes through desktop-notifier; falls back to logging if the server is absent."""

    name = "desktop-notifier"

    def __init__(self, app_name: str = "Hermes Tray", parent: QObject | None = None) -> None:
        super().__init__(parent)
        from desktop_notifier import Icon

        from hermes_tray.resources import IconState, icon_file

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="notifier", daemon=True)
        self._thread.start()
        self._app_name = app_name
        self._icon = Icon(path=Path(icon_file(IconState.ATTENTION, "note", 64)))
        self._channel = _channel(app_name, self._icon)
        self._identifiers: dict[str, str] = {}  # note key -> desktop-notifier identifier (loop thread only)
        self._lock: asyncio.Lock | None = None
        self._probed_at = 0.0
        self.server_name = ""
        self._probe = self._submit(self._probe_capabilities())

    # --- loop thread -------------------------------------------------------------------------
    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
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
            caps = await asyncio.wait_for(self._channel.get_capabilities(), 5)
        except Exception as exc:  # boundary: the notification server over D-Bus: whatever it answers
            log.warning("no notification server (%s): notifications go to the log", type(exc).__name__)
            self.available = False
            self._channel = _channel(self._app_name, self._icon)  # connect afresh next time
            self._identifiers.clear()
        else:
            self.available = True
            self.supports_actions = Capability.BUTTONS in caps
            self.supports_click = Capability.ON_CLICKED in caps
            log.info("notification server: actions=%s click=%s", self.supports_actions, self.supports_click)
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
            # the default action is a click on the note where the server has one, else a button like the rest
            default = next((a.label for a in note.actions if a.key == "default"), "") if self.supports_click else ""
            buttons = tuple(
                Button(title=a.label, identifier=a.key, on_pressed=self._on_press(key, a.key))
                for a in note.actions if not (default and a.key == "default")
            ) if self.supports_actions else ()
            notification = Notification(
                title=note.title,
                message=note.body,
                urgency={"low": Urgency.Low, "critical": Urgency.Critical}.get(note.urgency, Urgency.Normal),
                icon=kind_icon(note.kind),
                buttons=buttons,
                on_clicked=self._on_press(key, "default") if default else None,
                on_dismissed=lambda: self.dismissed.emit(key),
                timeout=0 if note.kind in STAYS else -1,  # 0: never expires (a question waits for its answer)
            )
            previous = self._identifiers.get(key)
            if previous is not None and not self._channel.replace_next(previous):
                await self._clear(previous)
            self._channel.label_default(default)
            try:
                await self._channel.send(notification)
            except Exception:  # boundary: the server: told as not delivered, then raised to the loop
                self.delivered.emit(note, False)
                raise
            self._identifiers[key] = notification.identifier
            self.delivered.emit(note, True)

    async def _close(self, key: str) -> None:
        assert self._lock is not None
        async with self._lock:
            identifier = self._identifiers.pop(key, None)
            if identifier is not None and self.available:
                await self._clear(identifier)

    async def _clear(self, identifier: str) -> None:
        try:
            await self._channel.clear(identifier)
        except Exception:  # boundary: the server: a note it lost need not be closed
            pass

    def _on_press(self, key: str, action: str) -> Callable[[], None]:
        return lambda: self._pressed(key, action)

    def _pressed(self, key: str, action: str) -> None:
        self._identifiers.pop(key, None)
        self.activated.emit(key, action)

    # --- any thread -------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 5.0) -> bool:
        try:
            self._probe.result(timeout)
            return True
        except Exception:  # boundary: the probe's failure is said where it happened
            return False

    def show(self, note: Note) -> None:
        fut = self._submit(self._show(note))
        fut.add_done_callback(_log_failure)

    def close(self, key: str) -> None:
        self._submit(self._close(key)).add_done_callback(_log_failure)

    def shutdown(self) -> None:
        """Stop the loop thread. desktop-notifier has no public call that closes its bus connection: the
        socket closes with the process (or when its objects are collected)."""
        if not self._loop.is_running():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)


def _log_failure(fut: Future[None]) -> None:
    exc = fut.exception()
    if exc is not None:
        log.warning("notification failed: %s", type(exc).__name__)
