"""``hermes-tray status [--json]``: which turns were interrupted, where, and what should happen (docs/cli.md).

Exit 0 when the scan ran; problems reading a home are printed, never hidden. A ``--home`` that does not exist is
refused (exit 1): a typo, not a home Hermes has not used yet. Turns are named and their prompts hidden as the
tray does it (``notify.coalesce.turn_names``, ``show_prompts``).
"""

from __future__ import annotations

import argparse

HELP = "list interrupted turns in every Hermes home and what would happen to each"


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("status", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not update the scan cache")
    parser.set_defaults(func=run, quick_exit=True)  # read-only, one thread: no teardown needed (cli.main)


def run(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import print_json, refuse_unusable_homes, selected_homes
    from hermes_tray_core import Scanner, default_cache_file

    homes = selected_homes(args)
    refused = refuse_unusable_homes(args, homes)  # `--home <typo>`: the path does not exist, said plainly
    if refused is not None:
        return refused
    result = Scanner(homes, cache_file=None if args.no_cache else default_cache_file(),
                     ask_running_hermes=True).scan()
    prompts = show_excerpts() if result.turns else True
    reminders = reminders_of(result.turns)
    served = served_by(result)
    if args.json:
        doc = result.to_json(prompts=prompts)
        for i, row in enumerate(doc["turns"]):
            row["reminder_at"] = reminders.get(i)
        for h in doc["homes"]:
            h["served_by"] = served[h["path"]].to_json() if h["path"] in served else None
        print_json(doc)
        return 0
    print(render(result, excerpts=prompts, reminders=reminders, served=served))
    return 0


def served_by(result) -> dict:
    """Which Hermes serves each home that exists (the gateway that owns its sessions, a dashboard, none)."""
    from hermes_tray_core import who_serves

    return {str(h.path): who_serves(h.path) for h in result.homes if h.exists and h.reachable}


def reminders_of(turns) -> dict[int, float]:
    """``{index: when}`` of the turns snoozed and not yet announced again (the ledger's ``snoozed``)."""
    import time

    from hermes_tray_core import Verdict, ledger, snoozed_until

    waiting = [(i, t) for i, t in enumerate(turns) if t.verdict == Verdict.ACTIONABLE]
    if not waiting:
        return {}
    try:
        known = ledger().statuses([t.turn.ident for _i, t in waiting])
    except (OSError, ValueError):  # the ledger cannot be read: the turns are listed without their reminders
        return {}
    until = {i: snoozed_until(st) for i, t in waiting if (st := known.get(t.turn.ident)) is not None}
    return {i: at for i, at in until.items() if at is not None and at > time.time()}


def show_excerpts() -> bool:
    """The ``show_prompts`` setting (default on): read only when there are turns to show."""
    from hermes_tray_core import settings_file

    if not settings_file().exists():  # the common case: no need to load the settings module
        return True
    from hermes_tray.cli.common import load_tray_settings

    return bool(load_tray_settings(quiet=True).show_prompts)


def render(result, *, excerpts: bool = True, reminders: dict[int, float] | None = None,
           served: dict | None = None) -> str:
    """The human-readable status: one line per turn (reason underneath), then per-home problems."""
    from hermes_tray.cli.common import table
    from hermes_tray.format import safe_text
    from hermes_tray_core import cause_words

    out: list[str] = []
    multi = len(result.homes) > 1
    reminders = reminders or {}
    if result.turns:
        import time

        from hermes_tray import words
        from hermes_tray_core import write_problem

        names = _names(result.turns, excerpts)
        blocked = {str(h): why for h in {t.home for t in result.actionable} if (why := write_problem(h))}
        rows = []
        for t, what in zip(result.turns, names, strict=True):
            # one line each, whatever the marker holds: no line break or control character from a file
            rows.append([t.verdict + ("?" if t.unsure else ""), words.when_text(*t.moment), str(t.attempts),
                         t.writer, *([t.profile] if multi else []),
                         safe_text(t.session_key) + (" (webui)" if t.source == "webui" else ""), safe_text(what)])
        headers = ["VERDICT", "WHEN", "TRIES", "WRITER", *(["PROFILE"] if multi else []), "SESSION", "WHAT"]
        lines = table(rows, headers).splitlines()
        out.append(lines[0])
        for i, (line, t) in enumerate(zip(lines[1:], result.turns, strict=True)):
            out.append(line)
            out.append(f"    {safe_text(t.reason)}")
            if i in reminders:
                said = words.reminder_text(reminders[i], time.time())
                out.append(f"    {said[:1].lower()}{said[1:]}: not announced before then")
            if t.actionable and str(t.home) in blocked:
                out.append(f"    cannot be resumed now: {safe_text(blocked[str(t.home)])}")
            if t.progress is not None:
                out.append(f"    progress: {safe_text(t.progress.line(excerpts=excerpts))}")
            if t.cause is not None:
                out.append(f"    why it stopped: {safe_text(cause_words(t.cause, t.cause_fact))}")
        n = sum(1 for t in result.actionable if str(t.home) not in blocked)
        out.append("")
        out.append(f"{words.count(n, 'turn')} can be resumed: hermes-tray resume SESSION" if n
                   else "nothing to resume right now")
        stuck = len(result.actionable) - n
        if stuck:
            out.append(f"{words.count(stuck, 'waiting turn')} cannot be resumed until Hermes can write in "
                       f"{'its home' if stuck == 1 else 'their homes'}")
        held = [t for t in result.turns if t.verdict == "disabled"]
        if held:  # the same words as the tray's turns window: why they wait, and the one way to act
            out.append(f"{words.count(len(held), 'turn')} not continued because Hermes auto-continue is off: "
                       "`hermes-tray enable` turns it back on, then they can be resumed")
    else:
        readable = [h for h in result.homes if h.exists and h.markers in ("ok", "none") and not h.unsupported]
        out.append("no interrupted turns" if len(readable) == len(result.homes)
                   else "no interrupted turns found in the homes that could be read — see below")
    for h in result.homes:
        notes = [f"NOT SUPPORTED: {u}" for u in h.unsupported] + list(h.problems)
        there = (served or {}).get(str(h.path))
        if notes or (there is not None and there.kind is not None):
            out.append("")
            out.append(f"{h.path} ({h.profile}):")
            if there is not None and there.kind is not None:
                out.append(f"  served by: {there.line()}")
            out.extend(f"  - {n}" for n in notes)
    if any(t.unsure for t in result.turns):
        out.append("")
        out.append("? = could not be checked for sure; left alone until it can be")
    return "\n".join(out)


def _names(turns, prompts: bool) -> list[str]:
    """What each turn is called, as the tray's menu and notifications call it: Hermes' turns told apart by the
    part that differs (``turn_names``), in 50 characters; WebUI turns by where they ran."""
    from hermes_tray.format import elide
    from hermes_tray.notify.coalesce import turn_names

    desktop = [t for t in turns if t.source != "webui"]
    named = iter(turn_names(desktop, show_prompts=prompts))
    return [elide(next(named), 50) if t.source != "webui" else "(WebUI turn)" for t in turns]
