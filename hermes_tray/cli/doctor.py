"""``hermes-tray doctor [--json]``: is everything in place, and if not, what to do about it. Checks the Hermes
homes, the tray settings, Hermes' install and what it can do, this desktop's tray and notification server (on the
session bus with ``jeepney``: no Qt, works over SSH) and the paths in use. Every problem is printed with its fix;
exit 0 when nothing is wrong, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

HELP = "check homes, Hermes, the system tray and notifications; say how to fix what is wrong"
SNI_WATCHER = "org.kde.StatusNotifierWatcher"
NOTIFICATIONS = "org.freedesktop.Notifications"
DBUS_TIMEOUT = 3.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("doctor", parents=[common], help=HELP, description=HELP + ".")
    parser.add_argument("--no-probe", action="store_true", help="do not run Hermes' interpreter to ask its version")
    parser.set_defaults(func=run)


def _session_bus_address() -> str | None:
    addr = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if addr:
        return addr
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.exists(os.path.join(runtime, "bus")):
        return f"unix:path={os.path.join(runtime, 'bus')}"
    return None


def check_desktop() -> tuple[dict[str, Any], list[str]]:
    """System tray and notification server availability, plus problems (each with its fix)."""
    info: dict[str, Any] = {"platform": sys.platform, "tray": None, "tray_kind": None, "notifications": None}
    problems: list[str] = []
    if sys.platform in ("win32", "darwin"):
        info["tray"], info["tray_kind"] = "provided by the operating system", "system"
        info["notifications"] = "native notification centre"
        return info, problems
    display = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY")
    info["display"] = display
    if not display:
        problems.append("no graphical session here (DISPLAY / WAYLAND_DISPLAY unset, e.g. over SSH): the tray "
                        "cannot show — use the command line or `hermes-tray helper`, or run the tray in your "
                        "desktop session")
    from hermes_tray.cli.qt_platform import check_platform, fix_text

    qt = check_platform()  # the check the tray makes before it starts
    info["qt_platform"] = qt.to_json() if qt is not None else None
    if qt is not None and not qt.ok:
        problems.append(fix_text(qt))
    from hermes_tray.cli.x11_tray import xembed_tray

    xembed = xembed_tray()  # an XEmbed tray (trayer, stalonetray, i3bar…) owns _NET_SYSTEM_TRAY_S<screen>
    if xembed:
        info.update(tray="XEmbed system tray", tray_kind="xembed", xembed_selection=xembed)
    address = _session_bus_address()
    info["session_bus"] = address
    if not address:
        problems.append("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS unset): no "
                        + ("" if xembed else "tray icon or ") + "notifications can be shown"
                        + (" (the XEmbed tray icon works)" if xembed else "")
                        + " — log in to a desktop session (or start one with dbus-run-session)")
        return info, problems
    try:
        from jeepney import DBusAddress, Properties, new_method_call
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        problems.append("cannot check the system tray and notifications: the 'jeepney' package is missing — "
                        "reinstall hermes-tray")
        return info, problems
    try:
        conn = open_dbus_connection(bus=address)
    except Exception as exc:  # boundary: a diagnostic: the bus, whatever it raises
        problems.append(f"cannot connect to the D-Bus session bus at {address} ({exc}): start your desktop "
                        "session's bus, or fix DBUS_SESSION_BUS_ADDRESS")
        return info, problems
    try:
        def ask(msg):
            reply = conn.send_and_get_reply(msg, timeout=DBUS_TIMEOUT)
            if reply.header.message_type.name == "error":
                raise RuntimeError(reply.body[0] if reply.body else "D-Bus error")
            return reply.body

        has_watcher = bool(ask(message_bus.NameHasOwner(SNI_WATCHER))[0])
        host = None
        if has_watcher:
            watcher = DBusAddress("/StatusNotifierWatcher", bus_name=SNI_WATCHER, interface=SNI_WATCHER)
            try:
                host = bool(ask(Properties(watcher).get("IsStatusNotifierHostRegistered"))[0][1])
            except Exception:  # boundary: a diagnostic: the watcher, whatever it answers
                host = None
        if has_watcher and host is not False:
            info["tray"] = "StatusNotifierItem host" + ("" if host else " (host state unknown)")
            info["tray_kind"] = "sni"
        elif not xembed:  # only no tray of any kind is a problem: the status window stands in for the icon
            info["tray"] = None
            problems.append(
                "no system tray of any kind: no StatusNotifierItem host on the session bus"
                + (" (a watcher runs, but no host has registered)" if has_watcher else "")
                + " and no XEmbed tray on the X display — enable your desktop's tray / AppIndicator extension "
                "(GNOME: 'AppIndicator and KStatusNotifierItem Support') or run one (e.g. stalonetray); until "
                "then the tray shows a small status window. Notifications and the CLI work without it")
        owned = bool(ask(message_bus.NameHasOwner(NOTIFICATIONS))[0])
        activatable = NOTIFICATIONS in ask(message_bus.ListActivatableNames())[0]
        if owned or activatable:
            notif = DBusAddress("/org/freedesktop/Notifications", bus_name=NOTIFICATIONS, interface=NOTIFICATIONS)
            try:
                name, vendor, version, spec = ask(new_method_call(notif, "GetServerInformation"))
                caps = list(ask(new_method_call(notif, "GetCapabilities"))[0])
                info["notifications"] = {"server": name, "vendor": vendor, "version": version, "spec": spec,
                                         "capabilities": caps}
                if "actions" not in caps:
                    problems.append(f"the notification server ({name}) shows no action buttons: Resume/Skip "
                                    "will be in the tray menu only — use a server with 'actions' for one-click")
            except Exception as exc:  # boundary: a diagnostic: the server, whatever it answers
                problems.append(f"the notification server does not answer ({exc}): restart it or your session")
        else:
            problems.append("no notification server on the session bus: interrupted turns will only show in the "
                            "tray menu — install/start one (e.g. dunst, mako, or your desktop's own)")
    except Exception as exc:  # boundary: a diagnostic: the bus, whatever it answers
        problems.append(f"D-Bus session bus did not answer ({exc}): restart your desktop session")
    finally:
        try:
            conn.close()
        except Exception:  # boundary: a diagnostic: closing a broken connection
            pass
    return info, problems


def check_hermes(settings, *, probe: bool) -> tuple[dict[str, Any], list[str]]:
    from hermes_tray_core import HermesNotFound, find_hermes, probe_capabilities

    info: dict[str, Any] = {"installed": False}
    try:
        install = find_hermes(settings.hermes_command)
    except HermesNotFound as exc:
        return info, [exc.user_message]
    except Exception as exc:  # boundary: a diagnostic never fails the report
        return info, [f"cannot look for Hermes ({exc}): set hermes_command in the tray settings"]
    info.update(installed=True, command=list(install.argv), python=install.python, source=install.source)
    if not probe:
        return info, []
    caps = probe_capabilities(install)
    from hermes_tray.demo import hermes_label

    info.update(version=caps.version, distribution=caps.distribution,
                label=hermes_label(caps.version, caps.distribution), auto_continue=caps.auto_continue,
                detail=caps.detail)
    if caps.auto_continue is None:
        return info, [f"cannot tell what this Hermes can do: {caps.detail}"]
    return info, []


def reconcile_hermes(hermes: dict[str, Any], problems: list[str], home_rows: list[dict[str, Any]]) -> list[str]:
    """One answer about Hermes: the running ones that serve a home are named (``hermes["running"]``), and a
    missing ``hermes`` command is a problem only for the homes none serves (a resume there must start Hermes)."""
    running = [{"pid": r["running_backend"]["pid"], "home": r["path"]} for r in home_rows
               if isinstance(r.get("running_backend"), dict) and r["running_backend"].get("usable")]
    hermes["running"] = running
    if hermes.get("installed") or not running:
        return problems
    served = {r["home"] for r in running}
    unserved = [r["path"] for r in home_rows if r.get("exists") and r["path"] not in served]
    if not unserved:
        return []  # every home's resumes go to the running Hermes: nothing needs the command
    return [f"{', '.join(unserved)}: no running Hermes serves {'it' if len(unserved) == 1 else 'them'} and no "
            "'hermes' command was found to start one, so resumes there cannot run — install Hermes Agent, or set "
            "hermes_command in the tray settings"]


def check_running_backend(home: Any, processes: Any, *, probe: bool = True) -> dict[str, Any]:
    """Which Hermes serves ``home`` — the gateway that owns its sessions, a ``hermes dashboard``, or none — its
    version and capabilities, and where a resume there would run (never a token)."""
    from hermes_tray_core import who_serves

    try:
        served = who_serves(home, processes, versions=probe)
    except Exception as exc:  # boundary: a diagnostic never fails the report
        return {"usable": False, "kind": None, "reason": f"cannot look for a running Hermes ({type(exc).__name__})",
                "line": f"unknown (cannot look for a running Hermes: {type(exc).__name__})"}
    return {**served.to_json(), "line": served.line()}


def check_marker_writes(home: Any) -> tuple[dict[str, Any], str | None]:
    """Can the tray's writes to this home's marker file go in by atomic exchange (core.markers.store)? Without
    one they fall back to compare-and-replace, which a concurrent Hermes write can still defeat."""
    from hermes_tray_core import exchange_support, write_problem

    cannot = write_problem(home)
    if cannot:  # a read-only home: nothing can be written there, whatever the file system could do
        return ({"exchange": None, "read_only": True, "detail": cannot},
                f"{home} is read-only: {cannot}. Its turns cannot be resumed or skipped until it can be written")
    ok, detail = exchange_support(home)
    info = {"exchange": ok, "detail": detail}
    if ok:
        return info, None
    return info, (f"{home}: the tray's writes to Hermes' marker file cannot use an atomic exchange here: "
                  "they fall back to compare-and-replace, which a Hermes write at the same moment can still "
                  "undo (a marker lost, or a skipped turn back) — keep the Hermes home on a local filesystem "
                  "(ext4, btrfs, xfs, tmpfs, APFS, NTFS)")


def _paths() -> dict[str, str]:
    from hermes_tray_core import cache_dir, ledger_db, log_dir, settings_file, state_dir

    return {
        "settings": str(settings_file()),
        "state": str(state_dir()),
        "ledger": str(ledger_db()),
        "cache": str(cache_dir()),
        "logs": str(log_dir()),
    }


def run(args: argparse.Namespace) -> int:
    from hermes_tray.cli.common import print_json, selected_homes
    from hermes_tray_core import Scanner, SettingsError, TraySettings, load_settings

    problems: list[str] = []
    try:
        settings = load_settings()
        settings_error = None
    except SettingsError as exc:
        settings, settings_error = TraySettings(), str(exc)
        problems.append(f"tray settings are invalid ({exc}); defaults are used — fix the file or run "
                        "`hermes-tray config set KEY VALUE`")
    homes = selected_homes(args, settings=settings)
    result = Scanner(homes, read_progress=False).scan()  # neither shows how far a turn got
    home_rows = []
    processes = None
    for h in result.homes:
        row = h.to_json()
        if h.exists and h.reachable:
            if processes is None:
                from hermes_tray_core import HermesProcesses

                processes = HermesProcesses.now()
            row["running_backend"] = check_running_backend(h.path, processes, probe=not args.no_probe)
            row["marker_writes"], problem = check_marker_writes(h.path)
            if problem:
                problems.append(problem)
        row["turns"] = dict(Counter(t.verdict for t in result.turns if t.home == h.path))
        home_rows.append(row)
        problems.extend(f"{h.path}: {u}" for u in h.unsupported)
        # A home the user named (tray settings' homes, --home) that is gone, or any home that cannot be read,
        # is a problem; Hermes' own default home that does not exist yet is not.
        if h.exists or h.origin in ("settings", "cli") or h.markers == "unreadable":
            problems.extend(p if p.startswith(str(h.path)) else f"{h.path}: {p}" for p in h.problems)
    if not any(h.exists for h in result.homes):
        problems.append("no Hermes home found (looked at " + ", ".join(str(h.path) for h in result.homes)
                        + "): run Hermes once, set HERMES_HOME, or pass --home PATH")
    hermes, hermes_problems = check_hermes(settings, probe=not args.no_probe)
    problems.extend(reconcile_hermes(hermes, hermes_problems, home_rows))
    desktop, desktop_problems = check_desktop()
    problems.extend(desktop_problems)
    report = {"ok": not problems, "paths": _paths(), "settings": {**settings.to_dict(), "error": settings_error},
              "homes": home_rows, "hermes": hermes, "desktop": desktop, "problems": problems}
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return 0 if not problems else 1


def render(report: dict[str, Any]) -> str:
    out = ["Homes:"]
    for h in report["homes"]:
        if not h["exists"]:
            out.append(f"  {h['path']} ({h['profile']}): does not exist")
            continue
        ac = h["auto_continue"]
        turns = ", ".join(f"{n} {v}" for v, n in sorted(h["turns"].items())) or "none"
        out.append(f"  {h['path']} ({h['profile']}, {h['origin']})")
        out.append(f"    markers: {h['markers']} ({h['marker_count']}); interrupted turns: {turns}")
        out.append(f"    auto-continue: {'on' if ac['enabled'] else 'off'}, {ac['freshness_minutes']} min window, "
                   f"{ac['max_attempts']} attempts; state.db: {h['state_db']}; "
                   f"WebUI journals: {h['webui_sessions']}")
        if ac.get("managed"):
            out.append(f"    set by the administrator's managed config (wins over config.yaml): "
                       f"{', '.join(ac['managed'])}")
        mw = h.get("marker_writes")
        if isinstance(mw, dict) and mw.get("read_only"):
            out.append("    marker writes: none, the home is read-only")
        elif isinstance(mw, dict):
            out.append("    marker writes: " + ("atomic exchange" if mw.get("exchange") else  # the call: --json
                                               "compare-and-replace only (this filesystem cannot swap two files)"))
        rb = h.get("running_backend")
        if isinstance(rb, dict) and rb.get("line"):
            out.append(f"    served by: {rb['line']}")
    hermes = report["hermes"]
    out.append("Hermes:")
    for r in hermes.get("running") or ():
        out.append(f"  running: pid {r['pid']}, serving {r['home']}")
    if hermes.get("installed"):
        out.append(f"  command: {' '.join(hermes['command'])}, from {hermes['source']}")
        if "version" in hermes:
            out.append(f"  version: {hermes.get('label') or 'unknown'}; {hermes.get('detail')}")
    elif hermes.get("running"):
        out.append("  command: none found; resumes run in the running Hermes")
    else:
        out.append("  not found")
    d = report["desktop"]
    out.append("Desktop:")
    out.append(f"  system tray: {d.get('tray') or 'not available'}")
    qt = d.get("qt_platform")
    if isinstance(qt, dict):
        names = {"xcb": "X11", "wayland": "Wayland"}
        tried = " or ".join(names.get(p, p) for p in qt["platforms"])
        out.append(f"  Qt's libraries for {tried}: " + ("all there" if qt["ok"] else
                                                         f"missing {', '.join(qt['missing']) or 'something'}"))
    n = d.get("notifications")
    if isinstance(n, dict):
        out.append(f"  notifications: {n['server']} {n['version']} ({', '.join(n['capabilities']) or 'no capabilities'})")
    else:
        out.append(f"  notifications: {n or 'not available'}")
    out.append("Paths:")
    out.extend(f"  {k}: {v}" for k, v in report["paths"].items())
    out.append("")
    if report["problems"]:
        n = len(report["problems"])
        out.append(f"{n} {'problem' if n == 1 else 'problems'}:")
        out.extend(f"  - {p}" for p in report["problems"])
    else:
        out.append("everything looks fine")
    return "\n".join(out)
