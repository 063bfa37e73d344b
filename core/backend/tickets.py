"""Single-use tickets for Hermes' ``/api/ws``, and how they ride on the WebSocket upgrade.

Newer Hermes admits a WebSocket client with a ticket instead of the session token in the URL (upstream
``hermes_cli/web_server_chat.py``): two subprotocols, ``hermes-gateway-v1`` and
``hermes-gateway-ticket.<ticket>``, of which the server echoes only the first. A ticket lives only in a
:class:`Secret`, is minted right before the connection it opens (it expires in 30 s and works once) and is
never logged.
"""

from __future__ import annotations

from hermes_tray_core.backend.websocket import Secret, loopback_json, netloc

__all__ = ["MINT_PATH", "PROTOCOL", "TICKET_PREFIX", "mint_dashboard_ticket", "subprotocols"]

PROTOCOL = "hermes-gateway-v1"
TICKET_PREFIX = "hermes-gateway-ticket."
MINT_PATH = "/api/auth/ws-ticket"
MINT_TIMEOUT = 3.0
MINT_LIMIT = 64 * 1024


def subprotocols(ticket: Secret) -> list[str]:
    """The two subprotocols that carry ``ticket`` on the upgrade."""
    return [PROTOCOL, TICKET_PREFIX + ticket.reveal()]


def mint_dashboard_ticket(host: str, port: int, token: Secret, *, timeout: float = MINT_TIMEOUT) -> Secret | None:
    """``POST /api/auth/ws-ticket`` (``X-Hermes-Session-Token``), or None when it mints none (0.19.0 and 0.22
    have no route: the caller offers the token as they want it). Never raises."""
    data = loopback_json("POST", host, port, MINT_PATH, {"Origin": f"http://{netloc(host, port)}",
                         "Content-Length": "0", "X-Hermes-Session-Token": token.reveal()},
                         limit=MINT_LIMIT, timeout=timeout)
    ticket = data.get("ticket") if isinstance(data, dict) else None
    if not isinstance(ticket, str) or not ticket or len(ticket) > 1024 or not ticket.isprintable() or " " in ticket \
            or "," in ticket:
        return None
    return Secret(ticket)
