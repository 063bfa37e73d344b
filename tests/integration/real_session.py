"""Give a home a real session with one real turn, through the real Hermes gateway (tests, bench)."""

from __future__ import annotations

from pathlib import Path

SEED_PROMPT = "Create notes.txt listing the three largest files in this project, then summarise them."


def seed_real_session(hermes_python: Path | str, home: Path, *, prompt: str = SEED_PROMPT,
                      cwd: str | None = None, timeout: float = 120.0) -> str:
    """``session.create`` + ``prompt.submit`` + wait for ``message.complete``; returns the stored session id.

    The gateway runs as a fresh user (its own ``HOME`` and ``XDG_*`` dirs beside the home): a 0.22-era
    Hermes keeps per-user state outside ``HERMES_HOME``."""
    from real_dashboard import isolated_user_env

    from hermes_tray_core.backend.install import gateway_environment, install_from_command
    from hermes_tray_core.backend.stdio import stdio_session

    install = install_from_command([str(hermes_python)])
    env = {**gateway_environment(home), **isolated_user_env(home.parent / f"{home.name}-user")}
    gw = stdio_session(install, home, log_path=home.parent / f"{home.name}-seed-gateway.log",
                       cwd=cwd or str(home.parent), env=env)
    gw.start()
    try:
        gw.wait_ready(timeout)
        created = gw.request("session.create", {})
        gw.request("prompt.submit", {"session_id": created["session_id"], "text": prompt})
        while True:
            ev = gw.events.get(timeout=timeout)
            if not isinstance(ev, dict):
                raise RuntimeError("the gateway exited during the seed turn")
            if ev.get("type") == "error":
                raise RuntimeError(f"the seed turn failed: {ev.get('payload')}")
            if ev.get("type") == "message.complete":
                return str(created["stored_session_id"])
    finally:
        gw.shutdown(10)
