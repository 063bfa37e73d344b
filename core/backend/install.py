"""Finding a Hermes installation and the environment its gateway runs with.

Settings' ``hermes_command`` if the user set one, else the ``hermes`` launcher on PATH, whose
shebang names the interpreter (the capability probe and the stdio gateway both need it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_tray_core.backend.rpc import HermesNotFound
from hermes_tray_core.hermes.processes import looks_like_python
from hermes_tray_core.process.child_env import child_environment

GATEWAY_MODULE = "tui_gateway.entry"

# Never handed to Hermes: they would redirect its imports, tee its frames elsewhere or leak our test dirs.
_DROP_ENV = ("PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__",
             "HERMES_TUI_SIDECAR_URL", "QT_QPA_PLATFORM")


@dataclass(frozen=True)
class HermesInstall:
    """How to start the gateway: its argv, and the interpreter it runs (None when not known)."""

    argv: tuple[str, ...]
    python: str | None
    source: str  # "settings" or "PATH", for messages

    def describe(self) -> str:
        return f"{' '.join(self.argv)} (from {self.source})"


def launcher_python(path: str | os.PathLike[str]) -> str | None:
    """The interpreter a ``hermes`` launcher script runs, read from its shebang (None if not a script)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    parts = os.fsdecode(first[2:]).split() if first.startswith(b"#!") else []
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env":  # "#!/usr/bin/env python3" → resolve on PATH
        rest = [p for p in parts[1:] if not p.startswith("-")]
        return shutil.which(rest[0]) if rest else None
    return parts[0]


def install_from_command(command: Sequence[str], *, source: str = "settings") -> HermesInstall:
    """A configured ``hermes_command``: ``[python, "-m", "tui_gateway.entry", …]``, ``[python]`` or
    ``[hermes-launcher]``; anything else runs as given, its interpreter unknown (a continuation is then
    refused)."""
    argv = tuple(str(a) for a in command)
    if not argv or not argv[0]:
        raise HermesNotFound("hermes_command is empty")
    exe = argv[0]
    if "-m" in argv and argv.index("-m") + 1 < len(argv) and argv[argv.index("-m") + 1] == GATEWAY_MODULE:
        return HermesInstall(argv, exe, source)
    if len(argv) == 1 and looks_like_python(exe):
        return HermesInstall((exe, "-m", GATEWAY_MODULE), exe, source)
    if len(argv) == 1:
        resolved = exe if os.sep in exe or (os.altsep and os.altsep in exe) else shutil.which(exe)
        py = launcher_python(resolved) if resolved else None
        if py:
            return HermesInstall((py, "-m", GATEWAY_MODULE), py, source)
    return HermesInstall(argv, None, source)


def find_hermes(hermes_command: Sequence[str] | None = None, *, path: str | None = None) -> HermesInstall:
    """Settings' ``hermes_command`` if given, else the ``hermes`` launcher on PATH and its interpreter."""
    if hermes_command:
        return install_from_command(hermes_command, source="settings")
    launcher = shutil.which("hermes", path=path)
    if not launcher:
        raise HermesNotFound(
            "Hermes is not installed or not on PATH (no 'hermes' command found). Install Hermes Agent, "
            "or set hermes_command in the tray settings to its Python interpreter."
        )
    py = launcher_python(launcher)
    if not py:
        raise HermesNotFound(
            f"cannot tell which Python {launcher} runs (no shebang line). Set hermes_command in the tray "
            "settings to Hermes' Python interpreter."
        )
    return HermesInstall((py, "-m", GATEWAY_MODULE), py, "PATH")


class HermesSettingsError(HermesNotFound):
    """The tray settings cannot be read, so which Hermes to run is not known: nothing is guessed."""


def settings_hermes_command() -> tuple[str, ...] | None:
    """``hermes_command`` from the tray settings; None only when it is not set. Broken settings raise
    :class:`HermesSettingsError`: the ``hermes`` on PATH might be the wrong installation."""
    from hermes_tray_core.stores.settings import SettingsError, load_settings

    try:
        return load_settings().hermes_command
    except (SettingsError, OSError) as exc:
        raise HermesSettingsError(
            f"the tray settings cannot be read, so it is not known which Hermes to run ({exc}). "
            "Fix or remove the settings file (`hermes-tray config`), then try again."
        ) from exc


def gateway_environment(home: Path | str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment Hermes runs with: the user's own, ``HERMES_HOME`` set, our internals removed."""
    env = child_environment(base)
    for name in [k for k in env if k in _DROP_ENV or k.startswith("HERMES_TRAY_")]:
        del env[name]
    return {**env, "HERMES_HOME": str(home), "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}


__all__ = ["GATEWAY_MODULE", "HermesInstall", "HermesSettingsError", "find_hermes", "gateway_environment",
           "install_from_command", "launcher_python", "looks_like_python", "settings_hermes_command"]
