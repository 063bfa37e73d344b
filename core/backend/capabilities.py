"""What a Hermes installation can do, asked of the installation itself: does it continue interrupted
turns (``tui_gateway.turn_marker``)? Never a guess from a version string: anything that leaves the answer
open is ``auto_continue=None``, and the caller refuses."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tray_core.backend.install import GATEWAY_MODULE, HermesInstall, gateway_environment
from hermes_tray_core.backend.stdio import popen_platform_kwargs

if TYPE_CHECKING:
    from hermes_tray_core.backend.endpoint import BackendEndpoint

__all__ = ["Capabilities", "backend_capabilities", "clear_capability_cache", "probe_capabilities"]

PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class Capabilities:
    """What a Hermes installation can do. ``auto_continue`` None = could not be told (refuse)."""

    auto_continue: bool | None
    version: str | None = None
    detail: str = ""
    package_dir: str | None = None


_PROBE = r"""
import importlib.util, json, os, sys
out = {"gateway": False, "turn_marker": False, "version": None, "package_dir": None}
try:
    spec = importlib.util.find_spec("tui_gateway")
    if spec is not None:
        out["package_dir"] = list(spec.submodule_search_locations or [None])[0]
        out["gateway"] = importlib.util.find_spec("tui_gateway.entry") is not None
        out["turn_marker"] = importlib.util.find_spec("tui_gateway.turn_marker") is not None
except Exception as exc:
    out["error"] = repr(exc)
try:
    from importlib.metadata import version
    out["version"] = version("hermes-agent")
except Exception:
    pass
sys.stdout.write(json.dumps(out))
"""

_cap_cache: dict[tuple[str, str, str], tuple[Capabilities, float | None]] = {}
_cap_lock = threading.Lock()


def _dir_mtime(path: str | None) -> float | None:
    if not path:
        return None
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def probe_capabilities(
    install: HermesInstall, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
    timeout: float = PROBE_TIMEOUT, use_cache: bool = True,
) -> Capabilities:
    """Ask the installation itself whether it continues interrupted turns (has ``turn_marker``).

    Runs its interpreter once with the gateway's environment (cached per interpreter + PYTHONPATH
    until the package directory changes, so an upgrade is noticed). Never guesses: anything that
    leaves the answer open is ``auto_continue=None``.
    """
    if install.python is None:
        return Capabilities(None, detail=f"cannot tell what {install.argv[0]} is: set hermes_command to "
                                         "Hermes' Python interpreter")
    env = dict(env) if env is not None else gateway_environment(Path.home() / ".hermes")
    key = (install.python, env.get("PYTHONPATH", ""), cwd or "")
    if use_cache:
        with _cap_lock:
            hit = _cap_cache.get(key)
        if hit is not None and hit[0].package_dir and _dir_mtime(hit[0].package_dir) == hit[1]:
            return hit[0]
    try:
        proc = subprocess.run(  # noqa: S603 - argv list, no shell
            [install.python, "-c", _PROBE], env=env, cwd=cwd, capture_output=True, timeout=timeout,
            stdin=subprocess.DEVNULL, **popen_platform_kwargs(),
        )
    except FileNotFoundError:
        return Capabilities(None, detail=f"Hermes' interpreter {install.python} does not exist")
    except subprocess.TimeoutExpired:
        return Capabilities(None, detail=f"{install.python} did not answer the capability probe in {timeout:.0f}s")
    except OSError as exc:
        return Capabilities(None, detail=f"cannot run {install.python}: {exc.strerror or exc}")
    try:
        data = json.loads(proc.stdout.decode("utf-8", "replace") or "null")
    except ValueError:
        data = None
    if proc.returncode != 0 or not isinstance(data, dict):
        return Capabilities(None, detail=f"capability probe with {install.python} failed (exit {proc.returncode})")
    if not data.get("gateway"):
        return Capabilities(None, version=data.get("version"),
                            detail=f"{install.python} has no {GATEWAY_MODULE}: is Hermes Agent installed there?")
    has = bool(data.get("turn_marker"))
    version = data.get("version") if isinstance(data.get("version"), str) else None
    caps = Capabilities(
        has, version, package_dir=data.get("package_dir"),
        detail=("Hermes continues interrupted turns itself" if has
                else "this Hermes predates auto-continue: the tray submits the continuation note"),
    )
    with _cap_lock:
        _cap_cache[key] = (caps, _dir_mtime(caps.package_dir))
    return caps


def clear_capability_cache() -> None:
    with _cap_lock:
        _cap_cache.clear()


def backend_capabilities(home: Path | str, backend: BackendEndpoint) -> Capabilities:
    """What the running backend's own installation can do (cached per interpreter, as :func:`probe_capabilities`)."""
    if backend.python is None:
        return Capabilities(None, detail=f"cannot tell which Python your running Hermes (pid {backend.pid}) runs")
    probe = HermesInstall((backend.python, "-m", GATEWAY_MODULE), backend.python, "running backend")
    return probe_capabilities(probe, env=gateway_environment(Path(home)), cwd=str(Path.home()))

