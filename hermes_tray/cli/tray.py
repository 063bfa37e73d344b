"""``hermes-tray`` (no command) and ``hermes-tray tray``: start the tray on the discovered homes.

Qt is imported only inside ``run``: the other commands stay fast and work over SSH.
"""

from __future__ import annotations

import argparse

HELP = "start the tray (the default when no command is given)"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("tray", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument(
        "--wait-for-tray",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for the desktop's tray before showing a status window (default 30)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_tray.app.application import TrayOptions, run_tray

    options = TrayOptions(homes=getattr(args, "homes", None) or None)
    wait = getattr(args, "wait_for_tray", None)
    if wait is not None:
        options.wait_for_tray = max(0.0, float(wait))
    return run_tray(options)


def run_default(args: argparse.Namespace) -> int:
    """No command given: the tray."""
    return run(args)
