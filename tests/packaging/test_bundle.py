"""The real Linux deliverable: PyInstaller bundle → tarball → install.sh into a temporary HOME →
the installed launcher (``--version``, ``doctor``, start at login, the tray inside a virtual
desktop) → uninstall.sh → nothing left but user data. About a minute on 2 cores."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, USER_DATA, clean_env, leftovers, need_module, need_tool, run

from hermes_tray_core import __version__
from tests.desktop.session import Desktop, TrayKind

pytestmark = pytest.mark.slow

MAX_UNPACKED = 150_000_000  # decimal MB, as the issue states the targets
MAX_TARBALL = 60_000_000


def tree_size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not sys.platform.startswith("linux"):
        pytest.skip("the Linux tarball is built on Linux")
    need_module("PyInstaller", "pip install -e '.[build]'")
    base = tmp_path_factory.mktemp("bundle")
    source = ROOT
    if (ROOT / ".git").exists():  # build what is committed, like CI does
        source = base / "clone"
        result = run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(source)])
        assert result.returncode == 0, result.stderr
    dist = base / "dist"
    build = [sys.executable, str(source / "packaging" / "build.py")]
    result = run([*build, "bundle", "--out", str(dist), "--work", str(base / "work")], timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    result = run([*build, "linux-tarball", "--bundle", str(dist / "hermes-tray"), "--out", str(dist)], timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    tarballs = list(dist.glob(f"hermes-tray-{__version__}-linux-*.tar.gz"))
    assert len(tarballs) == 1, list(dist.iterdir())
    unpacked = base / "unpacked"
    unpacked.mkdir()
    with tarfile.open(tarballs[0]) as tar:
        tar.extractall(unpacked, filter="tar")
    (folder,) = unpacked.iterdir()
    return {"bundle": dist / "hermes-tray", "tarball": tarballs[0], "unpacked": folder, "base": base}


def test_sizes_within_targets(artifacts: dict[str, Path]) -> None:
    unpacked = tree_size(artifacts["bundle"])
    packed = artifacts["tarball"].stat().st_size
    print(f"bundle unpacked {unpacked / 1e6:.1f} MB, tarball {packed / 1e6:.1f} MB")
    assert unpacked <= MAX_UNPACKED
    assert packed <= MAX_TARBALL


def test_bundle_is_lean(artifacts: dict[str, Path]) -> None:
    internal = artifacts["bundle"] / "_internal"
    qt = internal / "PySide6" / "Qt"
    assert not (qt / "translations").exists()
    assert not (qt / "qml").exists()
    families = {p.name for p in (qt / "plugins").iterdir()}
    assert families <= {
        "platforms", "platformthemes", "platforminputcontexts", "imageformats", "iconengines", "styles",
        "xcbglintegrations", "wayland-decoration-client", "wayland-graphics-integration-client",
        "wayland-shell-integration",
    }, families
    libs = {p.name for p in internal.rglob("*.so*")}
    for unwanted in ("libQt6Quick", "libQt6Qml", "libQt6Pdf", "libQt6Multimedia", "libgtk-3", "libpango-1.0"):
        assert not any(name.startswith(unwanted) for name in libs), unwanted
    assert not any(internal.rglob("PySide6/QtQuick*"))


def test_resources_load_in_frozen_bundle(artifacts: dict[str, Path], tmp_path: Path) -> None:
    """The frozen app renders its autostart entry from the template inside the bundle."""
    resources = artifacts["bundle"] / "_internal" / "resources"
    template = resources / "desktop" / "hermes-tray-autostart.desktop.in"
    assert template.is_file() and (resources / "desktop" / "hermes-tray.desktop.in").is_file()
    if (ROOT / "resources" / "icons").is_dir():
        assert any((resources / "icons").rglob("*.png"))
    exe = artifacts["bundle"] / "hermes-tray"
    result = run([str(exe), "autostart", "on"], env=clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    written = (tmp_path / ".config" / "autostart" / "hermes-tray.desktop").read_text()
    expected = template.read_text().replace("@EXEC@", str(exe)).replace("@TRYEXEC@", str(exe))
    assert written == expected


def test_the_keeper_travels_as_source_in_the_frozen_bundle(artifacts: dict[str, Path]) -> None:
    """A Hermes the frozen tray starts runs behind the keeper, whose source runs under Hermes' own interpreter."""
    bundled = artifacts["bundle"] / "_internal" / "hermes_tray_core" / "backend" / "keeper.py"
    assert bundled.read_bytes() == (ROOT / "core" / "backend" / "keeper.py").read_bytes()


# Left to the user's system on purpose (packaging/hermes-tray.spec, SYSTEM_LIBS); the tray
# starting from the installed bundle in test_install_run_uninstall is what proves it still works.
SYSTEM_LIBS = ("libstdc++.so", "libgcc_s.so", "libfontconfig.so", "libfreetype.so")
# The Wayland session's own client libraries: the Wayland plugins need them, every Wayland desktop
# has them, PyInstaller only bundles what the build machine has (this X11-only CI machine has not).
WAYLAND_SESSION_LIBS = {"libwayland-cursor.so.0", "libwayland-egl.so.1", "libwayland-client.so.0"}


def test_system_libraries_come_from_the_system(artifacts: dict[str, Path], tmp_path: Path) -> None:
    internal = artifacts["bundle"] / "_internal"
    names = sorted(p.name for p in internal.rglob("*.so*"))
    assert [n for n in names if n.startswith(SYSTEM_LIBS)] == []
    for kept in ("libxcb-cursor.so.0", "libxkbcommon-x11.so.0"):  # bundled: missing on many installs
        assert kept in names, kept
    # Every library the bundle loads resolves: from the bundle or, for those left out, the system.
    ldd = need_tool("ldd", "libc-bin")
    elves = [artifacts["bundle"] / "hermes-tray", *(p for p in internal.rglob("*.so*") if not p.is_symlink())]
    env = clean_env(tmp_path, LD_LIBRARY_PATH=str(internal))
    missing = {}
    for elf in elves:
        out = run([ldd, str(elf)], env=env).stdout
        lost = {line.split()[0] for line in out.splitlines() if "not found" in line} - WAYLAND_SESSION_LIBS
        if lost:
            missing[elf.name] = sorted(lost)
    assert missing == {}


def test_no_dangling_links(artifacts: dict[str, Path]) -> None:
    for tree in (artifacts["bundle"], artifacts["unpacked"]):
        dangling = [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_symlink() and not p.exists()]
        assert dangling == []


def test_licence_and_notices_ship_in_bundle_and_tarball(artifacts: dict[str, Path]) -> None:
    bundle, unpacked = artifacts["bundle"], artifacts["unpacked"]
    licence = (ROOT / "LICENSE").read_text()
    for folder in (bundle, bundle / "_internal", unpacked, unpacked / "hermes-tray"):
        assert (folder / "LICENSE").read_text() == licence, folder
    notices = (bundle / "THIRD-PARTY-NOTICES.txt").read_text()
    for folder in (bundle / "_internal", unpacked, unpacked / "hermes-tray"):
        assert (folder / "THIRD-PARTY-NOTICES.txt").read_text() == notices, folder
    sections = re.findall(r"^={78}\n(.+)$", notices, re.M)
    names = {s.split(" ")[0] for s in sections}
    # What the bundle carries, named by its own metadata: the Python distributions …
    for dist in ("PySide6_Essentials", "shiboken6", "psutil", "websockets", "platformdirs", "pyinstaller"):
        assert dist in names, (dist, sections)
    assert "pytest" not in names and "hypothesis" not in names  # test tools are not bundled
    # … the interpreter, Qt's LGPL terms (source, replaceable libraries, licence texts) …
    assert any(s.startswith("Python 3.") for s in sections)
    qt = notices[notices.index("\nQt and Qt for Python (LGPL-3.0)"):]
    assert "download.qt.io" in qt and "_internal/PySide6/Qt/lib/libQt6*.so.6" in qt
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in qt
    assert any((bundle / "_internal" / "PySide6" / "Qt" / "lib").glob("libQt6Core.so.6"))  # replaceable file
    # … and, built on Debian, the system libraries copied from the build machine (OpenSSL among them),
    # but not those left to the user's system.
    if shutil.which("dpkg-query"):
        assert "libssl3" in names and "libxcb-cursor0" in names, sections
        assert not {"libstdc++6", "libgcc-s1", "libfontconfig1", "libfreetype6"} & names
        assert "Other files copied from the build machine" not in notices, notices[-3000:]


def test_frozen_cli_starts_without_qt(artifacts: dict[str, Path], tmp_path: Path) -> None:
    """The command line answers without loading Qt: the system's dynamic loader lists every library the frozen
    app loads (``LD_DEBUG=files``), and none of Qt's or its bindings' is among them."""
    exe = artifacts["bundle"] / "hermes-tray"
    trace = tmp_path / "loaded"  # the loader writes loaded.<pid>
    result = run([str(exe), "--version"], env={**clean_env(tmp_path), "LD_DEBUG": "files",
                                               "LD_DEBUG_OUTPUT": str(trace)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"hermes-tray {__version__}"
    loaded = {name for log in tmp_path.glob("loaded.*")
              for name in re.findall(r"file=(\S+)", log.read_text(errors="replace"))}
    assert any("libpython3" in name for name in loaded), sorted(loaded)  # the trace sees what the app loads
    qt = sorted(name for name in loaded if re.search(r"libQt6|PySide6|shiboken6", name))
    assert qt == [], qt


def test_install_run_uninstall(artifacts: dict[str, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".hermes").mkdir()  # an empty Hermes home: nothing interrupted
    env = clean_env(home)
    unpacked = artifacts["unpacked"]

    result = run(["sh", str(unpacked / "install.sh")], env=env)
    assert result.returncode == 0, result.stderr
    assert run(["sh", str(unpacked / "install.sh")], env=env).returncode == 0  # idempotent
    exe = home / ".local" / "opt" / "hermes-tray" / "hermes-tray"
    launcher = home / ".local" / "bin" / "hermes-tray"
    desktop = home / ".local" / "share" / "applications" / "hermes-tray.desktop"
    assert os.access(exe, os.X_OK) and launcher.is_symlink() and desktop.is_file()
    if shutil.which("desktop-file-validate"):
        check = run(["desktop-file-validate", str(desktop)])
        assert check.returncode == 0 and not check.stdout.strip(), check.stdout

    # The installed launcher, through the command link.
    result = run([str(launcher), "--version"], env=env)
    assert result.returncode == 0 and result.stdout.strip() == f"hermes-tray {__version__}", result.stderr
    help_text = run([str(launcher), "--help"], env=env).stdout
    if " doctor " in help_text:
        result = run([str(launcher), "doctor"], env=env, timeout=120)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode in (0, 1), result.stdout + result.stderr

    # Start at login from the frozen app: its template comes from the bundle's resources.
    result = run([str(launcher), "autostart", "on", "--json"], env=env)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["enabled"] and status["command"] == [str(exe)]
    autostart = home / ".config" / "autostart" / "hermes-tray.desktop"
    assert f"Exec={exe}" in autostart.read_text()
    if shutil.which("desktop-file-validate"):
        assert run(["desktop-file-validate", str(autostart)]).returncode == 0

    # The tray itself, on a test desktop whose tray host lists its StatusNotifierItem; then Quit from its menu.
    with Desktop(TrayKind.SNI) as desk:
        session_env = {**{k: v for k, v in env.items() if k != "QT_QPA_PLATFORM"}, **desk.env}
        assert run([str(launcher), "--version"], env=session_env).stdout.strip() == f"hermes-tray {__version__}"
        doctor = run([str(launcher), "doctor"], env=session_env, timeout=120)
        assert "Traceback" not in doctor.stdout + doctor.stderr and doctor.returncode in (0, 1), doctor.stdout
        log = tmp_path / "tray.log"
        with open(log, "wb") as out:
            tray = subprocess.Popen([str(launcher), "tray"], env=session_env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            items: list[dict] = []
            while time.monotonic() < deadline and tray.poll() is None:
                items = [i for i in desk.tray_items() if i.get("Id") == "hermes-tray"]
                if items and any(m["label"] == "Quit" for m in items[0]["menu"]):
                    break
                time.sleep(0.2)
            assert items, f"tray icon never appeared\n{log.read_text(errors='replace')[-3000:]}"
            desk.tray_activate("Quit")
            assert tray.wait(timeout=30) == 0
        finally:
            if tray.poll() is None:
                tray.kill()
                tray.wait()
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")

    # Uninstall: only the user's data may remain.
    result = run(["sh", str(exe.parent / "uninstall.sh")], env=env)
    assert result.returncode == 0, result.stderr
    assert leftovers(home, USER_DATA) == []
    assert not (home / ".local" / "opt").exists()


def test_tarball_layout(artifacts: dict[str, Path]) -> None:
    need_tool("tar", "coreutils")
    with tarfile.open(artifacts["tarball"]) as tar:
        members = {m.name: m for m in tar.getmembers()}
    top = artifacts["tarball"].name.removesuffix(".tar.gz")
    for name in ("install.sh", "uninstall.sh", "README.txt", "hermes-tray/hermes-tray",
                 "share/applications/hermes-tray.desktop.in"):
        assert f"{top}/{name}" in members, name
    assert members[f"{top}/install.sh"].mode == 0o755
    assert members[f"{top}/hermes-tray/hermes-tray"].mode == 0o755
    assert members[f"{top}/README.txt"].mode == 0o644
    assert all(m.uid == 0 and m.uname == "" for m in members.values())
