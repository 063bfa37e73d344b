"""What a Hermes installation can do, asked of the installation itself: does it continue interrupted
turns (``tui_gateway.turn_marker``)? Never a guess from a version string: anything that leaves the answer
open is ``auto_continue=None``, and the caller refuses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tray_core.backend.install import (
    GATEWAY_MODULE,
    HermesInstall,
    gateway_environment,
    launcher_python,
)
from hermes_tray_core.backend.stdio import popen_platform_kwargs

if TYPE_CHECKING:
    from hermes_tray_core.backend.endpoint import BackendEndpoint

__all__ = ["Capabilities", "backend_capabilities", "clear_capability_cache", "probe_capabilities"]

PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class Capabilities:
    """What a Hermes installation can do (``auto_continue`` None: could not be told, refuse), and the version
    of the distribution that ships its gateway (else ``hermes --version``'s)."""

    auto_continue: bool | None
    version: str | None = None
    detail: str = ""
    package_dir: str | None = None
    distribution: str | None = None


# The distribution that ships ``tui_gateway``: first among those installed beside it (one directory, cheap),
# by its top_level.txt or else its RECORD; then any on the path (packages_distributions() reads every
# distribution's files: seconds on a large environment, so only for an editable or unusual install).
_PROBE = r"""
import importlib.util, json, os, sys
out = {"gateway": False, "turn_marker": False, "version": None, "distribution": None, "package_dir": None}
try:
    spec = importlib.util.find_spec("tui_gateway")
    if spec is not None:
        out["package_dir"] = list(spec.submodule_search_locations or [None])[0]
        out["gateway"] = importlib.util.find_spec("tui_gateway.entry") is not None
        out["turn_marker"] = importlib.util.find_spec("tui_gateway.turn_marker") is not None
except Exception as exc:  # boundary: a probe run in Hermes' interpreter reports, never raises
    out["error"] = repr(exc)
def ships(dist):
    top = dist.read_text("top_level.txt")
    if top is not None:
        return "tui_gateway" in top.split()
    return any(f.parts[:1] == ("tui_gateway",) for f in dist.files or ())
try:
    from importlib import metadata
    found = None
    if out["package_dir"]:
        found = next((d for d in metadata.distributions(path=[os.path.dirname(out["package_dir"])]) if ships(d)),
                     None)
    if found is None:
        names = metadata.packages_distributions().get("tui_gateway") or []
        found = metadata.distribution(names[0]) if names else None
    if found is not None:
        out["distribution"], out["version"] = found.metadata["Name"], found.version
except Exception:  # boundary: a probe run in Hermes' interpreter reports, never raises
    pass
sys.stdout.write(json.dumps(out))
"""
LAUNCHER_TIMEOUT = 20.0
_LAUNCHER_VERSION = re.compile(r"\bv?(\d+(?:\.\d+)+\S*)")


def launcher_version(install: HermesInstall, env: Mapping[str, str], *, timeout: float = LAUNCHER_TIMEOUT) -> str | None:
    """What ``hermes --version`` says ("Hermes Agent v0.22.2.post1 (2026.9.24)" → "0.22.2.post1"). Slow: only
    when no distribution names the version."""
    if install.python is None:
        return None
    candidates = [Path(install.python).with_name("hermes"), shutil.which("hermes")]
    launcher = next((str(c) for c in candidates if c and os.path.isfile(c)
                     and launcher_python(c) in (install.python, str(Path(install.python).resolve()))), None)
    if launcher is None:
        return None
    try:
        proc = subprocess.run([launcher, "--version"], env=dict(env), timeout=timeout,  # noqa: S603 - argv
                              capture_output=True, stdin=subprocess.DEVNULL, **popen_platform_kwargs())
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = proc.stdout.decode("utf-8", "replace").strip().splitlines()[:1]
    found = _LAUNCHER_VERSION.search(first[0]) if proc.returncode == 0 and first else None
    return found.group(1) if found else None

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
    """Ask the installation itself whether it continues interrupted turns: its interpreter, run once (cached
    until the package directory changes, so an upgrade is noticed)."""
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
        proc = subprocess.run([install.python, "-c", _PROBE], env=env, cwd=cwd,  # noqa: S603 - argv list
                              timeout=timeout, capture_output=True, stdin=subprocess.DEVNULL,
                              **popen_platform_kwargs())
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
    distribution = data.get("distribution") if isinstance(data.get("distribution"), str) and version else None
    if version is None:
        version = launcher_version(install, env)
    caps = Capabilities(
        has, version, package_dir=data.get("package_dir"), distribution=distribution,
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

