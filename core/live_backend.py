"""Which running Hermes backend a continuation should go to, or why none.

The user's own ``hermes dashboard`` / ``hermes serve`` serving the home (``core.hermes_processes``:
this user's processes only), reachable on loopback with its session token
(``core.backend_endpoint``). When there is none, or none can be used, the reason is returned: the
resume falls back to a spawned gateway and reports it.
"""

from __future__ import annotations

from pathlib import Path

from hermes_tray_core.backend_endpoint import BackendEndpoint, endpoint_for
from hermes_tray_core.hermes_processes import HermesProcesses
from hermes_tray_core.transport_ws import BackendUnusable
from hermes_tray_core.vocab import ProcessKind

NO_BACKEND = "no running Hermes backend (hermes dashboard) serves this home"


def find_live_backend(home: Path | str, processes: HermesProcesses | None = None
                      ) -> tuple[BackendEndpoint | None, str | None]:
    """``(endpoint, None)`` for the running backend to continue in, else ``(None, why not)``."""
    snap = processes if processes is not None else HermesProcesses.now()
    backends = [p for p in snap.serving(home) if p.kind == ProcessKind.DASHBOARD]
    if not backends:
        return None, NO_BACKEND
    reasons = []
    for proc in backends:
        try:
            return endpoint_for(proc), None
        except BackendUnusable as exc:
            reasons.append(str(exc))
    return None, "; ".join(reasons)


__all__ = ["NO_BACKEND", "find_live_backend"]
