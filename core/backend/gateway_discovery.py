"""Which Hermes gateway owns a home's sessions, found through its control socket; and its tickets.

Newer Hermes runs one gateway that owns every local session (docs/architecture.md, "The gateway that owns
every session"). Its control channel answers one verb per connection, ``{"protocol": 1, "id": 1, "verb",
"params"}`` → ``{"ok": true, "protocol": 1, "id": 1, "result"}``: ``identify`` and ``session-ticket``
(``{profile_id, instance_id, purpose: "interactive"}`` → a grant naming the same ``profile_id``,
``instance_id`` and ``runtime_protocol`` 1). Never a guess: a socket that does not answer as a gateway is no
gateway.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hermes_tray_core.backend.control_channel import ControlUnavailable, channel_for
from hermes_tray_core.backend.websocket import Secret
from hermes_tray_core.hermes.processes import is_loopback
from hermes_tray_core.keys import home_path

__all__ = ["AUTHORITY", "GatewayIdentity", "ServedProfile", "find_gateway", "identify", "session_ticket"]

AUTHORITY = "session-authority-v1"
CONTROL_TIMEOUT = 2.0  # upstream's client default
TICKET_TIMEOUT = 5.0  # upstream's gateway_client bound for a ticket


@dataclass(frozen=True)
class ServedProfile:
    profile_id: str
    home: str


@dataclass(frozen=True)
class GatewayIdentity:
    """What one gateway said of itself (``identify``), and through whose socket (``control_home``)."""

    control_home: Path
    pid: int | None  # the process that answered (the OS's peer credentials); None where the OS cannot tell
    state: str
    instance_id: str
    served: tuple[ServedProfile, ...]
    capabilities: tuple[str, ...]
    api_origin: str | None
    version: str | None

    @property
    def authority(self) -> bool:
        """It owns every session of the homes it serves: never start a second runtime beside it."""
        return AUTHORITY in self.capabilities

    def profile_for(self, home: Path | str) -> ServedProfile | None:
        want = home_path(home)
        return next((p for p in self.served if home_path(p.home) == want), None)

    def describe(self) -> str:
        who = f"your Hermes gateway (pid {self.pid})" if self.pid else "your Hermes gateway"
        return who + (f", Hermes {self.version}" if self.version else "")

    def loopback_origin(self) -> tuple[str, int]:
        """(host, port) of ``api_origin``; :class:`ControlUnavailable` when it is not a loopback http origin."""
        try:
            url = urlsplit(self.api_origin or "")
            host, port = url.hostname or "", url.port
        except ValueError:
            host, port = "", None
        if url.scheme != "http" or not port or not is_loopback(host):
            raise ControlUnavailable(f"{self.describe()} names no loopback address for its sessions "
                                     f"({self.api_origin or 'none'}): not used")
        return host, port


def _ask(home: Path, verb: str, params: dict[str, Any] | None, timeout: float) -> tuple[dict[str, Any], int | None]:
    """One verb on ``home``'s control channel: (its ``result``, the answering pid)."""
    request = {"protocol": 1, "id": 1, "verb": verb, **({"params": params} if params is not None else {})}
    line, pid = channel_for(home).exchange(json.dumps(request).encode("utf-8") + b"\n", timeout)
    try:
        answer = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        raise ControlUnavailable(f"the answer on {home}'s control socket is not JSON") from None
    if not isinstance(answer, dict) or answer.get("protocol") != 1 or answer.get("id") != 1:
        raise ControlUnavailable(f"the answer on {home}'s control socket is not a Hermes gateway's")
    if answer.get("ok") is not True or not isinstance(answer.get("result"), dict):
        error = answer.get("error")
        said = error if isinstance(error, str) and len(error) < 200 and error.isprintable() else "no reason"
        raise ControlUnavailable(f"the gateway refused {verb} ({said})")
    return answer["result"], pid


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value and len(value) < 1024 and value.isprintable() else None


def identify(home: Path | str, *, timeout: float = CONTROL_TIMEOUT) -> GatewayIdentity:
    """Ask the gateway on ``home``'s control socket who it is; :class:`ControlUnavailable` says why not."""
    home = Path(home)
    if not channel_for(home).published():
        raise ControlUnavailable(f"no gateway control socket in {home}")
    result, pid = _ask(home, "identify", None, timeout)
    caps = result.get("capabilities")
    instance = _text(result.get("instance_id"))
    if instance is None:
        raise ControlUnavailable(f"the process on {home}'s control socket names no instance: not a gateway")
    return GatewayIdentity(
        control_home=home, pid=pid, state=_text(result.get("state")) or "unknown", instance_id=instance,
        served=tuple(ServedProfile(str(row["profile_id"]), str(row["home"]))
                     for row in result.get("served_profiles") or ()
                     if isinstance(row, dict) and _text(row.get("profile_id")) and _text(row.get("home"))),
        capabilities=tuple(c for c in caps if _text(c)) if isinstance(caps, list) else (),
        api_origin=_text(result.get("api_origin")),
        version=_text(result.get("version") or result.get("hermes_version")))


def find_gateway(home: Path | str, *, timeout: float = CONTROL_TIMEOUT) -> tuple[GatewayIdentity | None, str]:
    """The gateway serving ``home``: its own, else the root's if it lists ``home``; or (None, why)."""
    home = Path(os.path.expanduser(os.fspath(home)))
    reasons = []
    # <root>/profiles/<name>: the root's gateway may serve it
    for where in (home, home.parent.parent) if home.parent.name == "profiles" else (home,):
        try:
            gw = identify(where, timeout=timeout)
        except ControlUnavailable as exc:
            reasons.append(str(exc))
            continue
        if where == home or gw.profile_for(home) is not None:
            return gw, ""
        reasons.append(f"the gateway of {where} does not serve {home}")
    return None, "; ".join(reasons)


def session_ticket(gateway: GatewayIdentity, home: Path | str, *, timeout: float = TICKET_TIMEOUT) -> Secret:
    """A single-use ticket for ``home``'s sessions from ``gateway`` (through the socket that identified it)."""
    profile = gateway.profile_for(home)
    profile_id = profile.profile_id if profile else str(Path(home))
    grant, _pid = _ask(gateway.control_home, "session-ticket", {
        "profile_id": profile_id, "instance_id": gateway.instance_id, "purpose": "interactive"}, timeout)
    if grant.get("profile_id") != profile_id or grant.get("instance_id") != gateway.instance_id \
            or grant.get("runtime_protocol") != 1:
        raise ControlUnavailable(f"{gateway.describe()} changed while granting a ticket (restarted?)")
    ticket = grant.get("ticket")
    if not isinstance(ticket, str) or not ticket or not ticket.isprintable() or " " in ticket or "," in ticket:
        raise ControlUnavailable(f"{gateway.describe()} granted no usable ticket")
    return Secret(ticket)
