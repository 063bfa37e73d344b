"""Clean exit on SIGINT/SIGTERM/SIGHUP while Qt's loop runs (Python handlers only run when Python does). SIGHUP's
default would end the process, and a continuation's Hermes with it, before it is left to Hermes. The C handler
writes to a socket pair whose ``QSocketNotifier`` wakes the loop: no polling timer.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable

from PySide6.QtCore import QObject, QSocketNotifier


def install_quit_on_signals(parent: QObject, on_quit: Callable[[int], None]) -> QSocketNotifier | None:
    rsock, wsock = socket.socketpair()
    for s in (rsock, wsock):
        s.setblocking(False)
    try:
        signal.set_wakeup_fd(wsock.fileno())
    except ValueError:  # not the main thread
        rsock.close()
        wsock.close()
        return None
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, lambda *_: None)  # the wake-up fd does the work
    notifier = QSocketNotifier(rsock.fileno(), QSocketNotifier.Type.Read, parent)

    def readable() -> None:
        try:
            data = rsock.recv(64)
        except OSError:
            return
        if data:
            on_quit(data[-1])

    notifier.activated.connect(readable)
    notifier._socks = (rsock, wsock)  # type: ignore[attr-defined]  # keep both ends alive
    return notifier
