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
  connection its signals go to).

Pressing a button is dbusmock's own ``EmitSignalDetailed`` (``tests/desktop/session.py``).
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
        record.write(json.dumps({
            "id": nid, "app_name": str(app_name), "summary": str(summary), "body": str(body),
            "actions": dict(zip(map(str, actions[0::2]), map(str, actions[1::2]), strict=False)),
            "action_list": [str(a) for a in actions],  # as sent: a key twice, or a blank label, shows here
            "app_icon": str(app_icon),
            "replaces_id": int(replaces_id), "hints": _plain(hints), "expire_timeout": int(timeout),
            "sender": str(sender), "time": round(time.time(), 3)}) + "\n")
        return dbus.UInt32(nid)

    methods = mock.methods.setdefault(MAIN_IFACE, {})
    methods["Notify"] = (SIGNATURE, "u", None, Notify)
    for declared in (ActionInvoked, NotificationClosed, ActivationToken):
        methods[declared.__name__] = (None, None, None, declared)
