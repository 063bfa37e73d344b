"""Start the real ``hermes dashboard`` (hermes-agent 0.19.0) for a home on a random loopback port (tests, bench).

It runs offline: ``--skip-build`` serves the web UI the wheel ships, ``--no-open`` opens no browser,
``HERMES_HOME`` is the test's home whose ``config.yaml`` points at the loopback mock model. Start-up
takes about 2 s; it prints ``HERMES_DASHBOARD_READY port=<n>`` when it listens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path


def dashboard_argv(hermes_python: Path | str) -> list[str]:
    python = Path(hermes_python)
    return [str(python), str(python.parent / "hermes"), "dashboard", "--no-open", "--skip-build",
            "--host", "127.0.0.1", "--port", "0"]


def start_dashboard(hermes_python: Path | str, home: Path, *, env: Mapping[str, str] | None = None,
                    timeout: float = 90.0, log: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start it and wait for its ready line; returns (process, port)."""
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("HERMES_TRAY_") and k != "HERMES_DASHBOARD_SESSION_TOKEN"}
    child_env.update(env or {})
    child_env.update({"HERMES_HOME": str(home), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    err = open(log or home.parent / f"{home.name}-dashboard.log", "ab")  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(dashboard_argv(hermes_python), stdout=subprocess.PIPE, stderr=err,  # noqa: S603
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
def running_dashboard(hermes_python: Path | str, home: Path, *, env: Mapping[str, str] | None = None
                      ) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    proc, port = start_dashboard(hermes_python, home, env=env)
    try:
        yield proc, port
    finally:
        stop_dashboard(proc)
