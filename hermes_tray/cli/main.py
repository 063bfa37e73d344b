"""Argument parsing and dispatch; each command lives in its own module under ``hermes_tray.cli``."""

from __future__ import annotations

import argparse
import sys

from core import __version__

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-tray",
        description="Notice interrupted Hermes Agent turns and resume, skip or disable auto-continue.",
    )
    parser.add_argument("--version", action="version", version=f"hermes-tray {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
