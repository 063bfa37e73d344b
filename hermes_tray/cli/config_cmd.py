"""``hermes-tray config show | get KEY | set KEY VALUE | unset KEY``: backend keys in each home's config.yaml
(``desktop.auto_continue``), tray keys in the tray's config.toml (``unset`` brings back the default). Invalid keys
or values are usage errors (exit 2); a config.yaml that cannot be edited safely is a refusal (exit 1).
"""

from __future__ import annotations

import argparse

from hermes_tray_core import SETTING_KEYS as TRAY_KEYS

BACKEND_KEYS = ("enabled", "freshness_minutes", "max_attempts")
HELP = "show or change auto-continue settings (backend config.yaml and the tray's own)"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("config", parents=[common], help=HELP, description=HELP + ". Keys: "
                                   + ", ".join(BACKEND_KEYS) + " (per home); " + ", ".join(TRAY_KEYS) + " (tray).")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("show", parents=[common], help="every setting, per home and for the tray")
    get = sub.add_parser("get", parents=[common], help="one setting")
    get.add_argument("key", metavar="KEY")
    put = sub.add_parser("set", parents=[common], help="change one setting")
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    put.add_argument("--all", action="store_true", help="backend keys: every Hermes home found")
    put.add_argument("--create", action="store_true",
                     help="backend keys: make a --home that is not a Hermes home yet one; homes: accept a folder "
                     "Hermes has not used yet")
    unset = sub.add_parser("unset", parents=[common], help="a tray setting back to its default")
    unset.add_argument("key", metavar="KEY")
    parser.set_defaults(func=run)


def _tray_dict(settings) -> dict:
    d = settings.to_dict()
    d.setdefault("hermes_command", None)
    return d


def _home_dicts(homes, looks) -> list[dict]:
    from hermes_tray_core import HomeAccess, read_backend_config

    out = []
    for h, seen in zip(homes, looks, strict=True):
        if seen.access in (HomeAccess.UNREADABLE, HomeAccess.NO_ANSWER):  # never read (or hang on) that home
            out.append({"home": str(h.path), "profile": h.profile, "exists": seen.exists, "enabled": None,
                        "freshness_minutes": None, "max_attempts": None, "managed": [], "managed_path": None,
                        "warnings": [], "error": seen.problem})
            continue
        cfg = read_backend_config(h.path)
        ac = cfg.auto_continue
        out.append({"home": str(h.path), "profile": h.profile, "exists": seen.ok, "enabled": ac.enabled,
                    "freshness_minutes": ac.freshness_minutes, "max_attempts": ac.max_attempts,
                    "managed": list(ac.managed),
                    "managed_path": str(cfg.managed_path) if cfg.managed_path else None,
                    "warnings": list(cfg.warnings), "error": cfg.error})
    return out


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(unset)"
    if isinstance(value, (list, tuple)):
        import shlex

        return " ".join(shlex.quote(str(v)) for v in value) if value else "(none)"
    return str(value)


def run(args: argparse.Namespace) -> int:
    """One function per action: ``show``, ``get``, ``set``, ``unset``."""
    from hermes_tray.cli.common import EXIT_USAGE, refuse

    key = getattr(args, "key", None)
    if key is not None and key not in BACKEND_KEYS + TRAY_KEYS:
        return refuse(args, f"unknown key {key!r}: choose one of {', '.join(BACKEND_KEYS + TRAY_KEYS)}", EXIT_USAGE)
    return {"show": _show, "get": _get, "set": _set, "unset": _unset}[args.action](args)


def _tray_settings(args: argparse.Namespace, *, strict: bool) -> object:
    """The tray's settings; an unreadable file is said (a refusal when ``strict``: ``get`` of a tray key) and the
    defaults shown."""
    from hermes_tray.cli.common import load_tray_settings, refuse, warn
    from hermes_tray_core import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        if strict:
            return refuse(args, exc.user_message)
        warn(exc.user_message)
        return load_tray_settings(quiet=True)


def _home_rows(args: argparse.Namespace) -> list[dict] | int:
    """Every selected home's backend keys (an exit code when a ``--home`` cannot be used)."""
    from hermes_tray.cli.common import refuse_unusable_homes, selected_homes
    from hermes_tray_core import HomeAccess, look_at_homes

    homes = selected_homes(args)
    refused = refuse_unusable_homes(args, homes)
    if refused is not None:
        return refused
    looks = look_at_homes([h.path for h in homes])
    chosen = [(h, seen) for h, seen in zip(homes, looks, strict=True)
              if args.homes or seen.access not in (HomeAccess.MISSING, HomeAccess.NOT_DIR)]
    return _home_dicts([h for h, _ in chosen], [seen for _, seen in chosen])


def _get(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import print_json, refuse

    key = args.key
    if key in TRAY_KEYS:
        settings = _tray_settings(args, strict=True)
        if isinstance(settings, int):
            return settings
        value = _tray_dict(settings)[key]
        print_json({"key": key, "value": value}) if args.json else print(_fmt(value))
        return 0
    rows = _home_rows(args)
    if isinstance(rows, int):
        return rows
    if not rows:  # nothing to read the key from: a refusal, never silence and 0
        return refuse(args, f"no Hermes home found, so {key} has no value to show (use --home PATH)")
    if not [r for r in rows if r["enabled"] is not None]:  # every home named cannot be read: say why, never "(unset)"
        return refuse(args, "; ".join(r["error"] for r in rows))
    if args.json:
        print_json({"key": key, "homes": [{"home": r["home"], "value": r[key]} for r in rows]})
    elif len(rows) == 1:
        print(_fmt(rows[0][key]))
    else:
        for r in rows:
            print(f"{r['home']}: {_fmt(r[key]) if r['enabled'] is not None else r['error']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import print_json
    from hermes_tray_core import settings_file

    settings = _tray_settings(args, strict=False)
    rows = _home_rows(args)
    if isinstance(rows, int):
        return rows
    if args.json:
        print_json({"tray": _tray_dict(settings), "homes": rows})
        return 0
    print(f"tray ({getattr(settings, 'path', None) or settings_file()}):")
    for k, v in _tray_dict(settings).items():
        print(f"  {k} = {_fmt(v)}")
    for r in rows:
        print(f"{r['home']} ({r['profile']}){'' if r['exists'] else ' — does not exist'}:")
        if r["enabled"] is None:  # could not be read: its error says why
            print(f"  ! {r['error']}")
            continue
        for k in BACKEND_KEYS:
            pinned = f"  (set by the administrator in {r['managed_path']})" if k in r["managed"] else ""
            print(f"  {k} = {_fmt(r[k])}{pinned}")
        for w in r["warnings"] + ([r["error"]] if r["error"] else []):
            print(f"  ! {w}")
    if not rows:
        print("no Hermes home found (use --home PATH)")
    return 0


def _set(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import EXIT_USAGE, refuse

    key, text = args.key, args.value
    if key in BACKEND_KEYS:
        from hermes_tray.cli.enable_disable import set_backend
        from hermes_tray_core import BackendConfigError
        from hermes_tray_core import parse_config_value as parse_value

        try:
            value = parse_value(key, text)
        except BackendConfigError as exc:
            return refuse(args, exc.user_message, EXIT_USAGE)
        return set_backend(args, {key: value}, all_flag=args.all)
    from hermes_tray_core import SettingsError
    from hermes_tray_core import parse_setting_value as parse_value

    try:
        value = parse_value(key, text)
        from hermes_tray_core import validate_settings as validate

        validate({key: value})
    except SettingsError as exc:
        return refuse(args, exc.user_message, EXIT_USAGE)  # the value given is wrong
    if key == "homes":
        problem = _homes_problem(value, create=args.create)
        if problem:
            return refuse(args, problem)  # checked now, never found wrong at every later start
    return _write_tray_key(args, key, value)


def _homes_problem(paths: list[str], *, create: bool) -> str | None:
    """Why ``homes`` must not take these paths, or None. Each must be a folder this user can read that answers
    (as ``--home`` for a write), and a Hermes home unless ``create``: a typo is refused when it is set, not
    reported at every later start (an entry that disappears later is a problem ``doctor`` counts)."""
    import os
    from pathlib import Path

    from hermes_tray_core import is_hermes_home, look_at_homes

    wanted = [Path(os.path.expanduser(p)).absolute() for p in paths]
    for path, seen in zip(wanted, look_at_homes(wanted), strict=True):
        if not seen.ok:
            return seen.problem
        if not create and not is_hermes_home(path):
            return (f"{path} is not a Hermes home (no config.yaml, no desktop/, no state.db): check the path, or "
                    "pass --create to watch a folder Hermes has not used yet")
    return None


def _unset(args: argparse.Namespace) -> int:
    """Remove a tray key from config.toml: the tray's default applies again (``hermes_command``: Hermes is
    found by itself). Hermes' own keys are set, never unset: their default is Hermes' to say."""
    from hermes_tray.cli.common import EXIT_USAGE, refuse

    key = args.key
    if key in BACKEND_KEYS:
        return refuse(args, f"{key} is Hermes' own setting: give it a value with hermes-tray config set {key} VALUE",
                      EXIT_USAGE)
    return _write_tray_key(args, key, None)


def _write_tray_key(args: argparse.Namespace, key: str, value) -> int:
    """Write one tray key to config.toml (None removes it: the default applies again), journal a change and
    print the value now in force."""
    from hermes_tray.cli.common import journal_config, load_tray_settings, print_json, refuse, warn
    from hermes_tray.words import error_text
    from hermes_tray_core import SettingsError, update_settings

    old = _tray_dict(load_tray_settings(quiet=True))[key]
    try:
        settings = update_settings({key: value})
    except SettingsError as exc:
        return refuse(args, exc.user_message)  # the file holds something else that is wrong
    except OSError as exc:
        return refuse(args, f"could not write the tray settings: {error_text(exc)}")
    new = _tray_dict(settings)[key]
    if new != old:
        note = journal_config(home=None, key=key, old=old, new=new)
        if note:
            warn(note)
    if args.json:
        print_json({"ok": True, "key": key, "value": new, "file": str(settings.path)})
    else:
        print(f"{key} = {_fmt(new)} ({'the default; ' if value is None else ''}{settings.path})")
    return 0
