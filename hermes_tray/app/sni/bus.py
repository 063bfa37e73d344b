"""One session-bus connection (jeepney) whose incoming calls and signals are handled on the GUI thread, which alone
may touch the Qt state they read: a receive thread blocks in ``receive()`` and hands each message over by a
queued signal; replies to our calls complete a Future, so the GUI thread may wait for one without pumping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    Message,
    MessageType,
    new_error,
    new_method_call,
    new_method_return,
)
from jeepney.bus_messages import MatchRule, message_bus
from jeepney.io.threading import DBusConnection, ReceiveStopped, open_dbus_connection
from jeepney.wrappers import unwrap_msg
from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)

#: a handler answers one method call on its object path: ``(signature, body)`` or raises :class:`DBusFault`
Handler = Callable[[Message], "tuple[str, tuple[Any, ...]] | None"]


class DBusFault(Exception):
    """A handler's way to answer with a D-Bus error (unknown method, bad property…)."""

    def __init__(self, name: str, text: str) -> None:
        super().__init__(text)
        self.name = name


class SessionLink(QObject):
    """A private session-bus connection: export handlers by path, call, emit signals, get signals."""

    _incoming = Signal(object)  # emitted on the receive thread, delivered on the GUI thread
    lost = Signal()  # the bus went away (not after :meth:`close`)

    def __init__(self, parent: QObject | None = None, *, auth_timeout: float = 1.0) -> None:
        super().__init__(parent)
        self.conn: DBusConnection = open_dbus_connection("SESSION", auth_timeout=auth_timeout)
        self.unique_name: str = self.conn.unique_name
        self._handlers: dict[str, Handler] = {}
        self._signal_handlers: list[tuple[MatchRule, Callable[[Message], None]]] = []
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._closing = False
        self._incoming.connect(self._dispatch)
        self._thread = threading.Thread(target=self._receive, name="sni-bus", daemon=True)
        self._thread.start()

    # --- outgoing -----------------------------------------------------------------------------
    def send(self, msg: Message) -> None:
        """Send without waiting (signals, replies). Thread-safe; a dead bus is logged, not raised."""
        try:
            self.conn.send(msg)
        except OSError as exc:
            log.debug("session bus send failed: %s", exc)

    def call(self, msg: Message, timeout: float = 2.0) -> tuple[Any, ...]:
        """Send a method call and wait for its reply's body (raises ``DBusErrorResponse``, ``TimeoutError``).
        Only for peers that do not call back into us before answering (the bus itself, the watcher)."""
        serial = next(self.conn.outgoing_serial)
        fut: Future = Future()
        with self._lock:
            self._pending[serial] = fut
        try:
            self.conn.send(msg, serial=serial)
            return unwrap_msg(fut.result(timeout=timeout))
        finally:
            with self._lock:
                self._pending.pop(serial, None)

    def call_later(self, msg: Message, done: Callable[[Message | None], None]) -> None:
        """Send a method call; ``done(reply)`` runs on the GUI thread (``None``: the bus went away)."""
        serial = next(self.conn.outgoing_serial)
        fut: Future = Future()
        fut.add_done_callback(lambda f: self._incoming.emit(("reply", done, f.result() if not f.cancelled() else None)))
        with self._lock:
            self._pending[serial] = fut
        try:
            self.conn.send(msg, serial=serial)
        except OSError:
            with self._lock:
                self._pending.pop(serial, None)
            fut.cancel()

    def bus_call(self, method: str, *args: Any) -> tuple[Any, ...]:
        """A call to the message bus itself (``NameHasOwner``, ``RequestName``, ``AddMatch``…)."""
        return self.call(getattr(message_bus, method)(*args))

    def on_signal(self, rule: MatchRule, handler: Callable[[Message], None]) -> None:
        """Subscribe (``AddMatch``) and run ``handler`` on the GUI thread for each matching signal."""
        self._signal_handlers.append((rule, handler))
        self.bus_call("AddMatch", rule)

    def export(self, path: str, handler: Handler) -> None:
        self._handlers[path] = handler

    # --- incoming -----------------------------------------------------------------------------
    def _receive(self) -> None:
        try:
            while True:
                msg = self.conn.receive()
                kind = msg.header.message_type
                if kind in (MessageType.method_return, MessageType.error):
                    serial = msg.header.fields.get(HeaderFields.reply_serial)
                    with self._lock:
                        fut = self._pending.pop(serial, None)
                    if fut is not None:
                        fut.set_result(msg)
                    continue
                self._incoming.emit(("msg", msg))
        except ReceiveStopped:
            pass
        except Exception as exc:  # boundary: the bus closed the socket (daemon gone) or sent garbage
            if not self._closing:
                log.warning("session bus connection lost: %s", exc)
        finally:
            with self._lock:
                pending, self._pending = list(self._pending.values()), {}
            for fut in pending:
                fut.cancel()
            if not self._closing:
                self._incoming.emit(("lost",))

    def _dispatch(self, item: tuple) -> None:
        if item[0] == "reply":
            item[1](item[2])
        elif item[0] == "lost":
            if not self._closing:
                self.lost.emit()
        else:
            self._handle(item[1])

    def _handle(self, msg: Message) -> None:
        hdr = msg.header
        if hdr.message_type == MessageType.signal:
            for rule, on_signal in self._signal_handlers:
                if rule.matches(msg):
                    on_signal(msg)
            return
        if hdr.message_type != MessageType.method_call:
            return
        path = hdr.fields.get(HeaderFields.path, "")
        handler = self._handlers.get(path)
        try:
            if handler is None:
                raise DBusFault("org.freedesktop.DBus.Error.UnknownObject", f"no object at {path}")
            answer = handler(msg)
            if answer is not None:
                self.send(new_method_return(msg, *answer))
        except DBusFault as fault:
            self.send(new_error(msg, fault.name, "s", (str(fault),)))
        except Exception as exc:  # boundary: a bug in a handler must not take the tray down: answer an error
            log.exception("D-Bus call %s.%s failed", hdr.fields.get(HeaderFields.interface),
                          hdr.fields.get(HeaderFields.member))
            self.send(new_error(msg, "org.freedesktop.DBus.Error.Failed", "s", (f"{type(exc).__name__}: {exc}",)))

    def close(self) -> None:
        """Leave the bus: the daemon drops our names, so watchers unregister the item."""
        if self._closing:
            return
        self._closing = True
        with suppress(OSError):
            self.conn.close()
        self._thread.join(timeout=2)


def method_call(bus_name: str, path: str, interface: str, method: str, signature: str | None = None,
                body: tuple[Any, ...] = ()) -> Message:
    """A method call to ``bus_name`` (shorthand for the few calls the item makes)."""
    return new_method_call(DBusAddress(path, bus_name=bus_name, interface=interface), method, signature, body)


def member(msg: Message) -> tuple[str, str]:
    """``(interface, member)`` of an incoming call (interface may be empty: callers may omit it)."""
    f = msg.header.fields
    return f.get(HeaderFields.interface, "") or "", f.get(HeaderFields.member, "") or ""
