"""Make the engine importable as ``hermes_tray_core`` for PyInstaller's analysis.

The engine's folder is ``core/`` (the repository layout is fixed) but its import name is
``hermes_tray_core`` (pyproject's ``package-dir``). An editable install maps the name with an
import hook, which PyInstaller's analysis does not consult, so the spec (and the packaging tests
that freeze a probe) put a directory on the analysis path where the name resolves to the checkout's
``core/``: a symlink, or a copy where symlinks are not allowed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def alias_dir(work: Path) -> Path:
    """Create ``work/import-alias/hermes_tray_core`` → ``core/``; returns the directory to put on the path."""
    base = Path(work).resolve() / "import-alias"
    alias = base / "hermes_tray_core"
    base.mkdir(parents=True, exist_ok=True)
    if alias.is_symlink() or alias.is_file():
        alias.unlink()
    elif alias.is_dir():
        shutil.rmtree(alias)
    try:
        alias.symlink_to(ROOT / "core", target_is_directory=True)
    except OSError:
        shutil.copytree(ROOT / "core", alias, ignore=shutil.ignore_patterns("__pycache__"))
    return base
