"""``hermes-tray quit``: ask the running tray to quit, as its Quit does (for a script, an update, an uninstall).

Quitting is never the user's Stop: a continuation the tray runs goes on in Hermes. Qt's local socket carries
the request (the tray's single-instance channel), so QtCore is imported inside ``run``.
"""

from __future__ import annotations

import argparse

from hermes_tray.cli.common import print_json, refuse
from hermes_tray.cli.exits import EXIT_OK

HELP = "ask the running tray to quit (a continuation it runs goes on in Hermes)"
QUIT_SAID = "hermes-tray quit; anything it was continuing goes on in Hermes."


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("quit", parents=[common], help=HELP, description=HELP + ".")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from PySide6.QtCore import QCoreApplication

    from hermes_tray.app.single_instance import SingleInstance, instance_running

    if not instance_running("tray"):
        return refuse(args, "hermes-tray is not running.")
    _app = QCoreApplication.instance() or QCoreApplication(["hermes-tray"])
    if not SingleInstance("tray").send_to_primary("quit"):
        return refuse(args, "The running hermes-tray did not answer: it may still be starting. Try again, or end "
                            "its process (a continuation it runs goes on in Hermes either way).")
    if getattr(args, "json", False):
        print_json({"ok": True})
    else:
        print(QUIT_SAID)
    return EXIT_OK
