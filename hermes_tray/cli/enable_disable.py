"""``hermes-tray enable|disable [--all]``: Hermes' own auto-continue switch, ``desktop.auto_continue.enabled`` of
the ``--home`` homes, every home (``--all``) or the only one. The edit touches only that line; an unparseable
file is left alone (exit 1); a key the managed config pins is never edited (a different value is refused, the
same one reported as set there). Each change is recorded as ``config-changed`` (by=cli).
"""

from __future__ import annotations

import argparse
import os

CREATE_HELP = "make a --home that is not a Hermes home yet (no config.yaml, desktop/ or state.db) one"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    for name, text in (("enable", "turn Hermes auto-continue on (desktop.auto_continue.enabled: true)"),
                       ("disable", "turn Hermes auto-continue off (desktop.auto_continue.enabled: false)")):
        parser = subparsers.add_parser(name, parents=[common], help=text, description=text + ".")
        parser.add_argument("--all", action="store_true", help="every Hermes home found (root and profiles)")
        parser.add_argument("--create", action="store_true", help=CREATE_HELP)
        parser.set_defaults(func=run, enable=(name == "enable"))


def run(args: argparse.Namespace) -> int:
    return set_backend(args, {"enabled": bool(args.enable)}, all_flag=args.all)


def set_backend(args: argparse.Namespace, changes: dict, *, all_flag: bool) -> int:
    """Apply ``changes`` to the chosen homes' config.yaml; one line per home; journal each change."""
    from hermes_tray.cli.common import homes_to_change, journal_config, print_json, refuse, warn
    from hermes_tray.words import error_text
    from hermes_tray_core import (
        BackendConfigError,
        ensure_private_dir,
        read_backend_config,
        write_auto_continue,
    )

    homes, problem, code = homes_to_change(args, all_flag=all_flag, create=bool(getattr(args, "create", False)))
    if problem:
        return refuse(args, problem, code)
    results, failed = [], 0
    for home in homes:
        before = read_backend_config(home.path).auto_continue
        try:
            if getattr(args, "create", False) and not os.path.isdir(home.path):
                ensure_private_dir(home.path)  # --create on a folder that does not exist yet: made 0700
            cfg = write_auto_continue(home.path, **changes)
        except (BackendConfigError, OSError) as exc:
            failed += 1
            why = error_text(exc)  # a BackendConfigError's sentence, a file error in the system's words
            results.append({"home": str(home.path), "ok": False, "error": why})
            if not args.json:
                warn(f"{home.path}: {why}")
            continue
        ac = cfg.auto_continue
        for key in changes:
            old, new = getattr(before, key), getattr(ac, key)
            if old != new or type(old) is not type(new):
                note = journal_config(home=home.path, key=key, old=old, new=new)
                if note:
                    warn(note)
        results.append({"home": str(home.path), "ok": True, "enabled": ac.enabled,
                        "freshness_minutes": ac.freshness_minutes, "max_attempts": ac.max_attempts})
        pinned = [k for k in changes if k in ac.managed]
        results[-1]["managed"] = pinned
        if not args.json:
            what = ", ".join(f"{k} = {_show(v)}" for k, v in changes.items())
            note = (f" (set by the administrator's managed config {cfg.managed_path}; config.yaml not changed)"
                    if pinned else "")
            print(f"{home.path}: {what}{note}")
    if args.json:
        print_json({"ok": failed == 0, "homes": results})
    return 1 if failed else 0


def _show(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
