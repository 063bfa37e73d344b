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

    if args.limit < 1:
        return refuse(args, "--limit must be at least 1", EXIT_USAGE)
    settle_open_runs(args)
    rows = entries(args.limit, args.session, args.homes)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no decisions recorded yet")
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
        what = ev.get("session_key") or "?"
        where = ev.get("home") or ""
        extra = " · ".join(f"{k}={v}" for k, v in ev.items() if k not in skip and v is not None)
        via = f" [{ev['via']}]" if ev.get("via") else ""
        print(f"{when}  {ev.get('event', '?'):<11} {what}  {where}{via}" + (f"  {extra}" if extra else ""))
    return 0


def settle_open_runs(args: argparse.Namespace) -> None:
    """A run whose process is gone (a killed resume worker, a tray that quit) is settled from Hermes' facts
    first, as every scan does (``core.continuing.orphans``): history never says "running" for a turn Hermes
    finished. Bookkeeping: nothing here stops the command."""
    try:
        from hermes_tray.cli.common import selected_homes
        from hermes_tray_core import default_journal, settle_orphaned_runs

        journal = default_journal()
        for home in selected_homes(args):
            if journal.open_runs(home.path):
                settle_orphaned_runs(home.path, journal=journal)
    except Exception:  # never a reason not to show the history
        pass


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
