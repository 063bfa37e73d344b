#!/usr/bin/env python3
"""Build hermes-tray's artifacts. Every step is a plain argv list; run from anywhere.

    python packaging/build.py wheel            # dist/hermes_tray-<v>-py3-none-any.whl + sdist
    python packaging/build.py bundle           # dist/hermes-tray/ (PyInstaller one-folder; .app on macOS)
    python packaging/build.py linux-tarball    # dist/hermes-tray-<v>-linux-<arch>.tar.gz (builds the bundle if missing)
    python packaging/build.py nsis --bundle DIR  # dist/hermes-tray-<v>-windows-setup.exe (makensis, any OS)
    python packaging/build.py all              # wheel, bundle and, on Linux, the tarball

Needs the ``build`` extra (``pip install -e '.[build]'``: build + pyinstaller); ``nsis`` needs
``makensis`` on PATH (Debian: ``apt-get install nsis``).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = "hermes-tray"
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
# The launcher/menu icon: a dedicated app icon when resources/icons has one, else the same
# glyph the app uses for its windows (hermes_tray.app.icons.app_icon: idle on light).
APP_ICON_CANDIDATES = ("hermes-tray", "hermes-tray-app", "hermes-tray-idle-light")


def version() -> str:
    text = (ROOT / "core" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not match:
        raise SystemExit("build.py: no __version__ in core/__init__.py")
    return match.group(1)


def linux_arch() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def run(argv: list[str], **kwargs: object) -> None:
    print("+ " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kwargs)  # noqa: S603 — argv list, no shell


def build_wheel(out: Path) -> list[Path]:
    """Wheel and sdist via PEP 517 (``python -m build``: the wheel is built from the sdist)."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    return sorted(set(out.iterdir()) - before)


def build_bundle(out: Path, work: Path | None = None) -> Path:
    """PyInstaller one-folder bundle at ``out/hermes-tray`` (and ``out/Hermes Tray.app`` on macOS)."""
    work = work or ROOT / "build" / "pyinstaller"
    run(
        [
            sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
            "--distpath", str(out), "--workpath", str(work), str(ROOT / "packaging" / "hermes-tray.spec"),
        ]
    )
    bundle = out / APP
    exe = bundle / (f"{APP}.exe" if os.name == "nt" else APP)
    if not exe.is_file():
        raise SystemExit(f"build.py: PyInstaller produced no {exe}")
    return bundle


def app_icon_sources() -> dict[str, Path]:
    """``{"48x48": png, …, "scalable": svg}`` for the launcher icon, from resources/icons."""
    icons = ROOT / "resources" / "icons"
    found: dict[str, Path] = {}
    for stem in APP_ICON_CANDIDATES:
        for size in ICON_SIZES:
            for candidate in (icons / "png" / str(size) / f"{stem}.png", icons / f"{size}x{size}" / f"{stem}.png"):
                if candidate.is_file():
                    found.setdefault(f"{size}x{size}", candidate)
        svg = icons / "svg" / f"{stem}.svg"
        if svg.is_file():
            found.setdefault("scalable", svg)
        if found:
            return found
    return found


def stage_linux(bundle: Path, stage: Path) -> None:
    """Lay out the tarball's folder: bundle, install/uninstall scripts, desktop template, icons."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    shutil.copytree(bundle, stage / APP, symlinks=True)
    for script in ("install.sh", "uninstall.sh"):
        shutil.copy2(ROOT / "packaging" / "linux" / script, stage / script)
    shutil.copy2(ROOT / "packaging" / "linux" / "README.txt", stage / "README.txt")
    apps = stage / "share" / "applications"
    apps.mkdir(parents=True)
    shutil.copy2(ROOT / "resources" / "desktop" / f"{APP}.desktop.in", apps / f"{APP}.desktop.in")
    icons = app_icon_sources()
    if not icons:
        print("build.py: warning: no app icon in resources/icons; the menu entry will use a generic icon", file=sys.stderr)
    for size, source in icons.items():
        target = stage / "share" / "icons" / "hicolor" / size / "apps" / f"{APP}{source.suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Owner-neutral, reproducible entries with normal program modes (755 dirs/executables, 644 files)."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or int(time.time())
    if info.isdir():
        info.mode = 0o755
    elif info.isfile():
        info.mode = 0o755 if info.mode & 0o111 else 0o644
    return info


def build_linux_tarball(bundle: Path, out: Path) -> Path:
    name = f"{APP}-{version()}-linux-{linux_arch()}"
    stage = out / "stage" / name
    stage_linux(bundle, stage)
    tarball = out / f"{name}.tar.gz"
    with tarfile.open(tarball, "w:gz", compresslevel=6) as tar:
        tar.add(stage, arcname=name, filter=_normalise)
    shutil.rmtree(out / "stage")
    return tarball


def build_nsis(bundle: Path, out: Path) -> Path:
    """Windows per-user installer around a one-folder bundle (cross-compiles on Linux with makensis)."""
    makensis = shutil.which("makensis")
    if makensis is None:
        raise SystemExit("build.py: makensis not found (Debian: apt-get install nsis)")
    out.mkdir(parents=True, exist_ok=True)
    setup = out / f"{APP}-{version()}-windows-setup.exe"
    argv = [makensis, "-V2", "-WX", "-INPUTCHARSET", "UTF8", f"-DVERSION={version()}", f"-DPAYLOAD={bundle.resolve()}",
            f"-DOUTFILE={setup.resolve()}"]
    ico = ROOT / "resources" / "icons" / f"{APP}.ico"
    if ico.is_file():
        argv.append(f"-DICON={ico}")
    run([*argv, str(ROOT / "packaging" / "windows" / f"{APP}.nsi")])
    return setup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=("wheel", "bundle", "linux-tarball", "nsis", "all"))
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="output folder (default dist/)")
    parser.add_argument("--bundle", type=Path, help="an already-built one-folder bundle to package")
    parser.add_argument("--work", type=Path, help="PyInstaller work folder (default build/pyinstaller)")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    if args.target in ("wheel", "all"):
        for path in build_wheel(out):
            print(path)
    bundle = args.bundle
    if args.target in ("bundle", "all") or (args.target == "linux-tarball" and bundle is None):
        bundle = build_bundle(out, args.work)
        print(bundle)
    if args.target == "linux-tarball" or (args.target == "all" and sys.platform.startswith("linux")):
        print(build_linux_tarball(bundle, out))
    if args.target == "nsis":
        if bundle is None:
            parser.error("nsis needs --bundle (a Windows one-folder build)")
        print(build_nsis(bundle, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
