"""The tray's own StatusNotifierItem (``org.kde.StatusNotifierItem``), registered with the panel's watcher.

``QSystemTrayIcon`` over D-Bus always says ``Status`` ``Active`` (its ``setStatus`` is private), so panels never
highlight waiting turns. This item speaks the same protocol with Qt's ``Id``/``Title``/``ToolTip``, plus
``NeedsAttention``, and looks like the part of ``QSystemTrayIcon`` the tray uses, so ``TrayPresence`` drives
either. :func:`open_sni_tray` returns None whenever this path is not possible (no bus, no watcher with a host,
jeepney missing).
"""

from __future__ import annotations

import array
import logging
import sys
from typing import Any

from jeepney import DBusAddress, MessageType, Properties, new_signal
from jeepney.bus_messages import MatchRule
from PySide6.QtCore import QCoreApplication, QObject, QPoint, QRect, QSize, QTimer, Signal
from PySide6.QtGui import QIcon, QImage
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from hermes_tray.app.sni.bus import DBusFault, SessionLink, member, method_call
from hermes_tray.app.sni.dbusmenu import MenuExporter

log = logging.getLogger(__name__)

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
IFACE = "org.kde.StatusNotifierItem"
ITEM_PATH = "/StatusNotifierItem"
MENU_PATH = "/MenuBar"  # where Qt's tray exported it: hosts and tests see the same paths
PIXMAP_SIZES = (16, 22, 24, 32, 48)
REGISTER_TIMEOUT_MS = 3000

INTROSPECTION = """<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
 <interface name="org.kde.StatusNotifierItem">
  <property name="Category" type="s" access="read"/>
  <property name="Id" type="s" access="read"/>
  <property name="Title" type="s" access="read"/>
  <property name="Status" type="s" access="read"/>
  <property name="WindowId" type="i" access="read"/>
  <property name="IconThemePath" type="s" access="read"/>
  <property name="IconName" type="s" access="read"/>
  <property name="IconPixmap" type="a(iiay)" access="read"/>
  <property name="OverlayIconName" type="s" access="read"/>
  <property name="OverlayIconPixmap" type="a(iiay)" access="read"/>
  <property name="AttentionIconName" type="s" access="read"/>
  <property name="AttentionIconPixmap" type="a(iiay)" access="read"/>
  <property name="AttentionMovieName" type="s" access="read"/>
  <property name="ToolTip" type="(sa(iiay)ss)" access="read"/>
  <property name="ItemIsMenu" type="b" access="read"/>
  <property name="Menu" type="o" access="read"/>
  <method name="ContextMenu"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
  <method name="Activate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
  <method name="SecondaryActivate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
  <method name="Scroll"><arg name="delta" type="i" direction="in"/><arg name="orientation" type="s" direction="in"/></method>
  <method name="ProvideXdgActivationToken"><arg name="token" type="s" direction="in"/></method>
  <signal name="NewTitle"/>
  <signal name="NewIcon"/>
  <signal name="NewAttentionIcon"/>
  <signal name="NewOverlayIcon"/>
  <signal name="NewMenu"/>
  <signal name="NewToolTip"/>
  <signal name="NewStatus"><arg name="status" type="s"/></signal>
 </interface>
 <interface name="org.freedesktop.DBus.Properties">
  <method name="Get"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
  <method name="GetAll"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method>
  <signal name="PropertiesChanged"><arg type="s"/><arg type="a{sv}"/><arg type="as"/></signal>
 </interface>
 <interface name="org.freedesktop.DBus.Introspectable">
  <method name="Introspect"><arg type="s" direction="out"/></method>
 </interface>
</node>
"""

Pixmaps = list[tuple[int, int, bytes]]


def icon_pixmaps(icon: QIcon, sizes: tuple[int, ...] = PIXMAP_SIZES) -> Pixmaps:
    """``a(iiay)``: each size as ARGB32 in network byte order, rendered from the same ``QIcon``."""
    out: Pixmaps = []
    for size in sizes:
        image = icon.pixmap(QSize(size, size), 1.0).toImage()
        if image.isNull():
            continue
        if image.width() != size or image.height() != size:
            image = image.scaled(size, size)
        image = image.convertToFormat(QImage.Format.Format_ARGB32)
        words = array.array("I", bytes(image.constBits())[: size * size * 4])
        if sys.byteorder == "little":  # QImage stores 0xAARRGGBB words in host order
            words.byteswap()
        out.append((size, size, words.tobytes()))
    return out


class SniTrayIcon(QObject):
    """A StatusNotifierItem with the ``QSystemTrayIcon`` methods :class:`TrayPresence` calls. ``registered``: the
    icon is on the panel; ``failed``: refused, or the bus went away (the caller uses ``QSystemTrayIcon``)."""

    activated = Signal(QSystemTrayIcon.ActivationReason)
    registered = Signal()
    failed = Signal(str)

    def __init__(self, link: SessionLink, menu: QMenu, icon: QIcon, attention_icon: QIcon,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.link = link
        link.setParent(self)
        self.menu = menu
        self._icon = icon
        self._pixmaps = icon_pixmaps(icon)
        self._attention_pixmaps = icon_pixmaps(attention_icon)
        self._tooltip = ""
        self._status = "Active"
        self._closed = False
        name = QCoreApplication.applicationName() or "hermes-tray"
        self.item_id = name  # Qt's tray said applicationName() for both; tests and hosts key on it
        self.title = name
        rule = MatchRule(type="signal", sender="org.freedesktop.DBus", interface="org.freedesktop.DBus",
                         member="NameOwnerChanged", path="/org/freedesktop/DBus")
        rule.add_arg_condition(0, WATCHER)
        link.on_signal(rule, self._on_watcher_owner)  # first: if the bus refuses, nothing is exported yet
        self.exporter = MenuExporter(menu, link, MENU_PATH, self)
        link.export(ITEM_PATH, self._handle)
        link.lost.connect(lambda: self._fail("the session bus went away"))

    # --- what TrayPresence calls (QSystemTrayIcon's names) --------------------------------------
    def setIcon(self, icon: QIcon) -> None:  # noqa: N802
        self._icon = icon
        self._pixmaps = icon_pixmaps(icon)
        self._emit("NewIcon")

    def icon(self) -> QIcon:
        return self._icon

    def setToolTip(self, text: str) -> None:  # noqa: N802
        if text != self._tooltip:
            self._tooltip = text
            self._emit("NewToolTip")

    def toolTip(self) -> str:  # noqa: N802
        return self._tooltip

    def setContextMenu(self, menu: QMenu) -> None:  # noqa: N802
        """The menu is exported from construction on; kept for QSystemTrayIcon's shape."""

    def geometry(self) -> QRect:
        return QRect()  # the host draws the item; its place on screen is not ours to know

    def show(self) -> None:
        """Showing is registering (done by :meth:`register`)."""

    def hide(self) -> None:
        self.close()

    def isVisible(self) -> bool:  # noqa: N802
        return not self._closed

    # --- what only this item can do -------------------------------------------------------------
    @property
    def status(self) -> str:
        return self._status

    def set_needs_attention(self, on: bool) -> None:
        """``NeedsAttention`` while turns wait or a problem stands, else ``Active`` (panels highlight it)."""
        status = "NeedsAttention" if on else "Active"
        if status != self._status:
            self._status = status
            self._emit("NewStatus", "s", (status,))

    def register(self) -> None:
        """Ask the watcher to list us; ``registered`` or ``failed`` follows (on the GUI thread). No answer in
        ``REGISTER_TIMEOUT_MS`` counts as a refusal: the tray must not end up with no icon."""
        answered = [False]

        def timed_out() -> None:
            if not answered[0]:
                self._fail(f"no answer to RegisterStatusNotifierItem in {REGISTER_TIMEOUT_MS / 1000:.0f} s")

        QTimer.singleShot(REGISTER_TIMEOUT_MS, self, timed_out)

        def done(reply: Any) -> None:
            answered[0] = True
            if self._closed:
                return
            if reply is None or reply.header.message_type == MessageType.error:
                why = "no answer" if reply is None else f"{reply.body[0] if reply.body else 'refused'}"
                self._fail(f"the StatusNotifierWatcher refused the item: {why}")
                return
            log.info("tray item registered with the StatusNotifierWatcher as %s", self.link.unique_name)
            self.registered.emit()

        self.link.call_later(method_call(WATCHER, WATCHER_PATH, WATCHER, "RegisterStatusNotifierItem", "s",
                                         (self.link.unique_name,)), done)

    def close(self) -> None:
        """Leave the bus: the watcher sees our name go and drops the item from the panel."""
        if not self._closed:
            self._closed = True
            self.exporter.close()
            self.link.close()

    # --- internals -----------------------------------------------------------------------------
    def _fail(self, why: str) -> None:
        if not self._closed:
            log.warning("own tray item given up (%s): using Qt's tray icon", why)
            self.close()
            self.failed.emit(why)

    def _on_watcher_owner(self, msg: Any) -> None:
        _, _old, new = msg.body
        if new and not self._closed:
            log.info("StatusNotifierWatcher restarted: registering the tray item again")
            self.register()

    def _emit(self, name: str, signature: str | None = None, body: tuple = ()) -> None:
        if self._closed:
            return
        self.link.send(new_signal(DBusAddress(ITEM_PATH, interface=IFACE), name, signature, body))

    def properties(self) -> dict[str, tuple[str, Any]]:
        """Everything ``GetAll`` answers, as ``{name: (signature, value)}``."""
        return {
            "Category": ("s", "ApplicationStatus"),
            "Id": ("s", self.item_id),
            "Title": ("s", self.title),
            "Status": ("s", self._status),
            "WindowId": ("i", 0),
            "IconThemePath": ("s", ""),
            "IconName": ("s", ""),
            "IconPixmap": ("a(iiay)", self._pixmaps),
            "OverlayIconName": ("s", ""),
            "OverlayIconPixmap": ("a(iiay)", []),
            "AttentionIconName": ("s", ""),
            "AttentionIconPixmap": ("a(iiay)", self._attention_pixmaps),
            "AttentionMovieName": ("s", ""),
            "ToolTip": ("(sa(iiay)ss)", ("", [], self._tooltip, "")),  # Qt's slots: the text is the title
            "ItemIsMenu": ("b", False),
            "Menu": ("o", MENU_PATH),
        }

    def _handle(self, msg: Any) -> tuple[str, tuple[Any, ...]] | None:
        iface, name = member(msg)
        args = msg.body
        if name == "Introspect":
            return "s", (INTROSPECTION,)
        if name == "GetAll":
            return "a{sv}", (self.properties() if args[0] in (IFACE, "") else {},)
        if name == "Get":
            props = self.properties()
            if args[1] not in props:
                raise DBusFault("org.freedesktop.DBus.Error.UnknownProperty", f"no property {args[1]}")
            return "v", (props[args[1]],)
        if name == "Activate":
            self.activated.emit(QSystemTrayIcon.ActivationReason.Trigger)
            return "", ()
        if name == "SecondaryActivate":  # middle click: what Qt's tray reports for it
            self.activated.emit(QSystemTrayIcon.ActivationReason.MiddleClick)
            return "", ()
        if name == "ContextMenu":  # hosts that do not read dbusmenu ask us to pop it up ourselves
            self.activated.emit(QSystemTrayIcon.ActivationReason.Context)
            self.menu.popup(QPoint(int(args[0]), int(args[1])))
            return "", ()
        if name in ("Scroll", "ProvideXdgActivationToken"):
            return "", ()
        raise DBusFault("org.freedesktop.DBus.Error.UnknownMethod", f"no method {iface}.{name}")


def open_sni_tray(menu: QMenu, icon: QIcon, attention_icon: QIcon) -> SniTrayIcon | None:
    """Our own item when a StatusNotifierWatcher with a host is on the session bus, else None; never raises. Only
    the checks are synchronous (sub-millisecond); the registration is answered later. Linux and the BSDs only
    (``TrayPresence`` asks)."""
    link = None
    try:
        link = SessionLink()
        if not link.bus_call("NameHasOwner", WATCHER)[0]:
            link.close()
            return None
        watcher = DBusAddress(WATCHER_PATH, bus_name=WATCHER, interface=WATCHER)
        if not link.call(Properties(watcher).get("IsStatusNotifierHostRegistered"))[0][1]:
            log.info("a StatusNotifierWatcher without a host: using Qt's tray icon")
            link.close()
            return None
        return SniTrayIcon(link, menu, icon, attention_icon)
    except KeyError:
        log.debug("no session bus address: using Qt's tray icon")
    except Exception as exc:  # boundary: no bus, a broken watcher, a timeout: Qt's icon is still there
        log.warning("cannot publish the tray item (%s: %s): using Qt's tray icon", type(exc).__name__, exc)
    if link is not None:
        link.close()
    return None

