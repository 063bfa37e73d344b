"""The running backend's session token from the host record Hermes publishes (0.22-era Hermes).

A ``hermes dashboard`` / ``hermes serve`` that owns this user's host role writes
``host-<role>.json`` and ``host-<role>.token`` (0600) into its lock directory
(``gateway/host_rendezvous.py``): ``$HERMES_GATEWAY_LOCK_DIR`` if set, else
``$XDG_STATE_HOME/hermes/gateway-locks`` (a relative ``XDG_STATE_HOME`` is ignored, as the XDG spec
says), else ``~/.local/state/hermes/gateway-locks`` (``gateway/status.py:_get_lock_dir``). Roles:
``serve`` (the machine-level backend) and ``desktop-serve`` (a Hermes Desktop app's own backend).
A pip-installed dashboard has no built frontend, so this record is the only place its token is
published besides its environment.

The directory is the *backend's*: it is worked out from that process's environment, as Hermes worked it
out. A record is used only when all of these hold, else it is ignored with a reason:

* record, token and their directory belong to this user; record and token are regular files (not
  symlinks) that nobody else can read or write (POSIX; on Windows Hermes protects them with an ACL
  and so does not check modes, nor does this);
* the record names the process the caller found serving the home (pid, and its start time when the
  record carries one), on a loopback port, and the token hashes to the record's ``tokenFingerprint``;
* that process proves it is the owner: ``GET /api/host/identity`` with ``Authorization: Bearer
  <token>`` on the recorded port answers with the same ``pid``.

The token lives only in a :class:`~core.backend.websocket.Secret`; it is never logged or put in a message.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_tray_core.backend.websocket import Secret
from hermes_tray_core.digest import sha256_hex
from hermes_tray_core.hermes.processes import is_loopback
from hermes_tray_core.numbers import json_number
from hermes_tray_core.stores.fsutil import too_large_words

__all__ = ["ROLES", "HostToken", "confirm_identity", "find_host_token", "lock_dir"]

ROLES = ("serve", "desktop-serve")
LOCKS_DIRNAME = "gateway-locks"
IDENTITY_PATH = "/api/host/identity"
IDENTITY_TIMEOUT = 2.0  # Hermes' own probe bound (host_rendezvous.PROBE_TIMEOUT_S)
MAX_RECORD_BYTES = 64 * 1024
MAX_TOKEN_BYTES = 4096
START_SLACK = 1.0  # s: the record's createTime is Hermes' own reading of the same psutil value


@dataclass(frozen=True)
class HostToken:
    """A confirmed host record: the token, and the port it was confirmed on."""

    role: str
    pid: int
    host: str
    port: int
    token: Secret = field(repr=False)


def lock_dir(env_get: Callable[[str], str | None]) -> Path | None:
    """Hermes' lock directory for a process whose environment answers ``env_get`` (None: cannot tell)."""
    override = env_get("HERMES_GATEWAY_LOCK_DIR")
    if override:
        # Hermes takes it as it is; relative, it would be relative to the backend's working directory.
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


def _own_dir(path: Path) -> str | None:
    """Why ``path`` is not a directory of this user's (None when it is)."""
    try:
        st = os.lstat(path)
    except OSError:
        return f"no lock directory {path}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if os.name == "posix" and st.st_uid != os.getuid():
        return f"{path} belongs to another user"
    if os.name == "posix" and stat.S_IMODE(st.st_mode) & 0o022:
        return f"{path} can be written by others (Hermes keeps it 0700)"
    return None


def loopback_json(method: str, host: str, port: int, path: str, headers: dict[str, str], *, limit: int,
                  timeout: float) -> Any:
    """One request to a loopback HTTP server of this user's Hermes and its JSON answer; None when it is not a
    loopback address, does not answer 200 or answers no JSON (never raises; what is sent is never echoed)."""
    if not is_loopback(host):
        return None
    h = host.strip("[]")
    netloc = f"[{h}]:{port}" if ":" in h else f"{h}:{port}"
    conn = http.client.HTTPConnection(h, port, timeout=timeout)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None,
                     headers={"Host": netloc, "Accept": "application/json", **headers})
        resp = conn.getresponse()
        body = resp.read(limit)
        if resp.status != 200:
            return None
        return json.loads(body.decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def origin_of(host: str, port: int) -> str:
    h = host.strip("[]")
    return f"http://[{h}]:{port}" if ":" in h else f"http://{h}:{port}"


def confirm_identity(host: str, port: int, token: Secret, *, timeout: float = IDENTITY_TIMEOUT) -> dict[str, Any] | None:
    """``GET /api/host/identity`` with the token as Bearer; the answer (``pid``, ``role``, ``servesSpa``) or
    None when the port does not answer as an owner (never raises; the token is never echoed)."""
    data = loopback_json("GET", host, port, IDENTITY_PATH, {"Authorization": f"Bearer {token.reveal()}"},
                         limit=MAX_RECORD_BYTES, timeout=timeout)
    return data if isinstance(data, dict) else None


def _read_role(directory: Path, role: str, pid: int, start_time: float | None) -> HostToken:
    """The confirmed record of ``role`` naming ``pid``; ValueError with the reason otherwise."""
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
    answer = confirm_identity(host, port, token)
    if answer is None or answer.get("pid") != pid:
        raise ValueError(f"the process on port {port} did not confirm it is pid {pid} ({IDENTITY_PATH})")
    return HostToken(role, pid, host, port, token)


def find_host_token(pid: int, start_time: float | None, env_get: Callable[[str], str | None]
                    ) -> tuple[HostToken | None, str]:
    """The token of backend ``pid`` from its host record, confirmed; else (None, why not, in one line)."""
    directory = lock_dir(env_get)
    if directory is None:
        return None, "its host-record directory cannot be told (a relative HERMES_GATEWAY_LOCK_DIR or HOME)"
    problem = _own_dir(directory)
    if problem:
        return None, f"no host record ({problem})"
    reasons = []
    for role in ROLES:
        try:
            return _read_role(directory, role, pid, start_time), ""
        except ValueError as exc:
            reasons.append(str(exc))
    return None, "no usable host record (" + "; ".join(reasons) + ")"
