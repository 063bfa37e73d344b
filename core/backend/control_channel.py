"""The Hermes gateway's control socket, per OS: one JSON line in, one line out, one request per connection.

A Hermes whose gateway owns every session publishes one per home (upstream ``gateway/control_socket.py``),
never a TCP port: the file system's or the pipe's access rules are the boundary. POSIX: ``gateway.sock`` in
the home, or the socket ``gateway.sock.path`` names (a long home path), used only when home, socket and folder
are this user's and private and so is the peer. Windows: the named pipe, whose access list Hermes sets.
Failures raise :class:`ControlUnavailable` with the reason in words.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from hermes_tray_core.backend.host_record import private_problem, read_private_file
from hermes_tray_core.backend.websocket import BackendUnusable
from hermes_tray_core.digest import sha256_hex

__all__ = ["ControlUnavailable", "UnixControlChannel", "WindowsPipeChannel", "channel_for", "home_hash",
           "pipe_name"]

SOCKET_NAME = "gateway.sock"
POINTER_NAME = "gateway.sock.path"
RESPONSE_LIMIT = 512 * 1024  # upstream's _MAX_RESPONSE_BYTES
POINTER_LIMIT = 4096


class ControlUnavailable(BackendUnusable):
    """No gateway answers on this home's control socket (the message says why)."""


def home_hash(home: Path | str) -> str:
    """Upstream's ``_home_hash``: the home resolved, case-normalised, SHA-256, 16 hex digits."""
    resolved = str(Path(os.path.expanduser(os.fspath(home))).resolve(strict=False))
    return sha256_hex(os.path.normcase(resolved).encode("utf-8", "surrogatepass"))[:16]


def pipe_name(home: Path | str) -> str:
    return rf"\\.\pipe\hermes-gateway-{home_hash(home)}"


def _read_line(read: Callable[[int], bytes], deadline: float) -> bytes:
    data = bytearray()
    while b"\n" not in data:
        if time.monotonic() >= deadline:
            raise ControlUnavailable("the gateway did not answer on its control socket in time")
        chunk = read(65536)
        if not chunk:
            break
        data.extend(chunk)
        if len(data) > RESPONSE_LIMIT:
            raise ControlUnavailable("the gateway's control answer is too large")
    line = bytes(data).split(b"\n", 1)[0]
    if not line:
        raise ControlUnavailable("the gateway closed its control socket without an answer")
    return line


class UnixControlChannel:
    """One home's control socket: ``published`` (anything there at all, no connection), and ``exchange``: the
    answer line and who answered (None where the OS cannot tell); the same for :class:`WindowsPipeChannel`."""

    def __init__(self, home: Path | str) -> None:
        self.home = Path(home)
        self.where = str(self.home / SOCKET_NAME)

    def published(self) -> bool:
        return os.path.lexists(self.home / SOCKET_NAME) or os.path.lexists(self.home / POINTER_NAME)

    @staticmethod
    def _own_private(path: Path, kind: Callable[[int], bool], what: str, *, group_ok: bool = False) -> None:
        problem = private_problem(path, kind, what, 0o002 if group_ok else 0o077)
        if problem:
            raise ControlUnavailable(f"{problem}: not used")

    def locate(self) -> Path:
        self._own_private(self.home, stat.S_ISDIR, "Hermes home", group_ok=True)
        direct = self.home / SOCKET_NAME
        if os.path.lexists(direct):
            self._own_private(direct, stat.S_ISSOCK, "socket")
            return direct
        pointer = self.home / POINTER_NAME
        if not os.path.lexists(pointer):
            raise ControlUnavailable(f"no gateway control socket in {self.home}")
        try:
            raw = read_private_file(pointer, POINTER_LIMIT)
        except ValueError as exc:
            raise ControlUnavailable(f"{pointer} is not used: {exc}") from None
        target = Path(raw[:POINTER_LIMIT].decode("utf-8-sig", "replace").strip())
        folder = f"hermes-gw-{home_hash(self.home)}"
        newer = target.name == "control.sock" and target.parent.name == folder
        older = target.name == f"{folder}.sock"
        if not target.is_absolute() or not (newer or older):
            raise ControlUnavailable(f"{pointer} does not name this home's control socket: not used")
        if newer:
            self._own_private(target.parent, stat.S_ISDIR, "folder")
        self._own_private(target, stat.S_ISSOCK, "socket")
        return target

    def exchange(self, request: bytes, timeout: float) -> tuple[bytes, int | None]:
        path = self.locate()
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.settimeout(timeout)
            try:
                peer.connect(str(path))
            except OSError as exc:  # refused (a socket left by a dead gateway), gone, timed out
                raise ControlUnavailable(f"nothing answers on {path} ({exc.strerror or type(exc).__name__})") from None
            pid, uid = _peer_credentials(peer)
            if uid is not None and uid != os.getuid():
                raise ControlUnavailable(f"the process on {path} is another user's: not used")
            try:
                peer.sendall(request)
                return _read_line(peer.recv, deadline), pid
            except OSError as exc:
                raise ControlUnavailable(f"the gateway on {path} did not answer "
                                         f"({exc.strerror or type(exc).__name__})") from None


def _peer_credentials(sock: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the process at the other end (Linux ``SO_PEERCRED``); (None, None) where unknown."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None, None
    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None, None
    return (pid if pid > 0 else None), uid


Opener = Callable[[str], BinaryIO]


class WindowsPipeChannel:
    """The named pipe of one home (``opener``, ``server_pid``: tests give ones that need no Windows)."""

    BUSY_RETRY = 0.05

    def __init__(self, home: Path | str, *, opener: Opener | None = None,
                 server_pid: Callable[[BinaryIO], int | None] | None = None) -> None:
        self.home = Path(home)
        self.where = pipe_name(self.home)
        self._open = opener or (lambda name: open(name, "r+b", buffering=0))  # noqa: SIM115 - closed below
        self._server_pid = server_pid or _pipe_server_pid

    def published(self) -> bool:
        try:
            return os.path.exists(self.where)
        except (OSError, ValueError):
            return False

    def exchange(self, request: bytes, timeout: float) -> tuple[bytes, int | None]:
        deadline = time.monotonic() + timeout
        handle: BinaryIO | None = None
        while handle is None:
            try:
                handle = self._open(self.where)
            except FileNotFoundError:
                raise ControlUnavailable(f"no gateway pipe {self.where}") from None
            except OSError:  # busy: another client is mid-request; upstream retries the same way
                if time.monotonic() >= deadline:
                    raise ControlUnavailable(f"the gateway pipe {self.where} stayed busy") from None
                time.sleep(self.BUSY_RETRY)
        try:
            pid = self._server_pid(handle)
            handle.write(request)
            return _read_line(lambda n: handle.read(n) or b"", deadline), pid
        except OSError as exc:
            raise ControlUnavailable(f"the gateway pipe {self.where} did not answer "
                                     f"({exc.strerror or type(exc).__name__})") from None
        finally:
            with contextlib.suppress(OSError):
                handle.close()


def _pipe_server_pid(handle: Any) -> int | None:
    if sys.platform != "win32":
        return None
    try:  # pragma: no cover - Windows only
        import ctypes
        import msvcrt

        pid = ctypes.c_ulong(0)
        ok = ctypes.windll.kernel32.GetNamedPipeServerProcessId(msvcrt.get_osfhandle(handle.fileno()),
                                                                ctypes.byref(pid))
        return int(pid.value) if ok and pid.value else None
    except (OSError, AttributeError, ValueError):  # pragma: no cover - Windows only
        return None


def channel_for(home: Path | str) -> UnixControlChannel | WindowsPipeChannel:
    return WindowsPipeChannel(home) if os.name == "nt" else UnixControlChannel(home)
