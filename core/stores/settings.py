"""The tray's own settings (``config.toml`` in the user config dir; its keys: docs/cli.md, "config"): what the
*tray* does with what it finds, distinct from Hermes' ``desktop.auto_continue``. An invalid file or value
raises :class:`SettingsError` naming the key and what is allowed; writes are atomic, 0600, under a lock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hermes_tray_core.errors import TrayError
from hermes_tray_core.stores import paths
from hermes_tray_core.vocab import Mode

__all__ = ["DEFAULT_IDLE_TIMEOUT", "KEYS", "MODE_ALIASES", "MODES", "SettingsError", "TraySettings",
    "load_settings", "parse_value", "save_settings", "update_settings", "validate", "with_changes"]

MODES = tuple(m.value for m in Mode)
MODE_ALIASES = {"off": Mode.LIST.value}  # older name of "list", still read (and accepted by `config set`)
KEYS = ("mode", "notify", "show_prompts", "homes", "hermes_command", "continuation_idle_timeout")
DEFAULT_IDLE_TIMEOUT = 600.0  # Hermes' own inactivity limit for a turn
MIN_IDLE_TIMEOUT, MAX_IDLE_TIMEOUT = 1.0, 86_400.0


class SettingsError(TrayError, ValueError):
    """The settings file, or a value for it, is invalid (the message says which key and why)."""


@dataclass(frozen=True)
class TraySettings:
    mode: str = "ask"
    notify: bool = True
    show_prompts: bool = True
    homes: tuple[str, ...] = ()
    hermes_command: tuple[str, ...] | None = None
    continuation_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    path: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The keys as the file holds them (lists, no unset ``hermes_command``)."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self) if f.compare)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values if v is not None}

    def home_paths(self) -> list[Path]:
        return [Path(os.path.expanduser(h)) for h in self.homes]


def _str_list(key: str, value: Any, *, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SettingsError(f"{key}: must be a list of non-empty strings ({what}), not {value!r}")
    return tuple(value)


def validate(data: Mapping[str, Any], *, path: Path | None = None) -> TraySettings:
    if not isinstance(data, Mapping):
        raise SettingsError("settings must be a table of keys")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise SettingsError(f"{unknown[0]}: unknown setting (allowed: {', '.join(KEYS)})")
    kw: dict[str, Any] = {}
    if "mode" in data:
        mode = data["mode"]
        mode = MODE_ALIASES.get(mode, mode) if isinstance(mode, str) else mode
        if mode not in MODES:
            raise SettingsError(f"mode: must be one of {', '.join(MODES)}, not {mode!r}")
        kw["mode"] = mode
    for key in ("notify", "show_prompts"):
        if key in data:
            if not isinstance(data[key], bool):
                raise SettingsError(f"{key}: must be true or false, not {data[key]!r}")
            kw[key] = data[key]
    if "homes" in data:
        kw["homes"] = _str_list("homes", data["homes"], what="paths of Hermes homes")
    if data.get("hermes_command") is not None:
        cmd = _str_list("hermes_command", data["hermes_command"], what="an argv list such as [\"hermes\"]")
        if not cmd:
            raise SettingsError("hermes_command: must not be empty (remove the key to use the default)")
        kw["hermes_command"] = cmd
    if "continuation_idle_timeout" in data:
        kw["continuation_idle_timeout"] = _idle_timeout(data["continuation_idle_timeout"])
    return TraySettings(**kw, path=path)


def _idle_timeout(value: Any, given: object = None) -> float:
    """Seconds in [MIN_IDLE_TIMEOUT, MAX_IDLE_TIMEOUT] (no bool, string or NaN; ``given``: as typed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            MIN_IDLE_TIMEOUT <= float(value) <= MAX_IDLE_TIMEOUT):
        raise SettingsError(f"continuation_idle_timeout: must be a number of seconds from {MIN_IDLE_TIMEOUT:g} to "
                            f"{MAX_IDLE_TIMEOUT:g}, not {value if given is None else given!r}")
    return float(value)


def _loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli is a dependency there only, so a newer dev venv may lack its stub
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    data: dict[str, Any] = tomllib.loads(text)
    return data


def load_settings(path: Path | None = None) -> TraySettings:
    """Settings from ``path`` (default: the user config file); a missing file means defaults."""
    path = Path(path) if path is not None else paths.settings_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return TraySettings(path=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from exc
    try:
        data = _loads(text)
    except (ValueError, RecursionError) as exc:  # not TOML; nested past Python's recursion limit
        raise SettingsError(f"{path} is not valid TOML: {exc}") from exc
    try:
        return validate(data, path=path)
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from exc


def save_settings(settings: TraySettings, path: Path | None = None) -> Path:
    """Write ``settings`` atomically (0600, parent dir 0700). Returns the path written."""
    import tomli_w

    from hermes_tray_core.stores.fsutil import atomic_write_bytes, ensure_private_dir, sweep_stale_temps

    path = Path(path) if path is not None else (settings.path or paths.settings_file())
    validate(settings.to_dict())
    ensure_private_dir(path.parent)
    atomic_write_bytes(path, tomli_w.dumps(settings.to_dict()).encode("utf-8"))
    sweep_stale_temps(path)  # temp files of writers killed mid-write (tests/fault: 199 after 500 kills)
    return path


def parse_value(key: str, text: str) -> Any:
    """A command-line string for ``key`` as the typed value (``true``/``false`` for booleans)."""
    if key not in KEYS:
        raise SettingsError(f"{key}: unknown setting (allowed: {', '.join(KEYS)})")
    if key in ("notify", "show_prompts"):
        low = text.strip().lower()
        if low in ("true", "yes", "on", "1"):
            return True
        if low in ("false", "no", "off", "0"):
            return False
        raise SettingsError(f"{key}: must be true or false, not {text!r}")
    if key == "hermes_command":
        import shlex

        try:
            argv = shlex.split(text)
        except ValueError:  # shlex's "No closing quotation"
            raise SettingsError(f"{key}: a quote is not closed in {text!r}") from None
        if not argv:
            raise SettingsError(f"{key}: give the command that starts Hermes, or go back to finding it by itself "
                                "with: hermes-tray config unset hermes_command")
        return argv
    if key == "homes":
        return [p for p in text.split(os.pathsep) if p]
    if key == "continuation_idle_timeout":
        try:
            seconds = float(text)
        except ValueError:
            seconds = float("nan")
        return _idle_timeout(seconds, text)
    return text.strip()


def update_settings(changes: Mapping[str, Any], path: Path | None = None) -> TraySettings:
    """Read-modify-write under a lock: apply ``changes`` (typed; None unsets a key), validate, save."""
    from hermes_tray_core.stores.fsutil import ensure_private_dir, locked

    path = Path(path) if path is not None else paths.settings_file()
    ensure_private_dir(path.parent)
    with locked(path.with_name(f".{path.name}.lock")):
        # Merge into the raw file, not the validated settings: a bad value is fixed by setting it.
        try:
            raw = _loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raw = {}
        except (OSError, ValueError, RecursionError) as exc:  # unreadable, not UTF-8, not TOML, nested too deep
            raise SettingsError(f"{path} is not valid TOML ({exc}); fix or remove it") from exc
        merged = {k: v for k, v in {**raw, **changes}.items() if v is not None}
        try:
            new = validate(merged, path=path)
        except SettingsError as exc:
            raise SettingsError(f"{path}: {exc}") from exc
        save_settings(new, path)
    return new


def with_changes(settings: TraySettings, **changes: Any) -> TraySettings:
    """A validated copy of ``settings`` with ``changes`` applied (no I/O)."""
    new = replace(settings, **changes)
    validate(new.to_dict())
    return new
