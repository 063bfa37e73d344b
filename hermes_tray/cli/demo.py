"""``hermes-tray demo [--no-tray]``: try hermes-tray on a throwaway home (``demo.home``, or ``--dir``) with a
simulated backend whose turn crashes after a few seconds, printing what to try with this very executable; the
user's real homes and tray state are never touched. ``hermes-tray`` with no command and no Hermes installed runs
it in ``~/.cache/hermes-tray/demo`` (``default_demo_root``), made afresh each time.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from hermes_tray.cli.common import print_json, refuse
from hermes_tray.cli.exits import EXIT_OK, EXIT_REFUSED, EXIT_USAGE

DESCRIPTION = (
    "Try hermes-tray on a throwaway Hermes home with a simulated Hermes: a turn runs and crashes after a few "
    "seconds, and the tray offers to resume it. The demo has its own tray settings and state: your real "
    "Hermes homes and tray settings are never touched. Without --no-tray the tray opens on it."
)
DIR_HELP = ("where to create the demo (default: a new private temp dir, removed when the tray quits and kept "
            "with --no-tray; hermes-tray with no command and no Hermes installed uses {root})")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser("demo", parents=[common], help="try hermes-tray on a throwaway home and simulated backend",
                              description=DESCRIPTION)
    p.add_argument("--no-tray", action="store_true", help="only create the demo and print what to try")
    p.add_argument("--capability", choices=("auto-continue", "legacy"), default="auto-continue",
                   help="simulate a Hermes that continues turns itself (default) or an older one (0.19.0)")
    p.add_argument("--crash-after", type=float, default=5.0, metavar="SECONDS",
                   help="SIGKILL the simulated backend this long into its turn (default 5; 0 = never: crash it "
                   "yourself, or its turn ends by itself after an hour)")
    from hermes_tray.demo.home import default_demo_root
    from hermes_tray.format import short_path

    p.add_argument("--dir", default=None, metavar="PATH", help=DIR_HELP.format(root=short_path(default_demo_root())))
    p.set_defaults(func=run)


def own_command() -> str:
    """This very hermes-tray, as a command that works from any shell: the absolute path of the running
    executable (the README's install puts it in .venv/bin, not on PATH), else its Python with -m."""
    if getattr(sys, "frozen", False):
        return shlex.quote(sys.executable)
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name in ("hermes-tray", "hermes-tray.exe") and script.exists():
        return shlex.quote(str(script.resolve()))
    beside = Path(sys.executable).with_name("hermes-tray")
    if beside.is_file():
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m hermes_tray"


def _launcher(demo: Any) -> Path:
    """``<demo>/hermes-tray``: this very hermes-tray with the demo's own settings and state (its env), so
    the banner's commands are short and never touch the user's own tray."""
    env = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in demo.env.items())
    path = Path(demo.root) / "hermes-tray"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"#!/bin/sh\n# hermes-tray on the demo in {shlex.quote(str(demo.root))}\n{env}"
                f"exec {own_command()} \"$@\"\n")
    return path


def _instructions(demo: Any, *, ends: str, crash_after: float = 5.0) -> str:
    """What was made and what to try, in a few short lines. ``ends``: ``quit`` (Quit removes the demo),
    ``next-start`` (the user's one demo dir, made afresh at each start) or ``kept``."""
    cmd = shlex.quote(str(_launcher(demo)))
    if not demo.backend_pid:
        crash = f"its turn crashes {crash_after:g} s in" if crash_after > 0 else "its turn runs"
    elif crash_after > 0:
        crash = f"its turn crashes {crash_after:g} s in (or now: kill -9 {demo.backend_pid})"
    else:  # --crash-after 0: never, said as it is, with the way to do it
        crash = f"its turn runs until you crash it: kill -9 {demo.backend_pid}"
    end = {"quit": "Quit removes the demo.\n", "next-start": "",
           "kept": f"Remove it when you are done: rm -rf {shlex.quote(str(demo.root))}\n"}[ends]
    return f"""\
hermes-tray demo ready in {demo.root}
  Hermes home  {demo.home} (a simulated Hermes)
  session      {demo.session_key}: {crash}
The demo's own command line (its settings and state stay in the demo):
  {cmd} status
  {cmd} resume {demo.session_key} --wait
{end}"""


def _hand_off(root: Path) -> int | None:
    """A demo tray already runs on ``root``: ask it to show its window (as a second tray launch
    does) and say so; the exit code (0 once it showed it). None when none runs."""
    from hermes_tray.app.single_instance import SingleInstance, instance_running

    run_dir = root / "tray-run"  # the demo's HERMES_TRAY_RUNTIME_DIR (create_demo)
    if not instance_running("tray", run_dir):
        return None
    from PySide6.QtCore import QCoreApplication

    from hermes_tray.app import events

    _app = QCoreApplication.instance() or QCoreApplication(["hermes-tray"])
    delivered = SingleInstance("tray", run_dir).send_to_primary("show")
    events.emit("handed-over", delivered=delivered)
    if delivered:
        print("The hermes-tray demo is already running: its window is open.", file=sys.stderr)
    else:
        print("The hermes-tray demo is running but did not answer. Quit it (or end its process) and start it "
              "again.", file=sys.stderr)
    return EXIT_OK if delivered else EXIT_REFUSED


def run(args: argparse.Namespace) -> int:
    import math

    if not (math.isfinite(args.crash_after) and args.crash_after >= 0):  # refused before anything starts
        return refuse(args, f"--crash-after must be a number of seconds (0 = never), not {args.crash_after:g}",
                      EXIT_USAGE)
    if not args.no_tray:
        from hermes_tray.cli.display import refuse_without_display

        refused = refuse_without_display()  # before the demo exists: no backend left behind
        if refused is not None:
            return refused
    from hermes_tray.demo.home import create_demo, default_demo_root
    from hermes_tray.demo.sim_install import SimInstallError

    root = args.dir
    reuse = bool(getattr(args, "reuse", False))  # ``hermes-tray`` without Hermes: the user's one demo dir
    if reuse:
        root = default_demo_root()
        handed = None if args.no_tray else _hand_off(root)
        if handed is not None:
            return handed
        shutil.rmtree(root, ignore_errors=True)  # fresh each launch: no state from an earlier demo
    try:
        demo = create_demo(root, capability=args.capability, die_after=args.crash_after or None)
    except SimInstallError as exc:
        return refuse(args, f"cannot create the demo: {exc}")
    except (OSError, ValueError) as exc:  # --dir is a file, under /proc, not writable, too long, not UTF-8…
        from hermes_tray_core import os_error_text

        where = f" in {root}" if root is not None else ""
        return refuse(args, f"cannot create the demo{where}: {os_error_text(exc)}")
    ends = "kept" if args.no_tray or (root is not None and not reuse) else "quit" if root is None else "next-start"
    start = _show(args, demo, ends=ends)
    if start is None:
        return EXIT_OK
    try:
        return int(start(demo) or 0)
    finally:
        demo.crash_backend()
        if root is None:  # a temp dir only this tray used: nothing of it outlives the tray
            shutil.rmtree(demo.root, ignore_errors=True)


def _show(args: argparse.Namespace, demo: Any, *, ends: str) -> Any:
    """Print what was made; the tray's entry point to run on it, or None (``--no-tray``, no tray)."""
    if args.json:
        print_json({"ok": True, "root": str(demo.root), "home": str(demo.home), "session_key": demo.session_key,
                    "backend_pid": demo.backend_pid, "env": demo.env, "capability": demo.capability})
    else:
        print(_instructions(demo, ends=ends, crash_after=args.crash_after or 0.0))
    if args.no_tray:
        return None
    try:
        import hermes_tray.app as app  # the tray, when this build has it
    except ImportError:
        print("(the tray is not available in this build; use the commands above)", file=sys.stderr)
        return None
    os.environ.update(demo.env)
    return app.run_demo
