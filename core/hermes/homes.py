"""Which Hermes homes to watch.

The root home is ``$HERMES_HOME``, else ``~/.hermes`` (POSIX) or ``%LOCALAPPDATA%\\hermes``
(Windows). Every ``<root>/profiles/<name>/`` (name ``^[a-z0-9][a-z0-9_-]{0,63}$``) is a home of
its own. A ``$HERMES_HOME`` that is itself a profile home (``<root>/profiles/<name>``, as
``hermes -p <name>`` sets it) also brings in ``<root>`` and its other profiles: they belong to the
same user's Hermes (origin ``root`` for that root). Hermes' paths come from
:mod:`hermes_tray_core.hermes.paths`. The tray settings may add extra homes; ``--home`` on the command line replaces
discovery altogether. Each home's WebUI turn journals live in
``<state>/sessions/_turn_journal`` where ``<state>`` is ``$HERMES_WEBUI_STATE_DIR`` for the root
home the environment points at (the WebUI serves that home) and ``<home>/webui`` otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from hermes_tray_core.hermes import paths as hermes_paths
from hermes_tray_core.hermes.paths import DEFAULT_PROFILE, PROFILE_RE, canonical, default_root

__all__ = ["Home", "PROFILE_RE", "DEFAULT_PROFILE", "default_root", "profile_of", "list_profiles", "discover_homes"]


class Home(NamedTuple):
    """One Hermes home (an immutable record; see :mod:`core.deciding.policy` on why NamedTuple).

    ``profile``: the profile name, or ``"default"`` for a root home. ``origin``: why it is watched
    (``env`` / ``default`` / ``root`` (the root of a profile ``$HERMES_HOME``) / ``profile`` / ``settings``
    / ``cli``).
    """

    path: Path
    profile: str = DEFAULT_PROFILE
    origin: str = "default"
    webui_state_dir: Path | None = None

    @property
    def marker_file(self) -> Path:
        return hermes_paths.marker_file(self.path)

    @property
    def config_file(self) -> Path:
        return hermes_paths.config_file(self.path)

    @property
    def state_db(self) -> Path:
        return hermes_paths.state_db(self.path)

    @property
    def webui_session_dir(self) -> Path:
        """The WebUI ``session_dir`` (what ``core.stores.turn_journal`` calls it)."""
        return (self.webui_state_dir or hermes_paths.default_webui_state_dir(self.path)) / "sessions"

    @property
    def webui_journal_dir(self) -> Path:
        return self.webui_session_dir / "_turn_journal"

    @property
    def label(self) -> str:
        return self.profile if self.origin == "profile" else str(self.path)


def profile_of(path: Path) -> str:
    """``profiles/<name>`` → name; anything else is a root home (``"default"``)."""
    return path.name if hermes_paths.is_profile_home(path) else DEFAULT_PROFILE


def list_profiles(root: Path) -> list[Path]:
    """Profile homes under ``root`` (sorted by name); nothing on any error."""
    try:
        entries = sorted(os.scandir(root / "profiles"), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        try:
            if PROFILE_RE.match(entry.name) and entry.is_dir():
                out.append(Path(entry.path))
        except OSError:
            continue
    return out


def discover_homes(
    *,
    explicit: Iterable[str | os.PathLike[str]] | None = None,
    extra: Iterable[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
) -> list[Home]:
    """The homes to watch, de-duplicated (by real path), root first.

    ``explicit`` (``--home``) replaces discovery: exactly those homes, no profiles added.
    Otherwise: the root home (even if it does not exist yet), its profiles, then ``extra``
    (tray settings ``homes``) and their profiles.
    """
    env = os.environ if env is None else env
    root, root_origin = default_root(env)
    webui_env = env.get("HERMES_WEBUI_STATE_DIR")
    root_key = canonical(root)
    homes: list[Home] = []
    seen: set[str] = set()

    def add(path: Path, origin: str, profile: str | None = None) -> None:
        key = canonical(path)
        if key in seen:
            return
        seen.add(key)
        webui = Path(os.path.expanduser(webui_env)) if webui_env and key == root_key else None
        homes.append(Home(path, profile or profile_of(path), origin, webui))

    if explicit is not None:
        for p in explicit:
            add(Path(os.path.expanduser(os.fspath(p))).absolute(), "cli")
        return homes
    if hermes_paths.is_profile_home(root):
        # HERMES_HOME=<root>/profiles/<name>: that profile first, then its root and the root's other profiles.
        add(root, root_origin, root.name)
        real_root = hermes_paths.root_of(root)
        add(real_root, "root", DEFAULT_PROFILE)
        for prof in list_profiles(real_root):
            add(prof, "profile", prof.name)
    else:
        add(root, root_origin, DEFAULT_PROFILE)
    for prof in list_profiles(root):
        add(prof, "profile", prof.name)
    for p in extra:
        path = Path(os.path.expanduser(os.fspath(p))).absolute()
        add(path, "settings")
        for prof in list_profiles(path):
            add(prof, "profile", prof.name)
    return homes
