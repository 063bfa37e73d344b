"""``hermes-tray snooze SESSION [--for DURATION | --until WHEN]``: remind me of this turn later. It is announced
once then, unless no longer waiting; nothing is continued or skipped; the snooze is recorded and outlives a
restart (``core.deciding.snooze``).
"""

from __future__ import annotations

import argparse

HELP = "do not announce an interrupted turn before a later time (it is not continued or skipped)"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("snooze", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("session", metavar="SESSION", help="the session key, as `status` shows it")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--for", dest="for_", metavar="DURATION", help="for how long: 30m, 1h (default), 2h30m, 1d")
    when.add_argument("--until", metavar="WHEN", help="until when: tomorrow (9:00), 14:30, 2026-12-05 09:00")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from hermes_tray.cli.common import EXIT_USAGE, one_turn, print_json, refuse
    from hermes_tray_core import remind_at, snooze_turn

    now = time.time()
    try:
        until = remind_at(args.until or args.for_ or "1h", now)
    except ValueError as exc:
        return refuse(args, str(exc), EXIT_USAGE)
    turn = one_turn(args, now)
    if isinstance(turn, int):
        return turn
    key = turn.session_key
    if not turn.actionable:
        return refuse(args, f"{key} is not waiting for you ({turn.verdict}: {turn.reason}): nothing to remind you of")
    try:
        snooze_turn(turn, until, via="cli")
    except Exception as exc:  # boundary: the journal could not be written: the snooze did not take
        why = getattr(exc, "strerror", None) or "the decision journal cannot be written"
        return refuse(args, f"could not record the snooze ({why}); nothing changed")
    if args.json:
        print_json({"ok": True, "snoozed": key, "home": str(turn.home), "until": until})
    else:
        when = time.strftime("%a %H:%M", time.localtime(until))
        print(f"{key}: not announced before {when}, then once; it is not continued or skipped")
    return 0
