"""``hermes-tray history [--limit N] [--json]``: what the tray decided, newest first: turn decisions and
configuration changes from the ledger, interleaved in time order. Never prompt text.
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
    from hermes_tray_core import ledger

    return ledger().history(limit, session_key=session, homes=homes or None)


def run(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import EXIT_USAGE, print_json, refuse
    from hermes_tray.format import safe_text

    if args.limit < 1:
        return refuse(args, "--limit must be at least 1", EXIT_USAGE)
    if args.session is not None:  # an unsafe key is a usage error, as for resume and skip
        from hermes_tray_core import InvalidIdError, validate_session_id

        try:
            validate_session_id(args.session, what="--session")
        except InvalidIdError as exc:
            return refuse(args, exc.user_message, EXIT_USAGE)
    if args.homes:
        from hermes_tray.cli.common import refuse_unusable_homes, selected_homes

        refused = refuse_unusable_homes(args, selected_homes(args))
        if refused is not None:
            return refused
    settle_open_runs(args)
    rows = entries(args.limit, args.session, args.homes)
    if args.json:  # every field as recorded: times as epoch seconds, the run's timings, the channel's name
        print_json(rows)
        return 0
    if not rows:
        print(f"Nothing recorded about session {safe_text(args.session)} yet." if args.session
              else "Nothing recorded yet.")
        return 0
    for ev in rows:
        print(line(ev))
    return 0


def line(ev: dict) -> str:
    """One event as a person reads it: local time, what happened, which turn (session and profile), the details
    in words. Never its epoch times, its timings or the notifier's name: ``--json`` has them."""
    import time

    from hermes_tray import words
    from hermes_tray.format import safe_text
    from hermes_tray.model.history import profile_of
    from hermes_tray_core import strict_finite

    stamp = min(max(strict_finite(ev.get("created_at")) or 0.0, 0.0), 2**37)  # a time localtime() accepts
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "(time unknown)     "
    home = str(ev.get("home") or "")
    if ev.get("event") == "config-changed":
        about = f"{profile_of(home)} profile" if home else "tray settings"
    else:
        profile = profile_of(home)
        about = str(ev.get("session_key") or "?") + ("" if profile == "default" else f" ({profile} profile)")
    detail = words.event_detail(ev)
    return safe_text(f"{when}  {words.event_text(ev):<20} {about}" + (f"  {detail}" if detail else ""))


def settle_open_runs(args: argparse.Namespace) -> None:
    """A run whose process is gone (a killed resume worker, a tray that quit) is settled from Hermes' facts
    first, as every scan does (``core.continuing.orphans``): history never says "running" for a turn Hermes
    finished. Bookkeeping: nothing here stops the command."""
    try:
        from hermes_tray.cli.common import selected_homes
        from hermes_tray_core import ledger, settle_orphaned_runs

        book = ledger()
        for home in selected_homes(args):
            if book.open_runs(home.path):
                settle_orphaned_runs(home.path, book=book)
    except Exception:  # boundary: never a reason not to show the history
        pass
