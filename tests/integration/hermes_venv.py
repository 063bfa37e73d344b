"""Create (once) and cache a virtualenv with the real ``hermes-agent`` from PyPI.

Default location ``~/.cache/hermes-tray-tests/hermes-agent-<version>``; ``HERMES_TRAY_TEST_HERMES_VENV``
overrides it. Creation holds a file lock, so parallel test runs and CI share one install, and a
venv is only trusted once a stamp file says its install finished. ``python hermes_venv.py``
pre-creates it (CI does that before running the tests).

PyPI unreachable → :class:`PyPIUnreachable` (tests skip, saying so); any other failure raises.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERMES_VERSION = "0.19.0"
STAMP = ".hermes-tray-venv-ok"
_NETWORK_SIGNS = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
                  "Name or service not known", "Could not fetch URL", "ConnectTimeoutError", "ReadTimeoutError",
                  "No route to host", "Connection refused", "nodename nor servname", "ProxyError",
                  "getaddrinfo failed")


class PyPIUnreachable(RuntimeError):
    """hermes-agent could not be downloaded because the package index cannot be reached."""


def venv_path() -> Path:
    override = os.environ.get("HERMES_TRAY_TEST_HERMES_VENV")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "hermes-tray-tests" / f"hermes-agent-{HERMES_VERSION}"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _healthy(venv: Path) -> bool:
    py = venv_python(venv)
    if not (venv / STAMP).exists() or not py.exists():
        return False
    probe = ("import importlib.metadata as m, importlib.util as u, sys; "
             f"sys.exit(0 if m.version('hermes-agent') == {HERMES_VERSION!r} and u.find_spec('tui_gateway.entry') "
             "else 1)")
    return subprocess.run([str(py), "-c", probe], capture_output=True, timeout=120).returncode == 0  # noqa: S603


def _lock(path: str):
    """A cross-process lock around creation (the engine's blocking OS lock; CI's bare python3 may lack it)."""
    try:
        from hermes_tray_core.fsutil import locked
    except ImportError:
        import contextlib

        return contextlib.nullcontext()
    return locked(Path(path))


def ensure_hermes_venv(*, quiet: bool = True) -> tuple[Path, float | None]:
    """The venv's path, and how long creating it took (None when it was cached)."""
    venv = venv_path()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _lock(str(venv) + ".lock"):
        if _healthy(venv):
            return venv, None
        t0 = time.monotonic()
        if not venv_python(venv).exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True,  # noqa: S603
                           timeout=300)
        (venv / STAMP).unlink(missing_ok=True)
        cmd = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check",
               "--retries", "2", "--timeout", "30", f"hermes-agent=={HERMES_VERSION}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)  # noqa: S603
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            if any(sign in output for sign in _NETWORK_SIGNS):
                raise PyPIUnreachable(f"cannot reach the package index to install hermes-agent=={HERMES_VERSION}: "
                                      + output.strip().splitlines()[-1][:300])
            raise RuntimeError(f"installing hermes-agent=={HERMES_VERSION} failed:\n{output[-3000:]}")
        if not quiet:
            print(proc.stdout[-2000:])
        (venv / STAMP).write_text(HERMES_VERSION + "\n", encoding="utf-8")
        if not _healthy(venv):
            raise RuntimeError(f"hermes-agent=={HERMES_VERSION} installed in {venv} but tui_gateway is not importable")
        return venv, time.monotonic() - t0


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


if __name__ == "__main__":
    try:
        v, took = ensure_hermes_venv(quiet=True)
    except PyPIUnreachable as exc:
        print(f"hermes venv: {exc}", file=sys.stderr)
        sys.exit(0)  # the integration tests will skip and say why
    size = dir_size(v) / 1e6
    print(f"hermes venv: {v} ({'cached' if took is None else f'created in {took:.0f}s'}, {size:.0f} MB)")
