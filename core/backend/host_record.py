"""The running backend's session token from the host record a 0.22-era Hermes publishes
(``gateway/host_rendezvous.py``: ``host-<role>.json`` and ``.token`` in the lock directory that Hermes'
``gateway/status.py:_get_lock_dir`` works out from the backend's own environment). A pip-installed dashboard
publishes its token nowhere else. A record is used only when record, token and directory are this user's and
private (POSIX; Windows protects them by ACL), it names the process found serving the home, its token matches
``tokenFingerprint``, and that process answers ``/api/host/identity`` with its pid. The token lives only in a
:class:`Secret`: never logged or put in a message.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hermes_tray_core.backend.websocket import Secret, loopback_json
from hermes_tray_core.digest import sha256_hex
from hermes_tray_core.hermes.processes import is_loopback
from hermes_tray_core.numbers import json_number
from hermes_tray_core.stores.fsutil import too_large_words

__all__ = ["ROLES", "HostToken", "find_host_token", "lock_dir"]

ROLES = ("serve", "desktop-serve")
LOCKS_DIRNAME = "gateway-locks"
IDENTITY_PATH = "/api/host/identity"
IDENTITY_TIMEOUT = 2.0  # Hermes' own probe bound (host_rendezvous.PROBE_TIMEOUT_S)
MAX_RECORD_BYTES = 64 * 1024
MAX_TOKEN_BYTES = 4096
START_SLACK = 1.0  # s: the record's createTime is Hermes' own reading of the same psutil value


@dataclass(frozen=True)
class HostToken:

    role: str
    pid: int
    host: str
    port: int
    token: Secret = field(repr=False)


def lock_dir(env_get: Callable[[str], str | None]) -> Path | None:
    """Hermes' lock directory for a process whose environment answers ``env_get`` (None: cannot tell)."""
    override = env_get("HERMES_GATEWAY_LOCK_DIR")
    if override:
        return Path(override) if os.path.isabs(override) else None
    state = env_get("XDG_STATE_HOME") or ""
    if os.path.isabs(state):
        return Path(state) / "hermes" / LOCKS_DIRNAME
    home = env_get("USERPROFILE" if sys.platform == "win32" else "HOME") or os.path.expanduser("~")
    if not os.path.isabs(home):
        return None
    return Path(home) / ".local" / "state" / "hermes" / LOCKS_DIRNAME


def read_private_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of ours that nobody else can read or write; ValueError says why not."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ValueError(f"no {path.name}") from None
    except OSError as exc:
        raise ValueError(f"{path.name} cannot be opened ({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        if os.name == "posix":
            if st.st_uid != os.getuid():
                raise ValueError(f"{path.name} belongs to another user")
            if stat.S_IMODE(st.st_mode) & 0o077:
                raise ValueError(f"{path.name} can be read or written by others (mode "
                                 f"{stat.S_IMODE(st.st_mode):o})")
        if st.st_size > limit:
            raise ValueError(f"{path.name} is {too_large_words(limit)}")
        return os.read(fd, limit + 1)[:limit]
    finally:
        os.close(fd)


def private_problem(path: Path, kind: Callable[[int], bool], what: str, others: int) -> str | None:
    """Why ``path`` (a link not followed) is not a ``what`` of this user's that others cannot use (``others``:
    the mode bits they must not have; POSIX), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"no {what} at {path}"
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or type(exc).__name__})"
    if not kind(st.st_mode) or (os.name == "posix" and st.st_uid != os.getuid()):
        return f"{path} is not a {what} of yours"
    if os.name == "posix" and stat.S_IMODE(st.st_mode) & others:
        return f"{path} can be used by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _read_role(directory: Path, role: str, pid: int, start_time: float | None) -> HostToken:
    raw = read_private_file(directory / f"host-{role}.json", MAX_RECORD_BYTES)
    try:
        rec = json.loads(raw.decode("utf-8-sig"))
    except ValueError:
        raise ValueError(f"host-{role}.json is not JSON") from None
    if not isinstance(rec, dict) or rec.get("role") != role:
        raise ValueError(f"host-{role}.json is not a host record")
    if rec.get("pid") != pid or isinstance(rec.get("pid"), bool):
        raise ValueError(f"host-{role}.json names another process")
    created = json_number(rec.get("createTime"))
    if created is not None and start_time is not None and abs(created - start_time) > START_SLACK:
        raise ValueError(f"host-{role}.json names an earlier process with the same pid")
    port = rec.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"host-{role}.json has no port")
    host = str(rec.get("host") or "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "*", "localhost") else host  # Hermes dials loopback too
    if not is_loopback(host):
        raise ValueError(f"host-{role}.json names a non-loopback address")
    token_text = read_private_file(directory / f"host-{role}.token", MAX_TOKEN_BYTES).decode("utf-8-sig", "replace").strip()
    if not token_text:
        raise ValueError(f"host-{role}.token is empty")
    fingerprint = str(rec.get("tokenFingerprint") or "")
    if fingerprint and sha256_hex(token_text.encode("utf-8", "replace"))[:16] != fingerprint:
        raise ValueError(f"host-{role}.token does not belong to host-{role}.json (a restart in between?)")
    token = Secret(token_text)
    answer = loopback_json("GET", host, port, IDENTITY_PATH, {"Authorization": f"Bearer {token.reveal()}"},
                           limit=MAX_RECORD_BYTES, timeout=IDENTITY_TIMEOUT)  # {pid, role, servesSpa}
    if not isinstance(answer, dict) or answer.get("pid") != pid:
        raise ValueError(f"the process on port {port} did not confirm it is pid {pid} ({IDENTITY_PATH})")
    return HostToken(role, pid, host, port, token)


def find_host_token(pid: int, start_time: float | None, env_get: Callable[[str], str | None]
                    ) -> tuple[HostToken | None, str]:
    directory = lock_dir(env_get)
    if directory is None:
        return None, "its host-record directory cannot be told (a relative HERMES_GATEWAY_LOCK_DIR or HOME)"
    problem = private_problem(directory, stat.S_ISDIR, "lock directory", 0o022)  # Hermes keeps it 0700
    if problem:
        return None, f"no host record ({problem})"
    reasons = []
    for role in ROLES:
        try:
            return _read_role(directory, role, pid, start_time), ""
        except ValueError as exc:
            reasons.append(str(exc))
    return None, "no usable host record (" + "; ".join(reasons) + ")"
