"""Helpers the command-line commands share: which homes, how to print, how to journal.

Import-light on purpose (``status`` must start fast): ``core`` modules are imported inside the
functions that need them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from hermes_tray.cli.main import EXIT_REFUSED, EXIT_USAGE


def warn(message: str) -> None:
    print(f"hermes-tray: {message}", file=sys.stderr)


def error_words(exc: BaseException) -> str:
    """An error as a person reads it (``words.error_text``); ``--json`` and the log keep ``str(exc)``."""
    from hermes_tray.words import error_text

    return error_text(exc)


def print_json(obj: Any) -> None:
    """Indented for a terminal; compact (the fast C encoder) when piped to a program."""
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n")


def refuse(args: argparse.Namespace, message: str, code: int = EXIT_REFUSED, **extra: Any) -> int:
    """Report a refusal (or usage error) on stderr — or as ``{"ok": false, "error"}`` with --json."""
    if getattr(args, "json", False):
        print_json({"ok": False, "error": message, **extra})
    else:
        warn(message)
    return code


def load_tray_settings(*, quiet: bool = False):
    """Tray settings, or defaults plus a warning when the file is invalid (never fatal for reads)."""
    from hermes_tray_core import SettingsError, TraySettings, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        if not quiet:
            warn(f"ignoring tray settings: {exc}")
        return TraySettings()


def selected_homes(args: argparse.Namespace, *, settings=None):
    """``--home`` homes when given, else discovery (root, profiles, settings ``homes``)."""
    from hermes_tray_core import discover_homes

    if args.homes:
        return discover_homes(explicit=args.homes)
    if settings is None:
        from hermes_tray_core import settings_file

        if not settings_file().exists():  # the common case: no need to load the settings module
            return discover_homes()
        settings = load_tray_settings()
    return discover_homes(extra=settings.homes)


def homes_to_change(args: argparse.Namespace, *, all_flag: bool) -> tuple[list, str | None]:
    """Homes a write applies to: ``--home`` ones, every existing home with ``--all``, or the only
    existing home. Returns ``(homes, problem)``; a problem is a usage error to report."""
    homes = selected_homes(args)
    if args.homes:
        return homes, None
    existing = [h for h in homes if h.path.is_dir()]
    if all_flag:
        return existing, None if existing else "no Hermes home found (use --home PATH)"
    if len(existing) == 1:
        return existing, None
    if not existing:
        return [], "no Hermes home found (use --home PATH)"
    names = ", ".join(str(h.path) for h in existing)
    return [], f"several Hermes homes ({names}): say --all or pick one with --home PATH"


def journal(event: str, *, home: Any, session_key: str, **fields: Any) -> str | None:
    """Record a CLI decision about a turn (``skipped``, ``refused``…) in the tray's decision journal
    (never prompt text). Returns None on success, else a warning to show: a journal failure never
    undoes the decision."""
    try:
        from hermes_tray_core import record_decision

        record_decision(event, home=home, session_key=session_key, **{"via": "cli", **fields})
        return None
    except Exception as exc:  # the journal is bookkeeping: report, never undo the decision
        return f"could not record '{event}' in the decision journal ({exc})"


def journal_config(*, home: Any, key: str, old: Any, new: Any) -> str | None:
    """Record a configuration change made from the CLI (``home`` None: the tray's own settings) as a
    ``config-changed`` event in the decision journal. None on success, else a warning to show."""
    try:
        from hermes_tray_core import record_config_change

        record_config_change(home=home, key=key, old=old, new=new, by="cli")
        return None
    except Exception as exc:
        return f"could not record the change of {key} in the decision journal ({exc})"


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain left-aligned text table."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers).rstrip()]
    lines += [fmt.format(*row).rstrip() for row in rows]
    return "\n".join(lines)


__all__ = ["EXIT_REFUSED", "EXIT_USAGE", "error_words", "homes_to_change", "journal", "journal_config",
           "load_tray_settings", "print_json", "refuse", "selected_homes", "table", "warn"]
