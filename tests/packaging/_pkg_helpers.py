"""Shared helpers for the packaging tests (builds, installs into temporary HOMEs)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_build_module():
    """packaging/build.py as a module (its name would clash with the PyPA `build` package)."""
    spec = importlib.util.spec_from_file_location("hermes_tray_packaging_build", ROOT / "packaging" / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alias_dir(work: Path) -> Path:
    """packaging/import_alias.py's alias dir: PyInstaller's analysis finds ``hermes_tray_core`` there."""
    spec = importlib.util.spec_from_file_location("hermes_tray_import_alias", ROOT / "packaging" / "import_alias.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.alias_dir(work)


def need_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed ({hint})")
    return path


def need_module(name: str, hint: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"python module {name} not installed ({hint})")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A login-like environment for one temporary user: nothing of the developer's XDG setup leaks in."""
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "QT_QPA_PLATFORM": "offscreen",
        "HERMES_HOME": str(home / ".hermes"),
    }
    env.update(extra)
    return env


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 300)
    return subprocess.run(argv, **kwargs)  # noqa: S603 — argv lists only


def leftovers(home: Path, user_data: tuple[str, ...]) -> list[str]:
    """Files and links under ``home`` outside the user-data folders (relative paths)."""
    found = []
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home).as_posix()
        if any(rel == d or rel.startswith(d + "/") for d in user_data):
            continue
        if path.is_symlink() or path.is_file():
            found.append(rel)
    return found


USER_DATA = (".config/hermes-tray", ".local/state/hermes-tray", ".cache/hermes-tray", ".hermes")
