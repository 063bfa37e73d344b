"""Argument parsing and dispatch: each command's module ``hermes_tray.cli.<name>`` has ``register(subparsers,
common)``, which adds its sub-parser and sets ``func`` (``args -> int``). Nothing here imports Qt.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from contextlib import suppress
from typing import Any

from hermes_tray.cli.exits import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE_CLOSED,
    EXIT_REFUSED,
    EXIT_USAGE,
    RESUME_WORKER,
)
from hermes_tray_core import __version__

__all__ = ["entry", "main"]

# Order = order in --help.
COMMAND_MODULES = [
    "tray",
    "status",
    "resume",
    "skip",
    "snooze",
    "enable_disable",
    "config_cmd",
    "doctor",
    "history",
    "helper",
    "demo",
    "autostart",
    "quit",
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
COMMAND_MODULE_OF = {"enable": "enable_disable", "disable": "enable_disable", "config": "config_cmd"}


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


def entry() -> None:
    """The program's entry point (the console script, ``python -m hermes_tray``, the frozen launcher)."""
    sys.exit(main(exit_quickly=True))


def main(argv: list[str] | None = None, *, exit_quickly: bool = False) -> int:
    """Run one command. ``exit_quickly`` (the program itself, never a caller that goes on): a command that
    declares ``quick_exit`` ends the process as soon as it is done (:func:`_exit_now`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == [RESUME_WORKER]:
        from hermes_tray.cli.resume_worker import run_worker

        return int(run_worker() or 0)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (_SafeStream(s) if s is not None else s for s in streams)
    try:
        return _run(argv, exit_quickly)
    finally:
        sys.stdout, sys.stderr = streams


class _SafeStream:
    """``sys.stdout`` / ``sys.stderr`` while a command runs: whatever a file holds (a session key, a title, a
    path) reaches the terminal through :func:`hermes_tray.format.safe_text`, never raw."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from hermes_tray.format import safe_text

        self._stream.write(safe_text(text, keep_newlines=True))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding…: the real stream's
        return getattr(self._stream, name)


def _run(argv: list[str], exit_quickly: bool) -> int:
    parser = build_parser(_command_module(argv))
    args = parser.parse_args(argv)
    # SUPPRESS defaults let the options stand before or after the command; fill them in once here.
    args.homes = getattr(args, "homes", None)
    args.json = getattr(args, "json", False)
    if args.homes and any(not str(h).strip() for h in args.homes):
        # `--home "$HERMES_HOME"` with the variable unset: never the current directory
        from hermes_tray.cli.common import refuse

        return refuse(args, "--home is empty (an unset variable?): give the path of a Hermes home", EXIT_USAGE)
    func = getattr(args, "func", None)
    if func is None:
        tray = sys.modules.get("hermes_tray.cli.tray")
        if tray is None:
            parser.print_help()
            return EXIT_OK
        func = tray.run_default
    from hermes_tray_core import TrayError

    try:
        code = int(func(args) or 0)
        sys.stdout.flush()
        if exit_quickly and getattr(args, "quick_exit", False):
            _exit_now(code)
        return code
    except TrayError as exc:  # an engine error no command answered: its sentence; --json has the detail too
        from hermes_tray.cli.common import refuse

        if args.json:
            return refuse(args, str(exc), EXIT_REFUSED, detail=exc.detail)
        return refuse(args, exc.user_message, EXIT_REFUSED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hermes-tray status | head`: the reader has what it wanted, no traceback
        _silence_stdout()
        return EXIT_PIPE_CLOSED


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown, which frees every module and object one by one:
    a ``status`` takes 151.3 ms of CPU cold and 94.0 warm against 172.6 and 110.3 with a normal exit
    (tests/bench/bench_tricks.py, one run, 2026-12-03, 41 alternated runs). What a finished command needs still
    happens: the at-exit handlers run (logging's flush) and the standard streams are flushed. Only when no
    other thread runs (a normal exit would wait for it) and CPython offers running the handlers."""
    import atexit
    import os

    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    threading = sys.modules.get("threading")  # never imported: no other thread was ever started
    if run_handlers is None or (threading is not None and threading.active_count() != 1):
        return
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    import os

    with suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    entry()
