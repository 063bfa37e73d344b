"""python-dbusmock template: a notification server that behaves like a strict real one, and records.

Loaded by ``python3 -m dbusmock --session --template <this file> --parameters '{"record": PATH}'`` under
the system Python (Debian's python3-dbusmock, which has dbus-python). It extends dbusmock's stock
``notification_daemon`` template where real daemons differ from it:

* ``Notify`` checks the call's signature as GDBus-based daemons do (GNOME Shell, dunst, xfce4-notifyd):
  anything but ``susssasa{sv}i`` fails with ``org.freedesktop.DBus.Error.InvalidArgs`` and is recorded
  as rejected;
* its introspection declares ``ActionInvoked``, ``NotificationClosed`` and ``ActivationToken``, as real
  daemons do: desktop-notifier subscribes only to signals the server introspects (the stock template
  declares none);
* ``actions`` is among its capabilities, so clients offer buttons;
* every notification is appended to the record file as one JSON line (with its id and the sender, the
  connection its signals go to), and so is every close: ``{"closed": id, "reason": r, "by": "app"|"user"}``;
* it knows which notes are on screen: ``CloseNotification`` (``u``, as the spec has it) closes one and says so
  (``NotificationClosed`` reason 3), as real daemons do.

What a person does goes through ``org.hermes_tray.test.NotificationServer`` (``tests/desktop/session.py``):
``Press(id, action)`` sends ``ActionInvoked`` to the note's sender, then closes the note (``NotificationClosed``
reason 2) as GNOME, KDE and a click in dunst do — unless the server was started with ``"action_closes": false``,
as dunst's action menu behaves (the action runs, the note stays); ``Dismiss(id)`` closes it; ``OnScreen()`` lists
the notes still up.
"""

import json
import time

import dbus
import dbus.service
from dbusmock.templates import notification_daemon as stock

BUS_NAME = stock.BUS_NAME
MAIN_OBJ = stock.MAIN_OBJ
MAIN_IFACE = stock.MAIN_IFACE
SYSTEM_BUS = False
SIGNATURE = "susssasa{sv}i"
CAPABILITIES = "actions body body-markup persistence icon-static"
TEST_IFACE = "org.hermes_tray.test.NotificationServer"


def _plain(v):
    """dbus-python values -> JSON values (byte arrays such as image-data are summarised)."""
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v)} bytes>"
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or type(v).__name__ == "Boolean":
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    return str(v)


# Declared only, so that introspection lists them; the mock emits them through EmitSignal(Detailed).
@dbus.service.signal(MAIN_IFACE, signature="us")
def ActionInvoked(self, id, action_key):
    pass


@dbus.service.signal(MAIN_IFACE, signature="uu")
def NotificationClosed(self, id, reason):
    pass


@dbus.service.signal(MAIN_IFACE, signature="us")
def ActivationToken(self, id, activation_token):
    pass


def load(mock, parameters):
    stock.load(mock, {"capabilities": parameters.get("capabilities", CAPABILITIES)})
    record = open(parameters["record"], "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives with the mock
    action_closes = parameters.get("action_closes", True)
    mock.on_screen = {}  # id -> (sender, resident)

    def close(self, nid, reason, by):
        sender, _resident = self.on_screen.pop(int(nid), (None, False))
        record.write(json.dumps({"closed": int(nid), "reason": int(reason), "by": by, "was_open": bool(sender),
                                 "time": round(time.time(), 3)}) + "\n")
        if sender:
            self._emit_signal(MAIN_IFACE, "NotificationClosed", "uu", [dbus.UInt32(nid), dbus.UInt32(reason)],
                              {"destination": sender})

    @dbus.service.method(MAIN_IFACE, in_signature=SIGNATURE, out_signature="u", sender_keyword="sender",
                         message_keyword="msg", byte_arrays=True)
    def Notify(self, app_name, replaces_id, app_icon, summary, body, actions, hints, timeout, sender=None,
               msg=None):
        if msg.get_signature() != SIGNATURE:
            error = (f"Type of message, '({msg.get_signature()})', does not match expected type "
                     f"'({SIGNATURE})'")
            record.write(json.dumps({"rejected": error, "sender": str(sender), "summary": str(summary)}) + "\n")
            raise dbus.exceptions.DBusException(error, name="org.freedesktop.DBus.Error.InvalidArgs")
        nid = int(replaces_id) or self.next_id
        self.next_id = max(self.next_id, nid + 1)
        self.on_screen[nid] = (str(sender), bool(hints.get("resident", False)))
        record.write(json.dumps({
            "id": nid, "app_name": str(app_name), "summary": str(summary), "body": str(body),
            "actions": dict(zip(map(str, actions[0::2]), map(str, actions[1::2]), strict=False)),
            "action_list": [str(a) for a in actions],  # as sent: a key twice, or a blank label, shows here
            "app_icon": str(app_icon),
            "replaces_id": int(replaces_id), "hints": _plain(hints), "expire_timeout": int(timeout),
            "sender": str(sender), "time": round(time.time(), 3)}) + "\n")
        return dbus.UInt32(nid)

    @dbus.service.method(MAIN_IFACE, in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        close(self, nid, 3, "app")

    @dbus.service.method(TEST_IFACE, in_signature="us", out_signature="")
    def Press(self, nid, key):
        sender, resident = self.on_screen.get(int(nid), (None, False))
        if sender is None:
            raise dbus.exceptions.DBusException(f"notification {nid} is not on screen")
        self._emit_signal(MAIN_IFACE, "ActionInvoked", "us", [dbus.UInt32(nid), dbus.String(key)],
                          {"destination": sender})  # to the connection that sent it, as dunst does
        if action_closes and not resident:
            close(self, nid, 2, "user")

    @dbus.service.method(TEST_IFACE, in_signature="u", out_signature="")
    def Dismiss(self, nid):
        close(self, nid, 2, "user")

    @dbus.service.method(TEST_IFACE, in_signature="", out_signature="au")
    def OnScreen(self):
        return dbus.Array(sorted(self.on_screen), signature="u")

    methods = mock.methods.setdefault(MAIN_IFACE, {})
    methods["Notify"] = (SIGNATURE, "u", None, Notify)
    methods["CloseNotification"] = ("u", "", None, CloseNotification)
    for declared in (ActionInvoked, NotificationClosed, ActivationToken):
        methods[declared.__name__] = (None, None, None, declared)
    tests = mock.methods.setdefault(TEST_IFACE, {})
    for method in (Press, Dismiss, OnScreen):
        tests[method.__name__] = (method._dbus_in_signature, method._dbus_out_signature, None, method)
