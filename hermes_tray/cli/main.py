"""Argument parsing and dispatch.

Each command lives in its own module ``hermes_tray.cli.<name>`` exposing
``register(subparsers, common) -> None`` (adds its sub-parser, with ``parents=[common]``)
and sets ``func`` (``args -> int``) as the parser default. Nothing here imports Qt: the
GUI commands import it inside their ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from core import __version__

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

# Order = order in --help.
COMMAND_MODULES = [
    "tray",
    "status",
    "resume",
    "skip",
    "enable_disable",
    "config_cmd",
    "doctor",
    "history",
    "helper",
    "demo",
    "autostart",
]


def common_options() -> argparse.ArgumentParser:
    """Options every command accepts after its name (``status --json --home X``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home",
        action="append",
        dest="homes",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="Hermes home to use (repeatable); overrides discovery",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="hermes-tray",
        description="Notice interrupted Hermes Agent turns and resume, skip or disable auto-continue. "
        "With no command, starts the tray.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"hermes-tray {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"hermes_tray.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"hermes_tray.cli.{name}":
                continue  # command not built into this version
            raise
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # SUPPRESS defaults let the options stand before or after the command; fill them in once here.
    args.homes = getattr(args, "homes", None)
    args.json = getattr(args, "json", False)
    func = getattr(args, "func", None)
    if func is None:
        tray = sys.modules.get("hermes_tray.cli.tray")
        if tray is None:
            parser.print_help()
            return EXIT_OK
        func = tray.run_default
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
