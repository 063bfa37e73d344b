"""Headless helper on Linux: a systemd user unit, enabled as ``systemctl --user enable`` does (the unit file plus
a ``default.target.wants`` symlink), so it works with no running user manager (SSH, a container, tests); one
that is reachable is told to reload. State is read back from those files (present, linked, not masked).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from hermes_tray.autostart import _files
from hermes_tray.autostart.base import HELPER_DESKTOP_ID, AutoStart
from hermes_tray.resources import resource_path
from hermes_tray_core import child_environment

UNIT = f"{HELPER_DESKTOP_ID}.service"
TEMPLATE = "hermes-tray-helper.service.in"
_NEEDS_QUOTES = set(" \t\"'\\;")


def quote_exec_start(argv: list[str]) -> str:
    """``ExecStart=`` value: C-style quoting, ``%`` and ``$`` escaped as systemd specifiers."""
    parts = []
    for arg in argv:
        if any(c in "\n\r" for c in arg):
            raise ValueError(f"an ExecStart argument cannot contain a line break: {arg!r}")
        arg = arg.replace("%", "%%").replace("$", "$$")
        if arg and not any(c in _NEEDS_QUOTES for c in arg):
            parts.append(arg)
        else:
            parts.append('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return " ".join(parts)


def condition_path(path: str) -> str:
    """``ConditionPathExists=`` value: the absolute path, ``%`` escaped (specifiers expand there too). systemd
    ignores a relative path with a warning, so a relative one is made absolute here."""
    if any(c in "\n\r" for c in path):
        raise ValueError(f"a unit setting cannot contain a line break: {path!r}")
    return os.path.abspath(path).replace("%", "%%")


def parse_exec_start(value: str) -> list[str]:
    """Inverse of :func:`quote_exec_start`, whose quoting a POSIX shell reads alike."""
    return [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(value)]


def _user_manager_reachable() -> bool:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    return bool(runtime) and os.path.exists(os.path.join(runtime, "systemd", "private"))


def _systemctl_user(args: list[str]) -> None:
    """Best effort: a missing or unreachable user manager reads the files at its next start."""
    systemctl = shutil.which("systemctl")
    if systemctl is None or not _user_manager_reachable():
        return
    subprocess.run([systemctl, "--user", *args], check=False, capture_output=True, timeout=20,
                   env=child_environment())  # a frozen app's bundled libraries are not systemctl's


class SystemdUserAutoStart(AutoStart):
    backend = "systemd-user"

    def __init__(
        self,
        command: list[str] | None = None,
        *,
        helper: bool = True,
        systemctl: Callable[[list[str]], None] = _systemctl_user,
    ) -> None:
        super().__init__(command, helper=helper)
        self._systemctl = systemctl

    @property
    def unit_dir(self) -> Path:
        return _files.xdg_config_home() / "systemd" / "user"

    @property
    def unit_path(self) -> Path:
        return self.unit_dir / UNIT

    @property
    def wants_link(self) -> Path:
        return self.unit_dir / "default.target.wants" / UNIT

    @property
    def location(self) -> str:
        return str(self.unit_path)

    def is_enabled(self) -> bool:
        unit = self.unit_path
        if unit.is_symlink() and os.path.realpath(unit) == os.devnull:
            return False  # masked
        return unit.is_file() and os.path.lexists(self.wants_link) and self.wants_link.exists()

    def registered_command(self) -> list[str] | None:
        try:
            lines = self.unit_path.read_text(encoding="utf-8").splitlines()
            return next((parse_exec_start(x[10:]) for x in lines if x.startswith("ExecStart=")), None)
        except (OSError, ValueError):  # ValueError: a quote a hand edit left open
            return None

    def render(self) -> str:
        template = resource_path("desktop", TEMPLATE).read_text(encoding="utf-8")
        text = template.replace("@EXEC@", quote_exec_start(self.command))
        return text.replace("@EXEC_PATH@", condition_path(self.command[0]))

    def enable(self) -> None:
        _files.write_entry(self.unit_path, self.render())
        link = self.wants_link
        _files.make_dirs(link.parent)
        if link.is_symlink() and os.readlink(link) != str(self.unit_path):
            _files.remove(link)  # left by an older install elsewhere
        if not os.path.lexists(link):
            os.symlink(self.unit_path, link)
        self._systemctl(["daemon-reload"])

    def disable(self) -> None:
        changed = _files.remove(self.wants_link)
        if self.unit_path.is_file() and not self.unit_path.is_symlink():
            changed = _files.remove(self.unit_path) or changed
        if changed:
            self._systemctl(["daemon-reload"])
