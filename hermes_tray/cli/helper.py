"""``hermes-tray helper``: the tray's watcher and engine without a GUI (QCoreApplication)."""

from __future__ import annotations

import argparse

HELP = "run the headless helper: watch, notify and (in auto mode) resume without a tray"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "helper",
        parents=[common],
        help=HELP,
        description=HELP + ". Notifications go through the desktop's notification server when "
        "a session bus is there, otherwise to the log. Runs until SIGTERM/Ctrl-C.",
    )
    parser.add_argument("--no-notifications", action="store_true", help="log instead of notifying")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_tray.app.headless import run_helper

    return run_helper(getattr(args, "homes", None) or None, notifications=not args.no_notifications)
