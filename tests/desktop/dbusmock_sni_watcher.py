"""python-dbusmock template: an ``org.kde.StatusNotifierWatcher`` with a host registered, as a panel runs it.

Loaded by ``python3 -m dbusmock --session --template <this file>`` under the system Python. Items register
with ``RegisterStatusNotifierItem`` (a bus name, or an object path on the caller's connection, as Qt and
libappindicator do); ``RegisteredStatusNotifierItems`` lists them as ``<bus name><object path>``, and an item
whose connection leaves the bus is dropped, as real watchers do. ``IsStatusNotifierHostRegistered`` is true:
to a client this desktop has a tray that shows items (what KDE Plasma or GNOME's AppIndicator extension do).
``tests/desktop/session.py`` reads the items, their tooltips and menus (dbusmenu) and clicks menu entries.
"""

import dbus
import dbus.service

BUS_NAME = "org.kde.StatusNotifierWatcher"
MAIN_OBJ = "/StatusNotifierWatcher"
MAIN_IFACE = "org.kde.StatusNotifierWatcher"
SYSTEM_BUS = False


# Declared only, so that introspection lists them; the mock emits them through EmitSignal.
@dbus.service.signal(MAIN_IFACE, signature="s")
def StatusNotifierItemRegistered(self, service):
    pass


@dbus.service.signal(MAIN_IFACE, signature="s")
def StatusNotifierItemUnregistered(self, service):
    pass


@dbus.service.signal(MAIN_IFACE, signature="")
def StatusNotifierHostRegistered(self):
    pass


def load(mock, parameters):
    mock.AddProperties(MAIN_IFACE, {
        "RegisteredStatusNotifierItems": dbus.Array([], signature="s"),
        "IsStatusNotifierHostRegistered": dbus.Boolean(True),
        "ProtocolVersion": dbus.Int32(0),
    })
    bus = mock.connection

    def items():
        return list(mock.props[MAIN_IFACE]["RegisteredStatusNotifierItems"])

    def set_items(new):
        mock.props[MAIN_IFACE]["RegisteredStatusNotifierItems"] = dbus.Array(new, signature="s")

    def owner_changed(name, _old, new):
        if new:
            return
        gone = [i for i in items() if i.split("/", 1)[0] == name]
        if gone:
            set_items([i for i in items() if i not in gone])
            for item in gone:
                mock.EmitSignal(MAIN_IFACE, "StatusNotifierItemUnregistered", "s", [item])

    bus.add_signal_receiver(owner_changed, "NameOwnerChanged", "org.freedesktop.DBus")

    @dbus.service.method(MAIN_IFACE, in_signature="s", out_signature="", sender_keyword="sender")
    def RegisterStatusNotifierItem(self, service, sender=None):
        item = f"{sender}{service}" if service.startswith("/") else f"{service}/StatusNotifierItem"
        if item not in items():
            set_items([*items(), item])
            self.EmitSignal(MAIN_IFACE, "StatusNotifierItemRegistered", "s", [item])

    @dbus.service.method(MAIN_IFACE, in_signature="s", out_signature="")
    def RegisterStatusNotifierHost(self, service):
        self.EmitSignal(MAIN_IFACE, "StatusNotifierHostRegistered", "", [])

    methods = mock.methods.setdefault(MAIN_IFACE, {})
    methods["RegisterStatusNotifierItem"] = ("s", "", None, RegisterStatusNotifierItem)
    methods["RegisterStatusNotifierHost"] = ("s", "", None, RegisterStatusNotifierHost)
    for declared in (StatusNotifierItemRegistered, StatusNotifierItemUnregistered, StatusNotifierHostRegistered):
        methods[declared.__name__] = (None, None, None, declared)
