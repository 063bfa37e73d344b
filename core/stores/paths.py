"""Where hermes-tray keeps its own files (platformdirs); ``HERMES_TRAY_*_DIR`` overrides each (tests, the
demo)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["APP", "cache_dir", "config_dir", "journal_file", "ledger_db", "log_dir", "runtime_dir", "settings_file",
    "state_dir"]

APP = "hermes-tray"


def _dir(env: str, default: str) -> Path:
    override = os.environ.get(env)
    return Path(override) if override else Path(default)


def config_dir() -> Path:
    return _dir("HERMES_TRAY_CONFIG_DIR", platformdirs.user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    return _dir("HERMES_TRAY_STATE_DIR", platformdirs.user_state_dir(APP, appauthor=False))


def cache_dir() -> Path:
    return _dir("HERMES_TRAY_CACHE_DIR", platformdirs.user_cache_dir(APP, appauthor=False))


def log_dir() -> Path:
    return _dir("HERMES_TRAY_LOG_DIR", platformdirs.user_log_dir(APP, appauthor=False))


def runtime_dir() -> Path:
    """Per-user runtime dir (sockets, instance locks); falls back to the state dir where there is none."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    default = Path(xdg) / APP if xdg and os.path.isdir(xdg) else state_dir() / "run"
    return _dir("HERMES_TRAY_RUNTIME_DIR", str(default))


def settings_file() -> Path:
    return config_dir() / "config.toml"


def ledger_db() -> Path:
    return state_dir() / "ledger.sqlite3"


def journal_file() -> Path:
    return state_dir() / "journal" / "_turn_journal" / "decisions.jsonl"
