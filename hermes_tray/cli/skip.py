"""``hermes-tray skip SESSION``: forget one interrupted turn, only if it is still the one you saw.

The entry is removed by compare-and-remove (``core.markers.store``): changed since it was read, nothing is removed
(exit 1). The command then watches the settle window (``core.markers.settle``) and undoes a stale Hermes write that
brings the entry back; the skip's tombstone makes any later reader remove that exact entry again. ``--started-at``
pins the turn an earlier ``status --json`` showed. A turn its writer or a Hermes backend still runs is not skipped
unless ``--force``; one being resumed is never skipped (``core.continuing.skip`` takes the resume's claim).
"""

from __future__ import annotations

import argparse

HELP = "forget an interrupted turn (remove its marker if unchanged) so it is not resumed"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("skip", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("session", metavar="SESSION", help="the session key, as `status` shows it")
    parser.add_argument("--started-at", type=float, metavar="T",
                        help="only if the marker's started_at is still T (from `status --json`)")
    parser.add_argument("--force", action="store_true",
                        help="skip even a turn that reads running or not-ours")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from hermes_tray.cli.common import journal, one_turn, print_json, refuse, warn
    from hermes_tray_core import SkipOutcome, skip_turn

    rec = one_turn(args)
    if isinstance(rec, int):
        return rec
    key = rec.session_key
    entry = rec.entry or {}
    if args.started_at is not None and entry.get("started_at") != args.started_at:
        journal("refused", rec.turn.ident._replace(started_at=float(args.started_at)), action="skip",
                why="the --started-at given is not this turn's")
        # the value given is not this turn's: a typo, or a run that replaced the one shown. Which, only the
        # user knows; the turn's own value is in --json (a float is no sentence)
        started = rec.started_at
        when = (f" ({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))})" if 0 < started < 2**37 else "")
        return refuse(args, f"The --started-at given is not when the turn now waiting in {key} started{when}: a "
                      "mistyped value, or a newer run of it. Not skipped. Check it with `hermes-tray status --json`.",
                      started_at=entry.get("started_at"))
    if not args.force and (rec.verdict == "not-ours" or (rec.verdict == "running" and not rec.unsure)):
        return refuse(args, f"{key} is {rec.verdict}: {rec.reason} — not skipped (--force to skip anyway)")

    res = skip_turn(rec.turn, via="cli", verdict=rec.verdict)  # recorded inside the skip's claim
    if res.outcome == SkipOutcome.ERROR:
        return refuse(args, f"{key}: {res.message}")
    if res.outcome == SkipOutcome.RESUMING:
        journal("refused", rec.turn.ident, action="skip", why="being resumed right now")
        return refuse(args, f"{key} is being resumed right now: not skipped — stop the continuation instead "
                      "(`hermes-tray status` shows it)")
    if not res.ok:
        journal("refused", rec.turn.ident, action="skip", why="it changed while being skipped")
        return refuse(args, f"{key} changed (or was cleared) while it was being skipped: not skipped — "
                      "run `hermes-tray status` again")
    # Before exiting: the settle window, in which a stale Hermes write that brings the entry back is undone
    # again (core.markers.settle); after it, the recorded skip makes any process of ours remove it.
    from hermes_tray_core import wait_for_marker_settle

    wait_for_marker_settle(timeout=5.0)
    if res.journal_error:
        warn(res.journal_error)
    if args.json:
        print_json({"ok": True, "skipped": key, "home": str(rec.home)})
    else:
        print(f"skipped {key} in {rec.home}: it will not be resumed")
    return 0

