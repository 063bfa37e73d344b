"""``hermes-tray history [--limit N] [--json]``: the tray's decision journal, newest first.

Turn decisions (notified, approved, skipped, dispatched, completed, …) and configuration changes
(``config-changed``: enable, disable, ``config set`` from the CLI, and the tray's menu and settings
dialog) all come from :mod:`core.stores.decisions`, interleaved in time order. Never contains prompt text.
"""

from __future__ import annotations

import argparse

HELP = "show what the tray (and this command line) decided, newest first"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("history", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="at most N entries (default 50)")
    parser.add_argument("--session", metavar="SESSION", help="only decisions about this session key")
    parser.set_defaults(func=run)


def entries(limit: int, session: str | None = None, homes: list[str] | None = None) -> list[dict]:
    """Turn decisions and configuration changes, newest first (with ``homes``: only theirs)."""
    from hermes_tray_core import decision_history

    return list(decision_history(limit, session_key=session, homes=homes or None))


def run(args: argparse.Namespace) -> int:
    import time

    from hermes_tray.cli.common import EXIT_USAGE, print_json, refuse
    from hermes_tray.format import safe_text

    if args.limit < 1:
        return refuse(args, "--limit must be at least 1", EXIT_USAGE)
    if args.session is not None:  # an unsafe key is a usage error, as for resume and skip
        from hermes_tray_core import InvalidIdError, validate_session_id

        try:
            validate_session_id(args.session, what="--session")
        except InvalidIdError as exc:
            return refuse(args, str(exc), EXIT_USAGE)
    if args.homes:
        from hermes_tray.cli.common import refuse_unusable_homes, selected_homes

        refused = refuse_unusable_homes(args, selected_homes(args))
        if refused is not None:
            return refused
    rows = entries(args.limit, args.session, args.homes)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no decisions recorded about session {args.session}" if args.session else "no decisions recorded yet")
        return 0
    from hermes_tray_core import strict_finite

    skip = {"event", "created_at", "home", "session_key", "turn_id", "via"}
    for ev in rows:
        stamp = min(max(strict_finite(ev.get("created_at")) or 0.0, 0.0), 2**37)  # a time localtime() accepts
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
        if ev.get("event") == "config-changed":
            where = ev.get("home") or "tray settings"
            print(f"{when}  {'config':<11} {ev.get('key')}: {_show(ev.get('old'))} -> {_show(ev.get('new'))}  "
                  f"{where} [{ev.get('by') or '?'}]")
            continue
        what = safe_text(ev.get("session_key") or "?")
        where = ev.get("home") or ""
        extra = " · ".join(f"{k}={_field(k, v)}" for k, v in ev.items() if k not in skip and v is not None)
        via = f" [{ev['via']}]" if ev.get("via") else ""
        print(f"{when}  {ev.get('event', '?'):<11} {what}  {where}{via}" + (f"  {extra}" if extra else ""))
    return 0


def _field(name: str, value: object) -> str:
    """One field as a person reads it: a snooze's ``until`` as a local time."""
    import time

    from hermes_tray_core import strict_finite

    until = strict_finite(value) if name == "until" else None
    if until is not None:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(min(max(until, 0.0), 2**37)))
    return str(value)


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
