"""The environment a child process (the Hermes gateway, our own worker, ``systemctl``) should get from a
frozen app.

PyInstaller's bootloader and runtime hooks point the loader, Qt, Tcl and SSL at the bundle; Hermes' own Python
must not load our Qt or libssl, so a child gets the user's values back (outside a frozen app the environment
is returned as is). On Windows, spawn Hermes inside :func:`dll_directory_reset`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping

__all__ = ["PATH_LISTS", "RESTORED", "bundle_dir", "child_environment", "dll_directory_reset", "is_frozen"]

# Variables PyInstaller (bootloader or runtime hook) may have saved as <NAME>_ORIG before changing them.
RESTORED = ("LD_LIBRARY_PATH", "LIBPATH", "DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH", "DYLD_FALLBACK_LIBRARY_PATH",
            "TCL_LIBRARY", "TK_LIBRARY", "SSL_CERT_FILE", "SSL_CERT_DIR", "QT_PLUGIN_PATH", "QML2_IMPORT_PATH")
# Paths and search-path lists from which entries inside the bundle are dropped.
PATH_LISTS = ("PATH", "QML_IMPORT_PATH", "PYTHONPATH", *RESTORED)
# Bootloader bookkeeping; a frozen child seeing these would think it is our own subprocess.
_INTERNAL_PREFIXES = ("_PYI_", "_MEIPASS")


logger = logging.getLogger(__name__)


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def bundle_dir() -> str | None:
    """The frozen app's own folder (``sys._MEIPASS``), None when not frozen."""
    base = getattr(sys, "_MEIPASS", None)
    return base if is_frozen() and base else None


def _inside(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it, as written or with links resolved (a macOS app links
    ``Contents/Frameworks/<pkg>`` to ``Contents/Resources/<pkg>``)."""
    try:
        pairs = ((os.path.abspath(path), os.path.abspath(root)), (os.path.realpath(path), os.path.realpath(root)))
    except (OSError, ValueError):
        return False
    for p, r in pairs:
        p, r = os.path.normcase(p), os.path.normcase(r)
        if p == r or p.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) fit for a child: each ``<VAR>_ORIG`` put back, entries
    inside the bundle dropped (a list left empty is removed), bootloader variables removed. A value a hook
    overwrote without saving cannot be restored: it is dropped."""
    env = dict(os.environ if base is None else base)
    if not is_frozen():
        return env
    for name in RESTORED:
        original = env.pop(f"{name}_ORIG", None)
        if original is not None:
            env[name] = original
    roots = [r for r in (bundle_dir(), env.get("_PYI_APPLICATION_HOME_DIR")) if r]
    for name in PATH_LISTS:
        value = env.get(name)
        if not value or not roots:
            continue
        kept = [p for p in value.split(os.pathsep) if p and not any(_inside(p, r) for r in roots)]
        if kept:
            env[name] = os.pathsep.join(kept)
        else:
            del env[name]
    for key in list(env):
        if key.startswith(_INTERNAL_PREFIXES):
            del env[key]
    return env


def _set_dll_directory(path: str | None) -> None:
    try:
        import ctypes

        if not ctypes.windll.kernel32.SetDllDirectoryW(path):  # type: ignore[attr-defined]
            logger.debug("SetDllDirectoryW(%r) failed", path)
    except Exception:  # boundary: never let this stop a spawn
        logger.debug("SetDllDirectoryW(%r) unavailable", path, exc_info=True)


@contextlib.contextmanager
def dll_directory_reset() -> Iterator[None]:
    """Windows + frozen: the bootloader's ``SetDllDirectoryW(bundle)`` (inherited: Hermes would load our DLLs)
    reset for the block, restored after. Elsewhere a no-op."""
    bundle = bundle_dir()
    if sys.platform != "win32" or bundle is None:
        yield
        return
    _set_dll_directory(None)
    try:
        yield
    finally:
        _set_dll_directory(bundle)
