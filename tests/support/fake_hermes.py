"""Real processes that look like Hermes to the process table: ``hermes dashboard``, ``hermes chat``,
``python -m tui_gateway.entry`` and a WebUI server, each with its own environment.

Each is a tiny python program (it only sleeps, and the dashboard one listens on a loopback port), run
the way an installed Hermes runs: ``<python> <venv>/bin/hermes dashboard`` (the console-script
shebang form) or ``<python> -m tui_gateway.entry``. Tests kill them with SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

_BODY = r'''
import os, socket, sys, time
s = None
if os.environ.get("FAKE_HERMES_LISTEN"):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
with open(os.environ["FAKE_HERMES_READY"], "w") as f:
    f.write(str(s.getsockname()[1]) if s else "0")
while True:
    time.sleep(1)
'''


def _bin(root: Path, name: str) -> Path:
    d = root / "fake-bin"
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    if not p.exists():
        p.write_text(f"#!{sys.executable}\n{_BODY}")
        p.chmod(0o755)
    return p


def _gateway_pkg(root: Path) -> Path:
    d = root / "fake-pkg"
    (d / "tui_gateway").mkdir(parents=True, exist_ok=True)
    (d / "tui_gateway" / "__init__.py").write_text("")
    (d / "tui_gateway" / "entry.py").write_text(_BODY)
    return d


def argv_for(kind: str, root: Path, args: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """(argv, extra env) of a fake Hermes process of ``kind``: dashboard / chat / gateway / webui / other."""
    if kind == "dashboard":
        return [sys.executable, str(_bin(root, "hermes")), "dashboard", *args], {"FAKE_HERMES_LISTEN": "1"}
    if kind == "chat":
        return [sys.executable, str(_bin(root, "hermes")), *args, "chat"], {}
    if kind == "gateway":
        return [sys.executable, "-m", "tui_gateway.entry", *args], {"PYTHONPATH": str(_gateway_pkg(root))}
    if kind == "webui":
        return [sys.executable, str(_bin(root, "hermes-webui-server.py")), *args], {}
    if kind == "other":
        return [sys.executable, str(_bin(root, "not-hermes")), *args], {}
    raise ValueError(kind)


@contextlib.contextmanager
def fake_hermes(kind: str, root: Path, *, env: Mapping[str, str | None] | None = None,
                args: Sequence[str] = ()) -> Iterator[tuple[subprocess.Popen, int]]:
    """Run a fake Hermes process until the block ends (then SIGKILL). Yields (process, listening port or 0).

    ``env`` entries are set on top of this process's environment (a None value removes the variable).
    """
    argv, extra = argv_for(kind, root, args)
    ready = root / f"ready-{kind}-{time.monotonic_ns()}"
    child_env = dict(os.environ)
    child_env.pop("HERMES_HOME", None)
    child_env.update(extra)
    child_env["FAKE_HERMES_READY"] = str(ready)
    for k, v in (env or {}).items():
        if v is None:
            child_env.pop(k, None)
        else:
            child_env[k] = v
    proc = subprocess.Popen(argv, env=child_env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (ready.exists() and ready.read_text()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fake {kind} did not start (exit {proc.poll()})")
            time.sleep(0.02)
        yield proc, int(ready.read_text())
    finally:
        kill(proc)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
