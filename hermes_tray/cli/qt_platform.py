"""Can Qt's platform plugin load here? Asked before Qt is imported, so a desktop that lacks a library Qt needs
(``libxcb-cursor0`` on minimal installs) gets one line naming the package to install and nothing starts, not
Qt's own abort (exit 134) after the demo's backend had started.

The dynamic loader loads the very plugin Qt would (``dlopen`` through ctypes, by Qt's own rules:
``LD_LIBRARY_PATH``, RUNPATH, the loader cache), so its answer is Qt's; only when it fails are the libraries of
Qt's X11 and Wayland plugins tried one by one, to name every missing one. On success the plugin stays loaded for
Qt (``tests/bench/bench_qt_check.py`` measures the cost). Linux and the BSDs only; what it cannot tell never
stops the tray.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: library → the package that provides it on (Debian/Ubuntu, Fedora, Arch): what Qt's X11 (xcb) and Wayland
#: platform plugins and the Qt GUI library under them load from the system (``readelf -d`` of PySide6's)
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client", "wayland"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor", "wayland"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
}
_WAYLAND_ONLY = ("libwayland-client.so.0", "libwayland-cursor.so.0")
#: which of PACKAGES each plugin needs (the rest of the table is the X11 plugin's)
NEEDS: dict[str, tuple[str, ...]] = {
    "xcb": tuple(lib for lib in PACKAGES if lib not in _WAYLAND_ONLY),
    "wayland": (*_WAYLAND_ONLY, "libxkbcommon.so.0", "libGL.so.1", "libEGL.so.1", "libfontconfig.so.1",
                "libfreetype.so.6", "libglib-2.0.so.0", "libgthread-2.0.so.0", "libdbus-1.so.3"),
}
DISTROS = ("Debian, Ubuntu", "Fedora", "Arch")
INSTALL = ("sudo apt install", "sudo dnf install", "sudo pacman -S")


@dataclass(frozen=True)
class PlatformCheck:
    """What the loader said about the platform plugins Qt would try, in Qt's order."""

    platforms: tuple[str, ...]
    ok: bool  # at least one of them loads
    failed: str = ""  # the platform whose failure is reported (the X11 one when Qt would try it)
    missing: tuple[str, ...] = ()  # libraries the loader cannot load (sonames), for the fix
    detail: str = ""  # the loader's own words (log and --json only)
    packages: dict[str, list[str]] = field(default_factory=dict)  # distro → packages that provide `missing`

    def to_json(self) -> dict[str, object]:
        return {"platforms": list(self.platforms), "ok": self.ok, "failed": self.failed or None,
                "missing": list(self.missing), "packages": self.packages, "detail": self.detail or None}


def qt_platforms(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The platform plugins Qt tries, in order: ``QT_QPA_PLATFORM``'s list, else Wayland then X11 in a
    Wayland session, else X11 (what Qt 6 does: ``QT_LOGGING_RULES=qt.qpa.*=true`` shows its list)."""
    env = os.environ if env is None else env
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen.strip():
        return tuple(dict.fromkeys(p.split(":", 1)[0].strip().lower() for p in chosen.split(";") if p.strip()))
    if env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE", "").lower() == "wayland":
        return ("wayland", "xcb")
    return ("xcb",)


def plugin_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where Qt looks for platform plugins: ``QT_QPA_PLATFORM_PLUGIN_PATH`` first, then PySide6's own (found
    without importing it), the frozen bundle's."""
    env = os.environ if env is None else env
    dirs = [Path(p) for p in env.get("QT_QPA_PLATFORM_PLUGIN_PATH", "").split(os.pathsep) if p]
    try:
        import importlib.util

        spec = importlib.util.find_spec("PySide6")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        dirs.append(Path(location) / "Qt" / "plugins" / "platforms")
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        dirs.append(Path(frozen) / "PySide6" / "Qt" / "plugins" / "platforms")
    return dirs


def _load(library: str) -> str | None:
    """None when the loader loads ``library`` (a path or a soname); else its error."""
    import ctypes

    try:
        ctypes.CDLL(library)
    except OSError as exc:
        return str(exc)
    return None


def _named_library(error: str) -> str:
    """The library a loader error names: "libX.so.0: cannot open shared object file…", "/dir/libX.so.0: file
    too short" → "libX.so.0"."""
    return os.path.basename(error.split(":", 1)[0].strip())


def check_platform(env: Mapping[str, str] | None = None) -> PlatformCheck | None:
    """Can a platform plugin Qt would try load here? None when that cannot be told (not Linux/BSD, no plugin
    where PySide6 keeps them): the tray then starts as before."""
    if sys.platform in ("win32", "darwin"):
        return None
    platforms = qt_platforms(env)
    dirs = plugin_dirs(env)
    errors: dict[str, str] = {}
    for name in platforms:
        plugin = next((d / f"libq{name}.so" for d in dirs if (d / f"libq{name}.so").is_file()), None)
        if plugin is None:
            return None  # Qt may still find it elsewhere (QT_PLUGIN_PATH, a distribution's Qt): cannot tell
        error = _load(str(plugin))
        if error is None:
            return PlatformCheck(platforms, ok=True)
        errors[name] = error
    failed = "xcb" if "xcb" in errors else next(iter(errors))
    error = errors[failed]
    named = _named_library(error)
    missing = [lib for lib in NEEDS.get(failed, ()) if _load(lib) is not None]
    if named.startswith("lib") and ".so" in named and not named.startswith("libQt6") and named not in missing \
            and not named.startswith(f"libq{failed}"):
        missing.insert(0, named)
    packages = {distro: list(dict.fromkeys(PACKAGES[lib][i] for lib in missing if lib in PACKAGES))
                for i, distro in enumerate(DISTROS)}
    return PlatformCheck(platforms, ok=False, failed=failed, missing=tuple(missing), detail=error,
                         packages={k: v for k, v in packages.items() if v})


def fix_text(check: PlatformCheck) -> str:
    """What is missing and how to install it, in one line (the tray's refusal and doctor's problem)."""
    where = "Wayland" if check.failed == "wayland" else "X11"
    if not check.missing:
        return (f"Qt cannot load its {where} platform plugin, so the tray cannot start: reinstall hermes-tray "
                "(pip install --force-reinstall PySide6-Essentials); `hermes-tray doctor --json` has the details")
    libs = ", ".join(check.missing)
    need = f"Qt needs {libs}, which {'is' if len(check.missing) == 1 else 'are'} not installed"
    if not check.packages:
        return f"{need}, so the tray cannot start: install the package that provides {'it' if len(check.missing) == 1 else 'them'}"
    fixes = " · ".join(f"{INSTALL[DISTROS.index(distro)]} {' '.join(pkgs)} ({distro})"
                       for distro, pkgs in check.packages.items())
    return f"{need}, so the tray cannot start. Install: {fixes}"


def refuse_without_qt_platform() -> int | None:
    """EXIT_REFUSED after one line naming what to install when no platform plugin Qt would try can load;
    None when one can (or when it cannot be told). The tray and the demo ask it before anything starts."""
    check = check_platform()
    if check is None or check.ok:
        return None
    from hermes_tray.cli.exits import EXIT_REFUSED

    print(f"hermes-tray: {fix_text(check)}. Nothing was started.", file=sys.stderr)
    return EXIT_REFUSED
