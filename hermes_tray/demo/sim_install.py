"""A throwaway "Hermes installation" whose gateway is the simulated backend, to exercise the path by which the tray
asks an installation what it can do (``core.continuing.gateway``): a tiny virtualenv (``--without-pip``, ~0.1 s)
with a ``hermes`` launcher and a ``tui_gateway`` shim that starts :mod:`hermes_tray.demo.sim_backend`; the
auto-continue variant also has ``turn_marker`` (re-exporting the engine's API-compatible module). A ``.pth``
makes this project importable inside it.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from hermes_tray.demo import SIMULATED_DISTRIBUTION
from hermes_tray.demo.sim_backend import AUTO, LEGACY

_ENTRY = """\
import sys

from hermes_tray.demo.sim_backend import main

if __name__ == "__main__":
    sys.exit(main(["--capability", {capability!r}]))
"""

_TURN_MARKER = """\
# The simulated backend's marker module: the tray's own store, API-compatible with Hermes'.
from hermes_tray_core.markers.entries import marker_writer_state  # noqa: F401
from hermes_tray_core.markers.turn_marker import clear_turn_marker, read_turn_marker, record_turn_start  # noqa: F401
"""

_LAUNCHER = """\
#!{python}
# Simulated 'hermes' launcher (the tray reads the interpreter from the line above).
import sys

print("this is the hermes-tray simulated backend; the tray runs it as {python} -m tui_gateway.entry")
sys.exit(0)
"""


class SimInstallError(RuntimeError):
    """The simulated installation cannot be built here (e.g. a frozen app has no venv module)."""


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _site_packages(python: Path) -> Path:
    out = subprocess.run(  # noqa: S603 - argv list
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return Path(out.stdout.strip())


def _our_paths() -> list[str]:
    """Where this project and its dependencies import from, for the sim's ``.pth`` file."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    import hermes_tray_core

    project_root = str(Path(hermes_tray_core.__file__).resolve().parent.parent)
    return [d for d in dirs if os.path.isdir(d)] + [project_root]


def _declare_distribution(pkg_root: Path) -> None:
    """Metadata saying which distribution ships this ``tui_gateway``, as a real Hermes' has: the tray's version
    look-up then says "simulated Hermes (demo)" (``hermes_tray.demo.hermes_label``), not "version unknown"."""
    from hermes_tray_core import __version__

    for old in pkg_root.glob("*.dist-info"):
        shutil.rmtree(old, ignore_errors=True)
    info = pkg_root / f"{SIMULATED_DISTRIBUTION.replace('-', '_')}-{__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {SIMULATED_DISTRIBUTION}\nVersion: {__version__}\n"
                                   "Summary: the hermes-tray demo's simulated Hermes\n", encoding="utf-8")
    (info / "top_level.txt").write_text("tui_gateway\n", encoding="utf-8")


def create_sim_install(root: Path | str, capability: str = AUTO) -> Path:
    """Build (or reuse) a simulated Hermes install at ``root``; returns its ``hermes`` launcher path. The
    launcher's shebang names the install's interpreter, so ``find_hermes`` with ``root/bin`` on PATH (or
    ``hermes_command = [<launcher>]``) resolves it as it would a real Hermes."""
    if capability not in (AUTO, LEGACY):
        raise ValueError(f"capability must be {AUTO!r} or {LEGACY!r}")
    if getattr(sys, "frozen", False):
        raise SimInstallError("the simulated backend needs a Python installation (run hermes-tray from source "
                              "or a pip install for the demo)")
    root = Path(root)
    python = _venv_python(root)
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)],  # noqa: S603
                           check=True, capture_output=True, timeout=120)
        purelib = _site_packages(python)
    except subprocess.SubprocessError:  # e.g. a folder whose name is not UTF-8: Python's venv cannot live there
        raise SimInstallError(f"Python could not make the simulated Hermes installation in {root}") from None
    pkg_root = root / "sim-packages"
    pkg = pkg_root / "tui_gateway"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""Simulated tui_gateway (hermes-tray demo)."""\n', encoding="utf-8")
    (pkg / "entry.py").write_text(_ENTRY.format(capability=capability), encoding="utf-8")
    marker = pkg / "turn_marker.py"
    if capability == AUTO:
        marker.write_text(_TURN_MARKER, encoding="utf-8")
    else:
        marker.unlink(missing_ok=True)
    _declare_distribution(pkg_root)
    lines = [f"import site; site.addsitedir({d!r})" for d in _our_paths()]
    (purelib / "hermes_tray_sim.pth").write_text(str(pkg_root) + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    launcher_dir = root / ("Scripts" if os.name == "nt" else "bin")
    launcher = launcher_dir / "hermes"
    launcher.write_text(_LAUNCHER.format(python=python, capability=capability), encoding="utf-8")
    launcher.chmod(0o755)
    return launcher


def sim_command(root: Path | str) -> list[str]:
    """``hermes_command`` for a simulated install: its interpreter (the gateway module is implied)."""
    return [str(_venv_python(Path(root)))]
