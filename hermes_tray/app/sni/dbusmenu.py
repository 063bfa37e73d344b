"""Export a ``QMenu`` over ``com.canonical.dbusmenu`` (Qt's exporter lives inside ``QSystemTrayIcon``'s private
tray, which cannot set ``Status``). The live ``QMenu`` is the single source: read on every ``GetLayout``; a change
bumps the revision and sends one ``LayoutUpdated`` per burst. An entry keeps its id across rebuilds while it is
the same entry (the same label at the same place, or the same turn), so a click that crosses a rebuild still
lands where the user aimed; an id whose entry is gone does nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from jeepney import DBusAddress, Message, new_signal
from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from hermes_tray.app.sni.bus import DBusFault, SessionLink, member

log = logging.getLogger(__name__)


def submenu(action: QAction) -> QMenu | None:
    """The menu an entry opens, if any. ``QAction.menu()`` is a template in Qt 6 (PySide6 types it
    ``QObject``); the tray only ever attaches a ``QMenu``."""
    menu = action.menu()
    return menu if isinstance(menu, QMenu) else None

IFACE = "com.canonical.dbusmenu"
PROPS = "org.freedesktop.DBus.Properties"
INTROSPECT = "org.freedesktop.DBus.Introspectable"
ID_PROP = "_hermes_dbusmenu_id"
LAYOUT_SIG = "(ia{sv}av)"

INTROSPECTION = """<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
 <interface name="com.canonical.dbusmenu">
  <property name="Version" type="u" access="read"/>
  <property name="TextDirection" type="s" access="read"/>
  <property name="Status" type="s" access="read"/>
  <property name="IconThemePath" type="as" access="read"/>
  <method name="GetLayout"><arg type="i" direction="in"/><arg type="i" direction="in"/>
   <arg type="as" direction="in"/><arg type="u" direction="out"/><arg type="(ia{sv}av)" direction="out"/></method>
  <method name="GetGroupProperties"><arg type="ai" direction="in"/><arg type="as" direction="in"/>
   <arg type="a(ia{sv})" direction="out"/></method>
  <method name="GetProperty"><arg type="i" direction="in"/><arg type="s" direction="in"/>
   <arg type="v" direction="out"/></method>
  <method name="Event"><arg type="i" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/>
   <arg type="u" direction="in"/></method>
  <method name="EventGroup"><arg type="a(isvu)" direction="in"/><arg type="ai" direction="out"/></method>
  <method name="AboutToShow"><arg type="i" direction="in"/><arg type="b" direction="out"/></method>
  <method name="AboutToShowGroup"><arg type="ai" direction="in"/><arg type="ai" direction="out"/>
   <arg type="ai" direction="out"/></method>
  <signal name="ItemsPropertiesUpdated"><arg type="a(ia{sv})"/><arg type="a(ias)"/></signal>
  <signal name="LayoutUpdated"><arg type="u"/><arg type="i"/></signal>
  <signal name="ItemActivationRequested"><arg type="i"/><arg type="u"/></signal>
 </interface>
 <interface name="org.freedesktop.DBus.Properties">
  <method name="Get"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
  <method name="GetAll"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method>
 </interface>
 <interface name="org.freedesktop.DBus.Introspectable">
  <method name="Introspect"><arg type="s" direction="out"/></method>
 </interface>
</node>
"""


def dbus_label(text: str) -> str:
    """Qt's ``&`` mnemonics as dbusmenu's ``_`` (``&&`` is a literal ``&``, ``_`` becomes ``__``)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "&" and i + 1 < len(text):
            out.append("&" if text[i + 1] == "&" else "_" + text[i + 1].replace("_", "__"))
            i += 2
            continue
        out.append("__" if c == "_" else c)
        i += 1
    return "".join(out)


class MenuExporter(QObject):
    """Serves one ``QMenu`` at ``path`` on ``link``; call :meth:`close` before the link goes."""

    # A menu change, handled on this object's own thread even when seen on another (Python's garbage
    # collector, running in whichever thread allocates, may free an old entry there: a resume's worker thread).
    _changed_elsewhere = Signal()

    def __init__(self, menu: QMenu, link: SessionLink, path: str = "/MenuBar", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.menu = menu
        self.link = link
        self.path = path
        self.revision = 1
        self._next_id = 1
        self._actions: dict[int, QAction] = {}
        self._ids: dict[tuple, int] = {}  # an entry's identity (see _identity) -> its id, across rebuilds
        self._identities: dict[int, tuple] = {}  # a live id -> its entry's identity (for GetLayout of a submenu)
        self._changed = QTimer(self)
        self._changed.setSingleShot(True)
        self._changed.setInterval(0)  # one LayoutUpdated per burst (a rebuild is dozens of action events)
        self._changed.timeout.connect(self._send_layout_updated)
        self._changed_elsewhere.connect(self._menu_changed)  # queued when emitted off this thread
        self._watch(menu)
        link.export(path, self._handle)

    # --- the menu tree --------------------------------------------------------------------------
    def _watch(self, menu: QMenu) -> None:
        menu.installEventFilter(self)  # Qt keeps one entry per filter: re-installing is harmless

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() in (QEvent.Type.ActionAdded, QEvent.Type.ActionRemoved, QEvent.Type.ActionChanged):
            # through a signal: a direct call on this object's thread, queued to it from any other (a timer may
            # only be started on its own thread: "QObject::startTimer: Timers cannot be started from another thread")
            self._changed_elsewhere.emit()
        return False

    def _menu_changed(self) -> None:
        if not self._changed.isActive():
            self.revision += 1
            self._changed.start()

    def _send_layout_updated(self) -> None:
        self.link.send(new_signal(DBusAddress(self.path, interface=IFACE), "LayoutUpdated", "ui", (self.revision, 0)))

    def _id(self, action: QAction, identity: tuple, held: set) -> int:
        """``held``: the ids the entry's siblings already carry (never given to a second entry)."""
        got = action.property(ID_PROP)
        if isinstance(got, int) and got > 0:
            return got
        got = self._ids.get(identity)
        if got is None or got in held:
            if len(self._ids) > 4096:  # a long-running tray rebuilds its menu thousands of times
                self._ids.clear()
            self._next_id += 1
            got = self._ids[identity] = self._next_id
        action.setProperty(ID_PROP, got)
        held.add(got)
        return got

    @staticmethod
    def _identity(parent: tuple, action: QAction, seen: dict[tuple, int]) -> tuple:
        """What makes a rebuilt entry the same entry: its parent's identity, then its turn key (the data the
        tray puts on a turn's entries) or else its kind and label, then which one of equal siblings it is."""
        data = action.data()
        if action.isSeparator():
            what: tuple = ("-",)
        elif data is not None and data != "":  # a turn key: opaque, hashable
            what = ("turn", data)
        else:
            what = ("label", action.text(), action.menu() is not None)
        nth = seen[what] = seen.get(what, -1) + 1
        return (*parent, (what, nth))

    def _children(self, menu: QMenu) -> list[QAction]:
        self._watch(menu)
        return list(menu.actions())

    def _props(self, action: QAction) -> dict[str, tuple[str, Any]]:
        if action.isSeparator():
            return {"type": ("s", "separator"), "visible": ("b", action.isVisible())}
        props: dict[str, tuple[str, Any]] = {
            "label": ("s", dbus_label(action.text())),
            "enabled": ("b", action.isEnabled()),
            "visible": ("b", action.isVisible()),
        }
        if action.isCheckable():
            group = action.actionGroup()
            radio = group is not None and group.isExclusive()
            props["toggle-type"] = ("s", "radio" if radio else "checkmark")
            props["toggle-state"] = ("i", 1 if action.isChecked() else 0)
        if action.menu() is not None:
            props["children-display"] = ("s", "submenu")
        name = action.icon().name() if not action.icon().isNull() else ""
        if name:
            props["icon-name"] = ("s", name)
        return props

    def _node(self, item_id: int, action: QAction | None, menu: QMenu | None, depth: int,
              names: list[str], identity: tuple = ()) -> tuple[int, dict[str, tuple[str, Any]], list[tuple[str, Any]]]:
        props = {"children-display": ("s", "submenu")} if action is None else self._props(action)
        if names:
            props = {k: v for k, v in props.items() if k in names}
        kids: list[tuple[str, Any]] = []
        if menu is not None and depth != 0:
            seen: dict[tuple, int] = {}
            children = self._children(menu)
            held = {c.property(ID_PROP) for c in children} - {None}
            for child in children:
                ident = self._identity(identity, child, seen)
                cid = self._id(child, ident, held)
                self._actions[cid] = child
                self._identities[cid] = ident
                kids.append((LAYOUT_SIG, self._node(cid, child, submenu(child), depth - 1, names, ident)))
        return item_id, props, kids

    def _live(self, item_id: int) -> QAction | None:
        action = self._actions.get(item_id)
        try:
            return action if action is not None and action.property(ID_PROP) == item_id else None
        except RuntimeError:  # the C++ action was deleted by a rebuild
            return None

    def _find(self, item_id: int) -> tuple[QAction | None, QMenu | None]:
        if item_id == 0:
            return None, self.menu
        action = self._live(item_id)
        if action is None:
            self._index()  # rebuilt since the host last looked: the same entry has the same id
            action = self._live(item_id)
        if action is None:
            raise DBusFault("org.freedesktop.DBus.Error.InvalidArgs", f"no menu item {item_id}")
        return action, submenu(action)

    def _index(self) -> None:
        """Re-learn which ids are live (after a rebuild the old actions are gone; their entries keep their ids)."""
        self._actions, self._identities = {}, {}
        self._node(0, None, self.menu, -1, [])

    def layout(self, parent_id: int = 0, depth: int = -1, names: list[str] | None = None) -> tuple[int, tuple]:
        """``GetLayout``'s answer: the revision and the ``(id, properties, children)`` tree."""
        if parent_id == 0:
            self._actions, self._identities = {}, {}
        action, menu = self._find(parent_id)
        identity = self._identities.get(parent_id, ())
        return self.revision, self._node(parent_id, action, menu, depth, list(names or ()), identity)

    # --- the D-Bus interface --------------------------------------------------------------------
    def _handle(self, msg: Message) -> tuple[str, tuple[Any, ...]] | None:
        iface, name = member(msg)
        args = msg.body
        if iface == INTROSPECT or name == "Introspect":
            return "s", (INTROSPECTION,)
        if iface == PROPS or name in ("Get", "GetAll"):
            props = {"Version": ("u", 3), "TextDirection": ("s", "ltr"), "Status": ("s", "normal"),
                     "IconThemePath": ("as", [])}
            if name == "GetAll":
                return "a{sv}", (props if args[0] in (IFACE, "") else {},)
            if name == "Get" and args[1] in props:
                return "v", (props[args[1]],)
            raise DBusFault("org.freedesktop.DBus.Error.UnknownProperty", f"no property {args[1:]!r}")
        if name == "GetLayout":
            return "u" + LAYOUT_SIG, self.layout(args[0], args[1], list(args[2]))
        if name == "GetGroupProperties":
            out = []
            for item_id in args[0]:
                try:
                    action, _ = self._find(item_id)
                except DBusFault:
                    continue
                node = self._node(item_id, action, None, 0, list(args[1]))
                out.append((node[0], node[1]))
            return "a(ia{sv})", (out,)
        if name == "GetProperty":
            action, _ = self._find(args[0])
            props = self._node(args[0], action, None, 0, [])[1]
            if args[1] not in props:
                raise DBusFault("org.freedesktop.DBus.Error.InvalidArgs", f"no property {args[1]}")
            return "v", (props[args[1]],)
        if name == "Event":
            self.event_for(args[0], args[1])
            return "", ()
        if name == "EventGroup":
            errors = [e[0] for e in args[0] if not self.event_for(e[0], e[1])]
            return "ai", (errors,)
        if name == "AboutToShow":
            return "b", (self.about_to_show(args[0]),)
        if name == "AboutToShowGroup":
            updates = [i for i in args[0] if self.about_to_show(i)]
            return "aiai", (updates, [])
        raise DBusFault("org.freedesktop.DBus.Error.UnknownMethod", f"no method {iface}.{name}")

    def event_for(self, item_id: int, event: str) -> bool:
        """``clicked`` triggers the action (a checkable one toggles, as a click in the QMenu would)."""
        try:
            action, menu = self._find(item_id)
        except DBusFault:
            log.debug("menu event %r for a stale item %s", event, item_id)
            return False
        if event == "clicked" and action is not None and action.isEnabled() and menu is None:
            action.trigger()
        elif event == "opened" and menu is not None and item_id != 0:
            self.about_to_show(item_id)
        return True

    def about_to_show(self, item_id: int) -> bool:
        """Let a lazily filled menu fill itself (its ``aboutToShow``); True when the layout changed."""
        try:
            _, menu = self._find(item_id)
        except DBusFault:
            return False
        if menu is None:
            return False
        before = self.revision
        menu.aboutToShow.emit()
        return self.revision != before

    def close(self) -> None:
        self._changed.stop()
        self.menu.removeEventFilter(self)
