"""Wheel and sdist from a clean clone; a pipx install (or a fresh venv) gives a working command
that finds its resources inside the installed wheel."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, clean_env, need_module, run

from hermes_tray_core import __version__

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    need_module("build", "pip install -e '.[build]'")
    base = tmp_path_factory.mktemp("wheel")
    clone = base / "clone"
    result = run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)])
    assert result.returncode == 0, result.stderr
    out = base / "dist"
    result = run([sys.executable, "-m", "build", "--outdir", str(out), str(clone)], timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    wheels = list(out.glob("*.whl"))
    sdists = list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    return {"wheel": wheels[0], "sdist": sdists[0], "base": base}


def test_wheel_carries_resources(dists: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    assert "hermes_tray/_resources/desktop/hermes-tray.desktop.in" in names
    assert "hermes_tray/_resources/desktop/hermes-tray-autostart.desktop.in" in names
    assert "hermes_tray/_resources/desktop/hermes-tray-helper.service.in" in names
    if (ROOT / "resources" / "icons").is_dir():
        assert any(n.startswith("hermes_tray/_resources/icons/") and n.endswith(".png") for n in names)
    assert "hermes_tray/autostart/xdg.py" in names and "hermes_tray_core/__init__.py" in names
    # Every top-level name in the wheel is this distribution's own: no generic "core" to collide with.
    assert {n.split("/")[0] for n in names} == {"hermes_tray", "hermes_tray_core", f"hermes_tray-{__version__}.dist-info"}
    assert not any(n.startswith(("tests/", "packaging/")) for n in names)


def _tree_files(root: Path) -> list[Path]:
    """Every file under ``root`` (through symlinked folders, as the build reads them), no byte-code."""
    out = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [Path(folder, f).relative_to(root) for f in files if not f.endswith((".pyc", ".pyo"))]
    return out


def test_wheel_holds_every_module_and_resource_of_the_tree_and_nothing_else(dists: dict[str, Path]) -> None:
    """What the tree holds is what the wheel holds: every module of hermes_tray/ and core/ (as
    hermes_tray_core), every icon, desktop-entry template and licence text the app loads; no tests."""
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    clone = dists["base"] / "clone"
    want = {f"hermes_tray/{p.as_posix()}" for p in _tree_files(clone / "hermes_tray")}
    want |= {f"hermes_tray_core/{p.as_posix()}" for p in _tree_files(clone / "core")}
    assert any(n.startswith("hermes_tray/app/sni/") for n in want)  # the subpackage a hand-kept list once missed
    missing = sorted(want - names)
    assert missing == [], f"in the tree but not in the wheel: {missing}"
    pkg_files = {n for n in names if not n.startswith(f"hermes_tray-{__version__}.dist-info/")}
    assert sorted(pkg_files - want) == [], "in the wheel but not in the tree"
    # The resources the app loads, by the names it asks for (hermes_tray/resources.py, notices.py).
    for rel in ("desktop/hermes-tray.desktop.in", "desktop/hermes-tray-autostart.desktop.in",
                "desktop/hermes-tray-helper.service.in", "icons/svg/hermes-tray.svg"):
        assert f"hermes_tray/_resources/{rel}" in names, rel
    for size in (16, 22, 24, 32, 48, 64, 128, 256):
        assert any(n.startswith(f"hermes_tray/_resources/icons/png/{size}/") for n in names), size
    assert not any(n.startswith(("tests/", "packaging/", "docs/")) or "/tests/" in n for n in names)


def test_sdist_carries_resources(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as tar:
        names = tar.getnames()
    prefix = f"hermes_tray-{__version__}/"
    assert prefix + "hermes_tray/_resources/desktop/hermes-tray.desktop.in" in names
    assert prefix + "pyproject.toml" in names


def test_wheel_carries_licence_and_spdx_metadata(dists: dict[str, Path]) -> None:
    wheel = zipfile.ZipFile(dists["wheel"])
    info = f"hermes_tray-{__version__}.dist-info"
    assert wheel.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    metadata = wheel.read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    assert "\nLicense: " not in metadata  # the deprecated free-text field is gone
    # The LGPLv3/GPLv3 texts the Qt notice carries (the PySide6 wheels ship none).
    assert {"hermes_tray/_licences/LGPL-3.0.txt", "hermes_tray/_licences/GPL-3.0.txt"} <= set(wheel.namelist())


def test_sdist_ships_licence_and_every_test(dists: dict[str, Path]) -> None:
    """A packager rebuilding from the sdist gets the licence and the whole test suite."""
    with tarfile.open(dists["sdist"]) as tar:
        names = set(tar.getnames())
    prefix = f"hermes_tray-{__version__}/"
    assert prefix + "LICENSE" in names
    tracked = run(["git", "-C", str(ROOT), "ls-files", "tests", "packaging"]).stdout.split()
    assert tracked and [f for f in tracked if prefix + f not in names] == []
    assert not any("__pycache__" in n for n in names)


def install(dists: dict[str, Path]) -> tuple[Path, Path]:
    """pipx install when pipx is there (the documented way), else a fresh venv + pip.

    Returns (the installed ``hermes-tray`` command, that venv's python).
    """
    base = dists["base"]
    if importlib.util.find_spec("pipx") is not None:
        env = dict(os.environ, PIPX_HOME=str(base / "pipx"), PIPX_BIN_DIR=str(base / "pipx-bin"),
                   PIPX_MAN_DIR=str(base / "pipx-man"))
        result = run([sys.executable, "-m", "pipx", "install", "--force", str(dists["wheel"])], env=env, timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return base / "pipx-bin" / "hermes-tray", base / "pipx" / "venvs" / "hermes-tray" / "bin" / "python"
    venv = base / "venv"
    assert run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    result = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(dists["wheel"])], timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return venv / "bin" / "hermes-tray", venv / "bin" / "python"


@pytest.fixture(scope="module")
def installed(dists: dict[str, Path]) -> tuple[Path, Path]:
    return install(dists)


def test_installed_command_runs(installed: tuple[Path, Path], tmp_path: Path) -> None:
    command, _python = installed
    result = run([str(command), "--version"], env=clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"hermes-tray {__version__}"
    assert run([str(command), "--help"], env=clean_env(tmp_path)).returncode == 0


def test_resources_load_from_installed_wheel(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _command, python = installed
    code = (
        "import json; from hermes_tray.resources import resource_root, resource_path;"
        "print(json.dumps([str(resource_root()), resource_path('desktop', 'hermes-tray.desktop.in').read_text()[:15],"
        " len(list(resource_root().rglob('*.png')))]))"
    )
    result = run([str(python), "-c", code], env=clean_env(tmp_path), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    root, head, pngs = json.loads(result.stdout)
    assert "site-packages" in root and root.endswith(os.path.join("hermes_tray", "_resources"))
    assert not root.startswith(str(ROOT))
    assert head == "[Desktop Entry]"
    if (ROOT / "resources" / "icons").is_dir():
        assert pngs > 0


def test_autostart_from_installed_wheel(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """Renders the autostart template shipped in the wheel; the entry runs the venv's command."""
    command, _python = installed
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    result = run([str(command), "autostart", "on", "--json"], env=env)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["enabled"] is True
    assert Path(status["command"][0]).name == "hermes-tray"
    assert Path(status["command"][0]).resolve() == command.resolve()
    assert run([str(command), "autostart", "off"], env=env).returncode == 0
    assert run([str(command), "autostart", "status"], env=env).returncode == 1


def test_installed_wheel_shows_notices_of_its_requirements(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The About box of a pipx install: notices generated from the installed requirements' metadata."""
    _command, python = installed
    code = "from hermes_tray.notices import notices_file; print(notices_file())"
    result = run([str(python), "-c", code], env=clean_env(tmp_path), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.is_relative_to(tmp_path / ".cache") and (path.stat().st_mode & 0o777) == 0o600
    text = path.read_text()
    for name in ("PySide6_Essentials", "shiboken6", "psutil", "desktop-notifier", "websockets", "platformdirs"):
        assert f"\n{name} " in text, name
    assert "Qt and Qt for Python (LGPL-3.0)" in text and "GNU LESSER GENERAL PUBLIC LICENSE" in text
    assert "download.qt.io" in text and "replace them" in text
    assert "pytest" not in text  # a test extra is not a requirement of the app
