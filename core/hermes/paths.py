"""Where Hermes keeps things: the one module that knows Hermes' paths.

Root home = ``$HERMES_HOME``, else ``~/.hermes`` (POSIX) or ``%LOCALAPPDATA%\\hermes`` (Windows); a profile
home is ``<root>/profiles/<name>``, and a ``$HERMES_HOME`` that *is* one has ``<root>`` two levels up (Hermes'
``get_default_hermes_root``). The managed overlay: ``$HERMES_MANAGED_DIR`` (when set: that directory or
nothing), else ``/etc/hermes`` (``hermes_cli/managed_scope.get_managed_dir``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "PROFILE_RE", "DEFAULT_PROFILE", "DEFAULT_MANAGED_DIR",
    "default_root", "root_of", "is_profile_home", "profile_home",
    "marker_file", "config_file", "state_db", "active_sessions_file", "active_profile_file",
    "default_webui_state_dir", "managed_dir", "managed_config_file", "is_hermes_home",
]

PROFILE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DEFAULT_PROFILE = "default"
DEFAULT_MANAGED_DIR = Path("/etc/hermes")


def _user_home(env: Mapping[str, str]) -> str:
    if sys.platform == "win32":
        return env.get("USERPROFILE") or os.path.expanduser("~")
    return env.get("HOME") or os.path.expanduser("~")


def default_root(env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """``(home, origin)``: ``$HERMES_HOME`` (``env``) or the platform default."""
    env = os.environ if env is None else env
    value = env.get("HERMES_HOME")
    if value:
        return Path(os.path.expanduser(value)), "env"
    if sys.platform == "win32":
        base = (env.get("LOCALAPPDATA") or "").strip()
        local = Path(base) if base else Path(_user_home(env)) / "AppData" / "Local"
        return local / "hermes", "default"
    return Path(_user_home(env)) / ".hermes", "default"


def is_profile_home(path: Path) -> bool:
    return path.parent.name == "profiles" and bool(PROFILE_RE.match(path.name))


def root_of(home: Path) -> Path:
    return home.parent.parent if is_profile_home(home) else home


def profile_home(root: Path, name: str) -> Path:
    """``<root>/profiles/<name>``; ``default`` is the root itself."""
    if name == DEFAULT_PROFILE:
        return root
    if not PROFILE_RE.match(name):
        raise ValueError(f"not a Hermes profile name: {name!r}")
    return root / "profiles" / name


def marker_file(home: Path) -> Path:
    return home / "desktop" / "interrupted_turns.json"


def config_file(home: Path) -> Path:
    return home / "config.yaml"


def state_db(home: Path) -> Path:
    return home / "state.db"


def is_hermes_home(home: Path | str) -> bool:
    """Has Hermes (or the tray) ever used ``home``? If not, it is a typo or the wrong folder."""
    home = Path(home)
    return any(os.path.lexists(p) for p in (config_file(home), home / "desktop", state_db(home)))


def active_sessions_file(home: Path) -> Path:
    return home / "runtime" / "active_sessions.json"


def active_profile_file(root: Path) -> Path:
    """The sticky profile ``hermes profile use`` writes (read by a bare ``hermes``)."""
    return root / "active_profile"


def default_webui_state_dir(home: Path) -> Path:
    return home / "webui"


def managed_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The managed-scope directory Hermes honours, or None (a missing override: none, not the default)."""
    env = os.environ if env is None else env
    override = (env.get("HERMES_MANAGED_DIR") or "").strip()
    if override:
        p = Path(override)
        return p if p.is_dir() else None
    return DEFAULT_MANAGED_DIR if DEFAULT_MANAGED_DIR.is_dir() else None


def managed_config_file(env: Mapping[str, str] | None = None) -> Path | None:
    d = managed_dir(env)
    return d / "config.yaml" if d is not None else None
