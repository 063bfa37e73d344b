"""The environment a child process (the Hermes gateway, a browser) should get from a frozen app.

PyInstaller's bootloader points the dynamic loader at the bundle (``LD_LIBRARY_PATH`` on
Linux, ``LIBPATH`` on AIX, ``DYLD_*`` on macOS) and saves the user's value as ``<VAR>_ORIG``;
its Qt runtime hook sets ``QT_PLUGIN_PATH``/``QML2_IMPORT_PATH`` into the bundle and, on
Windows, puts the bundle on ``PATH``. Hermes' own Python must not load our Qt or libssl, so a
child gets the user's values back. Outside a frozen app the environment is returned as is.

On Windows the bootloader also calls ``SetDllDirectoryW(bundle)``, which children inherit;
callers spawning there should reset it with ``ctypes.windll.kernel32.SetDllDirectoryW(None)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

# Variables PyInstaller saves as <NAME>_ORIG before changing them.
RESTORED = ("LD_LIBRARY_PATH", "LIBPATH", "DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH", "DYLD_FALLBACK_LIBRARY_PATH")
# Search-path lists from which entries inside the bundle are dropped.
PATH_LISTS = ("PATH", "QT_PLUGIN_PATH", "QML2_IMPORT_PATH", "QML_IMPORT_PATH", "PYTHONPATH", *RESTORED)
# Bootloader bookkeeping; a frozen child seeing these would think it is our own subprocess.
_INTERNAL_PREFIXES = ("_PYI_", "_MEIPASS")


def bundle_dir() -> str | None:
    """The frozen app's own folder (``sys._MEIPASS``), None when not frozen."""
    base = getattr(sys, "_MEIPASS", None)
    return base if getattr(sys, "frozen", False) and base else None


def _inside(path: str, root: str) -> bool:
    try:
        path_n = os.path.normcase(os.path.realpath(path))
        root_n = os.path.normcase(os.path.realpath(root))
    except (OSError, ValueError):
        return False
    return path_n == root_n or path_n.startswith(root_n.rstrip(os.sep) + os.sep)


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) fit for a child of this process.

    Frozen: each ``<VAR>_ORIG`` is put back as ``<VAR>``; entries inside the bundle are dropped
    from search-path lists (a list left empty is removed: the bootloader sets ``LD_LIBRARY_PATH``
    without an ``_ORIG`` when the user had none); bootloader variables are removed.
    A value the runtime hook overwrote without saving (``QT_PLUGIN_PATH``) cannot be restored:
    it is dropped, which is what the user had unless they set it themselves.
    """
    env = dict(os.environ if base is None else base)
    root = bundle_dir()
    if root is None:
        return env
    for name in RESTORED:
        original = env.pop(f"{name}_ORIG", None)
        if original is not None:
            env[name] = original
    app_home = env.get("_PYI_APPLICATION_HOME_DIR")
    roots = [root] + ([app_home] if app_home and app_home != root else [])
    for name in PATH_LISTS:
        value = env.get(name)
        if not value:
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
