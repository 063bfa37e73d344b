"""``hermes-tray autostart on|off|status [--helper]``: start at login, read back from the system."""

from __future__ import annotations

import argparse
import json
import sys

from hermes_tray.cli.exits import EXIT_NO, EXIT_OK, EXIT_REFUSED

HELP = "start the tray (or, with --helper, the headless helper) at login: on, off or status"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "autostart",
        parents=[common],
        help=HELP,
        description=HELP + ". The state is read back from the system every time "
        "(XDG autostart entry, systemd user unit, LaunchAgent or Run registry value). "
        "`status` exits 0 when on and 1 when off (the exit-code table's \"no\").",
    )
    parser.add_argument("action", choices=("on", "off", "status"))
    parser.add_argument(
        "--helper",
        action="store_true",
        help="the headless helper instead of the tray (a systemd user unit on Linux)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_tray.autostart import AutoStartError, get_autostart

    try:
        backend = get_autostart(helper=args.helper)
        if args.action in ("on", "off"):
            backend.set_enabled(args.action == "on")
        status = backend.status()
    except (AutoStartError, OSError, ValueError) as exc:
        what = "helper " if args.helper else ""
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc)}))
        else:
            print(f"hermes-tray: could not change {what}start at login: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "enabled": status.enabled,
                    "helper": args.helper,
                    "backend": status.backend,
                    "location": status.location,
                    "command": status.command,
                }
            )
        )
    else:
        subject = "helper" if args.helper else "tray"
        state = "on" if status.enabled else "off"
        print(f"start {subject} at login: {state} ({status.backend}: {status.location})")
        if status.command:
            print("runs: " + " ".join(status.command))
    if args.action == "status" and not status.enabled:
        return EXIT_NO
    return EXIT_OK
