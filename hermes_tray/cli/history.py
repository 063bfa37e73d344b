"""``hermes-tray history [--limit N] [--json]``: the tray's decision journal, newest first.

Turn decisions (notified, approved, skipped, dispatched, completed, …) come from
:mod:`core.decisions`; configuration changes made from the CLI (enable, disable, config set)
from ``settings.jsonl`` beside it. Never contains prompt text.
"""

from __future__ import annotations

import argparse

HELP = "show what the tray (and this command line) decided, newest first"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("history", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="at most N entries (default 50)")
    parser.add_argument("--session", metavar="SESSION", help="only decisions about this session key")
    parser.set_defaults(func=run)


def entries(limit: int, session: str | None = None) -> list[dict]:
    """Turn decisions and configuration changes merged, newest first."""
    from core import decisions, journal, paths
    from hermes_tray.cli.common import CONFIG_JOURNAL_ID

    out = list(decisions.history(limit, session_key=session))
    if session is None:
        try:
            doc = journal.read_turn_journal(CONFIG_JOURNAL_ID, session_dir=paths.decision_journal_dir())
            for ev in doc["events"]:
                out.append({k: v for k, v in ev.items() if k not in ("version", "session_id", "turn_id")})
        except (OSError, ValueError):
            pass
    out.sort(key=lambda e: float(e.get("created_at") or 0), reverse=True)
    return out[:limit]


def run(args: argparse.Namespace) -> int:
    import time

    from hermes_tray.cli.common import EXIT_USAGE, print_json, refuse

    if args.limit < 1:
        return refuse(args, "--limit must be at least 1", EXIT_USAGE)
    rows = entries(args.limit, args.session)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no decisions recorded yet")
        return 0
    skip = {"event", "created_at", "home", "session_key", "turn_id", "via"}
    for ev in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ev.get("created_at") or 0)))
        what = ev.get("session_key") or "config"
        where = ev.get("home") or ""
        extra = ", ".join(f"{k}={v}" for k, v in ev.items() if k not in skip and v is not None)
        via = f" [{ev['via']}]" if ev.get("via") else ""
        print(f"{when}  {ev.get('event', '?'):<11} {what}  {where}{via}" + (f"  ({extra})" if extra else ""))
    return 0
