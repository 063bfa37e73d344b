"""Helpers the command-line commands share: which homes, how to print, how to record a decision.

Import-light on purpose (``status`` must start fast): ``core`` modules are imported inside the
functions that need them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from hermes_tray.cli.exits import EXIT_REFUSED, EXIT_USAGE


def warn(message: str) -> None:
    print(f"hermes-tray: {message}", file=sys.stderr)


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
            warn(f"ignoring tray settings: {exc.user_message}")
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


def refuse_unusable_homes(args: argparse.Namespace, homes: Sequence[Any]) -> int | None:
    """Check the ``--home`` paths before a command reads them; None when it may go on. A path that does not
    exist is a typo, never a home Hermes has not used yet; ``--home ~`` (for ``~/.hermes``) is no Hermes home. One
    that cannot be read is refused only when none can: the command reads the others and reports it as a problem."""
    if not args.homes:
        return None
    from hermes_tray_core import HomeAccess, is_hermes_home, look_at_homes

    unreadable = []
    for seen in look_at_homes([h.path for h in homes]):
        if seen.access in (HomeAccess.MISSING, HomeAccess.NOT_DIR):
            return refuse(args, seen.problem)
        if seen.ok and not is_hermes_home(seen.path):
            return refuse(args, f"{seen.path} is not a Hermes home (no config.yaml, no desktop/, no state.db): "
                          "check the path")
        if not seen.ok:
            unreadable.append(seen.problem)
    if unreadable and len(unreadable) == len(homes):
        return refuse(args, "; ".join(unreadable))
    return None


def one_turn(args: argparse.Namespace, now: float | None = None) -> Any:
    """The interrupted turn of ``args.session`` in the selected homes (skip, snooze), or the exit code of the
    refusal: a bad session id, an unusable ``--home``, no such turn, or one in several homes."""
    from hermes_tray_core import InvalidIdError, Scanner, validate_session_id

    try:
        key = validate_session_id(args.session, what="SESSION")
    except InvalidIdError as exc:
        return refuse(args, exc.user_message, EXIT_USAGE)
    homes = selected_homes(args)
    refused = refuse_unusable_homes(args, homes)
    if refused is not None:
        return refused
    result = Scanner(homes, read_progress=False).scan(now)  # neither shows how far a turn got
    found = [t for t in result.turns if t.source == "desktop" and t.session_key == key]
    if not found:
        unreadable = [str(h.path) for h in result.homes if h.markers in ("corrupt", "unreadable")]
        extra = f" (could not read the markers of {', '.join(unreadable)})" if unreadable else ""
        return refuse(args, f"no interrupted turn {key} in {', '.join(str(h.path) for h in homes)}{extra}")
    if len(found) > 1:
        where = ", ".join(str(t.home) for t in found)
        return refuse(args, f"{key} is interrupted in several homes ({where}); pick one with --home", EXIT_USAGE)
    return found[0]


def homes_to_change(args: argparse.Namespace, *, all_flag: bool, create: bool = False) -> tuple[list, str | None, int]:
    """Homes a write applies to: ``--home`` ones, every existing home with ``--all``, or the only existing
    home, as ``(homes, problem, exit code)``: with a problem nothing may be written. ``create`` (``--create``):
    a ``--home`` that is not a Hermes home yet, or does not exist, is made one."""
    from hermes_tray_core import HomeAccess, is_hermes_home, look_at_homes

    homes = selected_homes(args)
    looks = look_at_homes([h.path for h in homes])
    if args.homes:
        for home, seen in zip(homes, looks, strict=True):
            if seen.access is HomeAccess.MISSING and create:
                continue
            if not seen.ok:
                hint = " (pass --create to make it a Hermes home)" if seen.access is HomeAccess.MISSING else ""
                return [], seen.problem + hint, EXIT_REFUSED
            if not create and not is_hermes_home(home.path):
                return [], (f"{home.path} is not a Hermes home (no config.yaml, no desktop/, no state.db): "
                            "check the path, or pass --create to make it one"), EXIT_REFUSED
        return homes, None, 0
    existing = [h for h, seen in zip(homes, looks, strict=True) if seen.ok]
    if not existing:
        return [], "no Hermes home found (use --home PATH)", EXIT_REFUSED
    if all_flag or len(existing) == 1:
        return existing, None, 0
    names = ", ".join(str(h.path) for h in existing)
    return [], f"several Hermes homes ({names}): say --all or pick one with --home PATH", EXIT_USAGE


def journal(event: str, turn: Any, **fields: Any) -> str | None:
    """Record a CLI decision about ``turn`` (a ``TurnId``: ``refused``…) in the tray's ledger (never prompt text).
    Returns None on success, else a warning to show: a ledger failure never undoes the decision."""
    try:
        from hermes_tray_core import ledger

        ledger().record(event, turn, **{"via": "cli", **fields})
        return None
    except Exception as exc:  # boundary: the ledger is bookkeeping: report, never undo the decision
        return f"could not record '{event}' in the tray's ledger ({exc})"


def journal_config(*, home: Any, key: str, old: Any, new: Any) -> str | None:
    """Record a configuration change made from the CLI (``home`` None: the tray's own settings) as a
    ``config-changed`` decision in the ledger. None on success, else a warning to show."""
    try:
        from hermes_tray_core import ledger

        ledger().record_config_change(home=home, key=key, old=old, new=new, by="cli")
        return None
    except Exception as exc:  # boundary: bookkeeping: reported, never undoes the change
        return f"could not record the change of {key} in the tray's ledger ({exc})"


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


__all__ = ["EXIT_REFUSED", "EXIT_USAGE", "homes_to_change", "journal", "journal_config",
           "load_tray_settings", "one_turn", "print_json", "refuse", "refuse_unusable_homes", "selected_homes", "table", "warn"]
