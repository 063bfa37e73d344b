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

from hermes_tray_core import __version__

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


# Commands whose module is not named after them; every other command ``X`` lives in ``hermes_tray.cli.X``.
COMMAND_MODULE_OF = {"enable": "enable_disable", "disable": "enable_disable", "config": "config_cmd",
                     "_resume-worker": "resume"}


def _command_module(argv: list[str]) -> str | None:
    """The one module the command line needs (so ``status`` does not import every command), or None."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--home":
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        module = COMMAND_MODULE_OF.get(tok, tok)
        return module if module in COMMAND_MODULES else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="hermes-tray",
        description="Notice interrupted Hermes Agent turns and resume, skip or disable auto-continue. "
        "With no command, starts the tray.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"hermes-tray {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only else COMMAND_MODULES:
        try:
            module = importlib.import_module(f"hermes_tray.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"hermes_tray.cli.{name}":
                continue  # command not built into this version
            raise
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_module(argv))
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
