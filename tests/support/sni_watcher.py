"""A minimal ``org.kde.StatusNotifierWatcher`` (that also counts as the host), run as its own process.

    python tests/support/sni_watcher.py [--refuse | --silent]

On the session bus in ``DBUS_SESSION_BUS_ADDRESS``. Prints ``ready`` once it owns the name, then one
JSON line per ``RegisterStatusNotifierItem`` (``{"registered": "<sender>/<path>"}``). ``--refuse``
answers every registration with an error, as a broken or hostile watcher would; ``--silent`` never
answers it (a hung panel). Killing it and
starting it again is a watcher restart (a panel that crashed and came back).
"""

from __future__ import annotations

import json
import sys

from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

WATCHER = "org.kde.StatusNotifierWatcher"


def main() -> int:
    refuse, silent = "--refuse" in sys.argv, "--silent" in sys.argv
    conn = open_dbus_connection("SESSION")
    reply = conn.send_and_get_reply(message_bus.RequestName(WATCHER, 4))  # 4: do not queue
    if reply.body[0] != 1:
        print("name taken", flush=True)
        return 1
    print("ready", flush=True)
    items: list[str] = []
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        name = msg.header.fields.get(HeaderFields.member)
        sender = msg.header.fields.get(HeaderFields.sender)
        if name == "RegisterStatusNotifierItem":
            if silent:
                print(json.dumps({"ignored": sender}), flush=True)
                continue
            if refuse:
                conn.send(new_error(msg, "org.freedesktop.DBus.Error.AccessDenied", "s", ("not today",)))
                print(json.dumps({"refused": sender}), flush=True)
                continue
            service = msg.body[0]
            item = sender + service if service.startswith("/") else service + "/StatusNotifierItem"
            items.append(item)
            conn.send(new_method_return(msg))
            print(json.dumps({"registered": item}), flush=True)
        elif name == "Get":
            props = {"IsStatusNotifierHostRegistered": ("b", True), "ProtocolVersion": ("i", 0),
                     "RegisteredStatusNotifierItems": ("as", items)}
            conn.send(new_method_return(msg, "v", (props[msg.body[1]],)))
        elif name == "RegisterStatusNotifierHost":
            conn.send(new_method_return(msg))
        else:
            conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", (str(name),)))


if __name__ == "__main__":
    sys.exit(main())
