"""Which Hermes homes to watch: the root home and every ``<root>/profiles/<name>/``; a ``$HERMES_HOME`` that
is a profile home (``hermes -p <name>``) also brings in ``<root>`` and its other profiles. The settings may
add homes; ``--home`` replaces discovery. The WebUI's journals are in ``<state>/sessions/_turn_journal``,
``<state>`` being ``$HERMES_WEBUI_STATE_DIR`` for the root home the environment points at (the WebUI serves
that one), else ``<home>/webui``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from hermes_tray_core.hermes import paths as hermes_paths
from hermes_tray_core.hermes import reach
from hermes_tray_core.hermes.paths import DEFAULT_PROFILE, PROFILE_RE, default_root

__all__ = ["Home", "PROFILE_RE", "DEFAULT_PROFILE", "default_root", "profile_of", "discover_homes"]


class Home(NamedTuple):
    """One Hermes home. ``origin``: why it is watched (``env`` / ``default`` / ``root`` (of a profile
    ``$HERMES_HOME``) / ``profile`` / ``settings`` / ``cli``)."""

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
        return (self.webui_state_dir or hermes_paths.default_webui_state_dir(self.path)) / "sessions"

    @property
    def webui_journal_dir(self) -> Path:
        return self.webui_session_dir / "_turn_journal"

    @property
    def label(self) -> str:
        return self.profile if self.origin == "profile" else str(self.path)


def profile_of(path: Path) -> str:
    return path.name if hermes_paths.is_profile_home(path) else DEFAULT_PROFILE


def discover_homes(
    *,
    explicit: Iterable[str | os.PathLike[str]] | None = None,
    extra: Iterable[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
) -> list[Home]:
    """The homes to watch, de-duplicated by real path, root first (even if it does not exist yet), then
    ``extra`` and their profiles; ``explicit`` (``--home``): exactly those. A home that cannot be read or does
    not answer (one bounded :func:`reach.look`) is still returned, for the scan to report."""
    env = os.environ if env is None else env
    root, root_origin = default_root(env)
    webui_env = env.get("HERMES_WEBUI_STATE_DIR")
    homes: list[Home] = []
    seen: set[str] = set()

    def add(path: Path, key: str, origin: str, profile: str | None = None) -> None:
        if key in seen:
            return
        seen.add(key)
        webui = Path(os.path.expanduser(webui_env)) if webui_env and key == root_key else None
        homes.append(Home(path, profile or profile_of(path), origin, webui))

    def add_with_profiles(found: reach.Reach, origin: str, profile: str | None = None) -> None:
        add(found.path, found.canonical, origin, profile)
        for prof in found.profiles:
            add(prof.path, prof.canonical, "profile", prof.path.name)

    if explicit is not None:
        paths = [Path(os.path.expanduser(os.fspath(p))).absolute() for p in explicit]
        looks = reach.look(paths + [root] if webui_env else paths)
        root_key = looks[-1].canonical if webui_env else ""
        for found in looks[:len(paths)]:
            add(found.path, found.canonical, "cli")
        return homes
    extras = [Path(os.path.expanduser(os.fspath(p))).absolute() for p in extra]
    profile_root = hermes_paths.is_profile_home(root)
    roots = [root, hermes_paths.root_of(root)] if profile_root else [root]
    # one bounded look at every root: a drive that hangs delays discovery by reach.TIMEOUT once, never for
    # ever
    looks = reach.look(roots + extras, find_profiles=True)
    root_key = looks[0].canonical
    if profile_root:
        # HERMES_HOME=<root>/profiles/<name>: that profile first, then its root and the root's other profiles.
        add(root, root_key, root_origin, root.name)
        add_with_profiles(looks[1], "root", DEFAULT_PROFILE)
        for prof in looks[0].profiles:
            add(prof.path, prof.canonical, "profile", prof.path.name)
    else:
        add_with_profiles(looks[0], root_origin, DEFAULT_PROFILE)
    for found in looks[len(roots):]:
        add_with_profiles(found, "settings")
    return homes
