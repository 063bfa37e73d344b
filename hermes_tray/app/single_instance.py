"""One tray (and, separately, one helper) per user. The authority is an OS lock (``try_lock_fd``) on a file in the
runtime dir: the kernel drops it when the holder dies, so a crashed tray never blocks the next. A user-only
``QLocalServer`` beside it lets a second launch ask the running one to show its window, then exit with no icon.
"""

from __future__ import annotations

import getpass
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

if TYPE_CHECKING:  # QtNetwork is loaded when the server starts listening, after the icon is up
    from PySide6.QtNetwork import QLocalServer, QLocalSocket

from hermes_tray_core import ensure_private_dir, open_private_lockfile, runtime_dir, try_lock_fd, unlock_fd

log = logging.getLogger(__name__)

_MAX_UNIX_SOCKET_PATH = 100  # sun_path is 104-108 bytes; keep a margin
MAX_LINE = 256  # a message is a short word; a longer line (or one with no newline) ends the connection


def _user_tag() -> str:
    getuid = getattr(os, "getuid", None)  # POSIX only
    if getuid is not None:
        return str(getuid())
    try:
        return getpass.getuser()
    except Exception:  # boundary: the OS's user database, whatever it raises
        return "user"


class SingleInstance(QObject):
    """Lock + local server for one role (``tray`` or ``helper``) of one user. ``handler(message) -> bool``
    answers later launches: a launch is told ``ok`` only when the handler did what it asked (say, the window
    is showing), ``failed`` otherwise, and nothing while the holder is not listening yet (it listens once the
    user can see it)."""

    def __init__(self, role: str = "tray", directory: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.directory = Path(directory) if directory is not None else runtime_dir()
        self._lock: int | None = None  # the held lock file's fd
        self._server: QLocalServer | None = None
        self.handler: Callable[[str], bool] | None = None

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.role}.lock"

    @property
    def server_name(self) -> str:
        """A full socket path in the private runtime dir where it fits, else a per-user name."""
        if sys.platform != "win32":
            path = str(self.directory / f"{self.role}.sock")
            if len(path.encode()) <= _MAX_UNIX_SOCKET_PATH:
                return path
        return f"hermes-tray-{_user_tag()}-{self.role}"

    def acquire(self, *, listen: bool = True) -> bool:
        """True if this process is now the one instance. ``listen=False`` defers :meth:`listen`
        (the lock alone is the authority; a second launch retries its connection meanwhile)."""
        ensure_private_dir(self.directory)
        fd = _try_lock(self.lock_path)
        if fd is None:
            return False
        self._lock = fd
        if listen:
            self.listen()
        return True

    def listen(self) -> None:
        """Start carrying messages from later launches (idempotent)."""
        if self._server is not None or self._lock is None:
            return
        from PySide6.QtNetwork import QLocalServer

        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        QLocalServer.removeServer(self.server_name)  # a dead holder's socket; we hold the lock
        if not server.listen(self.server_name):
            log.warning("single instance: cannot listen on %s: %s", self.server_name, server.errorString())
            return
        server.newConnection.connect(self._on_connection)
        self._server = server

    def _on_connection(self) -> None:
        assert self._server is not None
        while self._server.hasPendingConnections():
            sock = self._server.nextPendingConnection()
            sock.readyRead.connect(lambda s=sock: self._on_ready_read(s))
            sock.disconnected.connect(sock.deleteLater)

    def _on_ready_read(self, sock: QLocalSocket) -> None:
        while sock.canReadLine():
            raw = bytes(sock.readLine(MAX_LINE + 1).data())
            if not raw.endswith(b"\n"):  # longer than any message: not a hermes-tray launch
                self._drop(sock, "line too long")
                return
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            done = False
            try:
                done = bool(self.handler(line[:64])) if self.handler is not None else False
            except Exception:  # boundary: a callback into the tray from a second instance
                log.exception("single instance: could not answer %r", line[:64])
            sock.write(b"ok\n" if done else b"failed\n")
            sock.flush()
        if sock.bytesAvailable() > MAX_LINE:  # no newline in sight: never buffer without limit
            self._drop(sock, "no newline")

    @staticmethod
    def _drop(sock: QLocalSocket, why: str) -> None:
        log.warning("single instance: dropped a connection (%s)", why)
        sock.abort()

    def send_to_primary(self, message: str = "show", timeout_ms: int = 3000) -> bool:
        """Deliver ``message`` to the running instance; True once it acknowledged. Retries briefly: the holder
        may have the lock but not yet be listening."""
        from PySide6.QtNetwork import QLocalSocket

        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            sock = QLocalSocket()
            sock.connectToServer(self.server_name)
            if sock.waitForConnected(500):
                sock.write(message.encode() + b"\n")
                sock.flush()
                ok = sock.waitForReadyRead(max(100, int((deadline - time.monotonic()) * 1000)))
                answer = bytes(sock.readAll().data()) if ok else b""
                sock.disconnectFromServer()
                if answer.startswith(b"ok"):
                    return True
                if answer.startswith(b"failed"):
                    return False
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._lock is not None:
            _unlock(self._lock)
            self._lock = None


def _try_lock(path: Path) -> int | None:
    """The lock's fd if it is ours now, None if another process holds it (never waits). Each call
    opens its own fd (0600, symlinks refused), so two objects in one process exclude each other too.
    The engine's lock rather than the filelock package: filelock imports ``secrets``, which maps
    OpenSSL into an idle tray (about 5 MB of its resident memory, measured with bench_tray)."""
    fd = open_private_lockfile(path)
    try:
        if try_lock_fd(fd):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _unlock(fd: int) -> None:
    try:
        unlock_fd(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def instance_running(role: str, directory: Path | None = None) -> bool:
    """Whether some process holds ``role``'s lock (the helper asks this about the tray)."""
    path = (Path(directory) if directory is not None else runtime_dir()) / f"{role}.lock"
    if not path.exists():
        return False
    try:
        fd = _try_lock(path)
    except OSError:
        return False
    if fd is None:
        return True
    _unlock(fd)
    return False
