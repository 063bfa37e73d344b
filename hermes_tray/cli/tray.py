"""``hermes-tray`` (no command) and ``hermes-tray tray``: start the tray on the discovered homes.

Qt is imported only inside ``run``: the other commands stay fast and work over SSH.
"""

from __future__ import annotations

import argparse

from hermes_tray.cli.display import refuse_without_display

HELP = "start the tray (the default when no command is given)"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("tray", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument(
        "--wait-for-tray",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for the desktop's tray before showing a status window (default 2; "
        "the icon replaces the window if a tray appears later)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    refused = refuse_without_display()
    if refused is not None:
        return refused
    from hermes_tray.app.application import TrayOptions, run_tray

    options = TrayOptions(homes=getattr(args, "homes", None) or None)
    wait = getattr(args, "wait_for_tray", None)
    if wait is not None:
        options.wait_for_tray = max(0.0, float(wait))
    return run_tray(options)


def hermes_present(args: argparse.Namespace) -> bool:
    """Is there anything for the tray to watch: a home given or on disk, or a Hermes install? Cheap checks
    only (no Qt, no gateway probe): the answer decides whether a newcomer who runs ``hermes-tray`` without
    Hermes gets the demo instead of an empty tray."""
    if getattr(args, "homes", None):
        return True
    from hermes_tray_core import (
        HermesNotFound,
        HermesSettingsError,
        discover_homes,
        find_hermes,
        load_settings,
        look_at_homes,
        settings_hermes_command,
    )

    try:
        extra = load_settings().home_paths()
    except Exception:  # boundary: a settings file that cannot be read: the homes Hermes has still count
        extra = []
    homes = discover_homes(extra=extra)
    if any(seen.ok for seen in look_at_homes([home.path for home in homes])):
        return True
    try:
        find_hermes(settings_hermes_command())
    except HermesSettingsError:
        return True  # settings exist (if unreadable): not a newcomer; the tray shows the problem
    except HermesNotFound:
        return False
    return True


def run_default(args: argparse.Namespace) -> int:
    """No command given: the tray, or the demo when no Hermes is installed (a newcomer's first run)."""
    refused = refuse_without_display()  # before the demo: no backend is started for a tray that cannot show
    if refused is not None:
        return refused
    if not hermes_present(args):
        import sys

        print(
            "No Hermes installation or home found: opening hermes-tray on a throwaway demo home.\n"
            "Install Hermes Agent (or pass --home PATH) to watch your real turns.",
            file=sys.stderr,
        )
        from hermes_tray.cli import demo

        return demo.run(argparse.Namespace(**{**vars(args), "no_tray": False, "capability": "auto-continue",
                                                 "crash_after": 5.0, "dir": None, "reuse": True}))
    return run(args)
