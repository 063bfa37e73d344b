"""The test desktop: a throwaway X desktop with a session bus, a notification server and a tray.

Built from well-kept parts, owned by this repository (no outside tool):

* an X server: ``Xvfb -displayfd`` (the first free display, so desktops can run side by side);
* a private session bus: ``dbus-daemon`` with its own config, which never activates services, so nothing
  runs on it that the desktop did not start;
* notifications: python-dbusmock's ``notification_daemon`` extended by ``dbusmock_notifications.py``
  (strict ``Notify`` signature, declared signals, ``actions``; every notification and every close recorded;
  with ``action_closes=False`` an action leaves its note up, as dunst's action menu does);
* the tray, by kind: ``xembed`` — ``trayer``, an XEmbed tray drawn along the top, so the icon shows in
  screenshots; ``sni`` — a StatusNotifierWatcher with a host, python-dbusmock with
  ``dbusmock_sni_watcher.py`` (KDE, GNOME with AppIndicator); ``none`` — no tray at all.

dbusmock runs under the system Python (Debian's python3-dbusmock, which has dbus-python), as its own
process; the test side talks D-Bus with jeepney. ``Desktop`` works with or without pytest:
``tests/desktop/conftest.py`` has the fixtures and ``docs/screenshots/make_screenshots.py`` starts one
by hand.
"""

from __future__ import annotations

import ctypes
import enum
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"
REACTION_S = 0.5  # the least time from a note appearing to a press on it (click_action)
NOTIFICATIONS = "org.freedesktop.Notifications"
NOTIFICATIONS_PATH = "/org/freedesktop/Notifications"
WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
MOCK_IFACE = "org.freedesktop.DBus.Mock"
SERVER_IFACE = "org.hermes_tray.test.NotificationServer"  # what a person does to notes (dbusmock_notifications.py)
ITEM_IFACE = "org.kde.StatusNotifierItem"
DBUSMENU = "com.canonical.dbusmenu"
#: what the desktop needs, by Debian package (tests/run installs them)
PACKAGES = ("xvfb", "trayer", "scrot", "xdotool", "x11-utils", "dbus-daemon", "python3-dbusmock")


class TrayKind(enum.Enum):
    XEMBED = "xembed"
    SNI = "sni"
    NONE = "none"


class DesktopUnavailable(RuntimeError):
    """A part of the desktop is not installed (tests/run installs it) or did not start."""


def missing_parts() -> list[str]:
    """What this machine lacks for a desktop (empty when everything is there)."""
    out = [tool for tool in ("Xvfb", "dbus-daemon", "trayer", "scrot", "xdotool", "xwininfo", "xprop")
           if shutil.which(tool) is None]
    if not os.access(SYSTEM_PYTHON, os.X_OK) or subprocess.run(
            [SYSTEM_PYTHON, "-c", "import dbusmock, dbus"], capture_output=True).returncode != 0:
        out.append("python3-dbusmock (under /usr/bin/python3)")
    return out


class Desktop:
    """One throwaway desktop. ``start()`` brings it up, ``stop()`` stops exactly what it started."""

    def __init__(self, tray: TrayKind = TrayKind.XEMBED, *, size: str = "1280x800x24",
                 action_closes: bool = True) -> None:
        """``action_closes``: the notification server closes a note when one of its actions runs (GNOME, KDE, a
        click in dunst); False: the note stays up (dunst's action menu)."""
        self.tray = tray
        self.size = size
        self.action_closes = action_closes
        self.dir = Path(tempfile.mkdtemp(prefix="hermes-tray-desktop-"))
        self.record = self.dir / "notifications.jsonl"
        self.env: dict[str, str] = {}
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._bus: Any = None

    # ── start / stop ──────────────────────────────────────────────────────────────────────────────

    def start(self) -> Desktop:
        missing = missing_parts()
        if missing:
            raise DesktopUnavailable(f"the test desktop needs {', '.join(missing)} (./tests/run installs them)")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, **kw)
        log.close()
        self._procs.append((name, proc))
        return proc

    def _wait(self, what: str, ready, proc: subprocess.Popen | None = None, timeout: float = 15.0) -> None:
        end = time.monotonic() + timeout
        while not ready():
            if proc is not None and proc.poll() is not None:
                raise DesktopUnavailable(f"{what} exited ({proc.returncode}): {self.log_tail(what)}")
            if time.monotonic() > end:
                raise DesktopUnavailable(f"{what} did not come up in {timeout:.0f} s: {self.log_tail(what)}")
            time.sleep(0.02)

    def log_tail(self, name: str) -> str:
        try:
            return (self.dir / f"{name}.log").read_text(errors="replace")[-800:]
        except OSError:
            return ""

    def _start(self) -> None:
        base = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
        r, w = os.pipe()
        xvfb = self._spawn("xvfb", ["Xvfb", "-displayfd", str(w), "-screen", "0", self.size, "-nolisten", "tcp"],
                           env=base, pass_fds=(w,))
        os.close(w)
        display = b""
        end = time.monotonic() + 15
        while not display.endswith(b"\n"):
            if time.monotonic() > end or xvfb.poll() is not None:
                raise DesktopUnavailable(f"Xvfb did not start: {self.log_tail('xvfb')}")
            chunk = os.read(r, 16)
            if not chunk:
                break
            display += chunk
        os.close(r)
        self.env["DISPLAY"] = f":{display.decode().strip()}"
        self._wait("xvfb", self._x_answers, xvfb)  # a client can connect (not only "ready" on the fd)

        bus = self.dir / "bus"
        (self.dir / "bus.conf").write_text(
            "<busconfig><type>session</type>"
            f"<listen>unix:path={bus}</listen><auth>EXTERNAL</auth>"
            '<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>'
            '<allow own="*"/></policy></busconfig>', encoding="utf-8")
        dbus = self._spawn("dbus", ["dbus-daemon", f"--config-file={self.dir / 'bus.conf'}", "--nofork", "--nopidfile"],
                           env=base)
        self._wait("dbus", bus.exists, dbus)
        self.env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={bus}"
        runtime = self.dir / "runtime"
        runtime.mkdir(mode=0o700)
        self.env.update(QT_QPA_PLATFORM="xcb", XDG_RUNTIME_DIR=str(runtime))
        child = {**base, **self.env}

        mock = [SYSTEM_PYTHON, "-m", "dbusmock", "--session", "--template"]
        notify = self._spawn("notifications", [*mock, str(HERE / "dbusmock_notifications.py"), "--parameters",
                                               json.dumps({"record": str(self.record),
                                                           "action_closes": self.action_closes})], env=child)
        self._wait("notifications", self._notifications_ready, notify)
        if self.tray is TrayKind.SNI:
            watcher = self._spawn("sni-watcher", [*mock, str(HERE / "dbusmock_sni_watcher.py")], env=child)
            self._wait("sni-watcher", self._watcher_ready, watcher)
        elif self.tray is TrayKind.XEMBED:
            argv = ["trayer", "--edge", "top", "--align", "right", "--widthtype", "percent", "--width", "100",
                    "--height", "28", "--SetDockType", "true", "--transparent", "true", "--alpha", "0",
                    "--tint", "0x3a4250"]
            for attempt in range(3):  # GTK gives up at once when the X server is busy accepting another client
                trayer = self._spawn("trayer", argv, env=child)
                try:
                    self._wait("trayer", self._xembed_tray_owned, trayer)
                    break
                except DesktopUnavailable:
                    if trayer.poll() is None or attempt == 2:
                        raise
                    self._procs.remove(("trayer", trayer))
                    time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM what this desktop started (its own process groups), in reverse order; SIGKILL after 3 s."""
        if self._bus is not None:
            try:
                self._bus.close()
            except Exception:
                pass
            self._bus = None
        for _name, proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        self._procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def end_x(self) -> None:
        """The X server goes away under everything on this desktop (a logout, a crashed display server)."""
        for name, proc in self._procs:
            if name == "xvfb" and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> Desktop:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ── D-Bus from the test side (jeepney) ────────────────────────────────────────────────────────

    def bus(self) -> Any:
        if self._bus is None:
            from jeepney.io.blocking import open_dbus_connection

            self._bus = open_dbus_connection(self.env["DBUS_SESSION_BUS_ADDRESS"])
        return self._bus

    def call(self, dest: str, path: str, iface: str, member: str, signature: str | None = None,
             body: tuple = (), timeout: float = 10.0) -> tuple:
        from jeepney import MessageType, new_method_call
        from jeepney.wrappers import DBusAddress

        msg = new_method_call(DBusAddress(path, bus_name=dest, interface=iface), member, signature, body)
        reply = self.bus().send_and_get_reply(msg, timeout=timeout)
        if reply.header.message_type == MessageType.error:
            raise RuntimeError(f"{dest} {iface}.{member}: {reply.body[0] if reply.body else 'error'}")
        return reply.body

    def _has_owner(self, name: str) -> bool:
        try:
            return bool(self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "NameHasOwner", "s", (name,))[0])
        except Exception:
            return False

    def _notifications_ready(self) -> bool:
        """The template is loaded (dbusmock owns the name before it loads it)."""
        try:
            return "actions" in self.call(NOTIFICATIONS, NOTIFICATIONS_PATH, NOTIFICATIONS, "GetCapabilities")[0]
        except Exception:
            return False

    def _watcher_ready(self) -> bool:
        try:
            (_sig, value), = self.call(WATCHER, WATCHER_PATH, "org.freedesktop.DBus.Properties", "Get", "ss",
                                       (WATCHER, "IsStatusNotifierHostRegistered"))
            return bool(value)
        except Exception:
            return False

    def connection_pid(self, unique_name: str) -> int:
        return int(self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "GetConnectionUnixProcessID", "s", (unique_name,))[0])

    # ── notifications ─────────────────────────────────────────────────────────────────────────────

    def _records(self) -> list[dict]:
        try:
            text = self.record.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def notifications(self) -> list[dict]:
        """Every ``Notify`` the server accepted, in order: ``{id, app_name, summary, body, actions: {key:
        label}, hints, replaces_id, expire_timeout, sender, time}``."""
        return [r for r in self._records() if "id" in r]

    def rejected(self) -> list[dict]:
        """``Notify`` calls refused for their signature (a real daemon refuses them too)."""
        return [r for r in self._records() if "rejected" in r]

    def closes(self) -> list[dict]:
        """Every close, in order: ``{closed: id, reason, by: "app" (CloseNotification) | "user", was_open}``."""
        return [r for r in self._records() if "closed" in r]

    def on_screen(self) -> list[int]:
        """The notes still up."""
        return [int(n) for n in self.call(NOTIFICATIONS, NOTIFICATIONS_PATH, SERVER_IFACE, "OnScreen")[0]]

    def click_action(self, nid: int, key: str) -> None:
        """The user presses button ``key`` (``default``: the notification's body): the server sends ActionInvoked,
        then closes the note (NotificationClosed(id, 2)) unless it asked to stay (``resident``) or the server leaves
        notes up after an action (``action_closes=False``)."""
        latest = [n for n in self.notifications() if n["id"] == nid][-1:]
        if not latest or (key not in latest[0]["actions"]):
            raise KeyError(f"notification {nid} has no action {key!r}")
        # No person presses a button within half a second of it appearing; a test can, and then races the
        # tray reading the server's answer to Notify: desktop-notifier links the note to its id only then and
        # drops an ActionInvoked that comes first (seen under load: the press did nothing).
        time.sleep(max(0.0, REACTION_S - (time.time() - latest[0]["time"])))
        self.call(NOTIFICATIONS, NOTIFICATIONS_PATH, SERVER_IFACE, "Press", "us", (nid, key))

    def close(self, nid: int) -> None:
        """The user dismisses the notification (NotificationClosed reason 2)."""
        self.call(NOTIFICATIONS, NOTIFICATIONS_PATH, SERVER_IFACE, "Dismiss", "u", (nid,))

    # ── the tray ──────────────────────────────────────────────────────────────────────────────────

    def _x_answers(self) -> bool:
        try:
            x = ctypes.CDLL("libX11.so.6")
        except OSError:
            return True  # cannot check here: the clients will say
        x.XOpenDisplay.argtypes, x.XOpenDisplay.restype = [ctypes.c_char_p], ctypes.c_void_p
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        dpy = x.XOpenDisplay(self.env["DISPLAY"].encode())
        if not dpy:
            return False
        x.XCloseDisplay(dpy)
        return True

    def _xembed_tray_owned(self) -> bool:
        try:
            x = ctypes.CDLL("libX11.so.6")
        except OSError:
            return False
        x.XOpenDisplay.argtypes, x.XOpenDisplay.restype = [ctypes.c_char_p], ctypes.c_void_p
        x.XInternAtom.argtypes, x.XInternAtom.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], ctypes.c_ulong
        x.XGetSelectionOwner.argtypes, x.XGetSelectionOwner.restype = [ctypes.c_void_p, ctypes.c_ulong], ctypes.c_ulong
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        dpy = x.XOpenDisplay(self.env["DISPLAY"].encode())
        if not dpy:
            return False
        try:
            return bool(x.XGetSelectionOwner(dpy, x.XInternAtom(dpy, b"_NET_SYSTEM_TRAY_S0", 0)))
        finally:
            x.XCloseDisplay(dpy)

    def x(self, tool: str, *args: object) -> str:
        """Run an X client (xdotool, xwininfo, xprop) on this desktop; its output."""
        return subprocess.run([tool, *map(str, args)], env={**os.environ, **self.env}, check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def xdotool(self, *args: object) -> str:
        return self.x("xdotool", *args)

    def shot(self, path: Path | str) -> None:
        """A screenshot of the whole screen (PNG)."""
        subprocess.run(["scrot", "-o", str(path)], env={**os.environ, **self.env}, check=True, capture_output=True,
                       timeout=30)

    def window_pid(self, wid: int) -> int | None:
        out = self.x("xprop", "-id", wid, "_NET_WM_PID")
        value = out.rsplit("=", 1)[-1].strip()
        return int(value) if value.isdigit() else None

    def xembed_icons(self) -> list[dict]:
        """The windows embedded in the XEmbed tray (trayer): ``{window, pid, geometry: (x, y, w, h)}``."""
        trayers = [int(w) for w in self.xdotool("search", "--class", "trayer").split()] if self.tray is TrayKind.XEMBED else []
        out = []
        for top in trayers:
            for line in self.x("xwininfo", "-tree", "-id", top).splitlines():
                line = line.strip()
                if not line.startswith("0x"):
                    continue
                wid = int(line.split()[0], 16)
                pid = self.window_pid(wid)
                if pid is None:
                    continue
                geo = self.x("xwininfo", "-id", wid)
                fields = dict(part.strip().split(":", 1) for part in geo.splitlines() if ":" in part)
                try:
                    box = tuple(int(fields[k].strip()) for k in ("Absolute upper-left X", "Absolute upper-left Y",
                                                                  "Width", "Height"))
                except (KeyError, ValueError):
                    box = None
                out.append({"window": wid, "pid": pid, "geometry": box})
        return out

    def tray_items(self) -> list[dict]:
        """StatusNotifierItems registered with the watcher: ``{item, pid, Id, Title, Status, IconName, ToolTip,
        Menu, menu: [{id, label, enabled}]}`` (``sni`` desktops)."""
        (_sig, items), = self.call(WATCHER, WATCHER_PATH, "org.freedesktop.DBus.Properties", "Get", "ss",
                                   (WATCHER, "RegisteredStatusNotifierItems"))
        out = []
        for item in items:
            name, _, path = item.partition("/")
            (props,) = self.call(name, "/" + path, "org.freedesktop.DBus.Properties", "GetAll", "s", (ITEM_IFACE,))
            plain = {k: _value(v) for k, v in props.items()}
            menu: list[dict] = []
            if plain.get("Menu"):
                _rev, layout = self.call(name, plain["Menu"], DBUSMENU, "GetLayout", "iias", (0, -1, []))
                stack = list(layout[2])
                while stack:
                    _sig, (mid, mprops, kids) = stack.pop(0)
                    mp = {k: _value(v) for k, v in mprops.items()}
                    if mp.get("type") != "separator":
                        menu.append({"id": int(mid), "label": str(mp.get("label", "")).replace("&", ""),
                                     "enabled": bool(mp.get("enabled", True))})
                    stack[:0] = list(kids)
            out.append({"item": item, "pid": self.connection_pid(name), **plain, "menu": menu})
        return out

    def tray_activate(self, label: str) -> None:
        """Click the tray menu entry ``label`` over dbusmenu (``sni`` desktops)."""
        for item in self.tray_items():
            for entry in item["menu"]:
                if entry["label"] == label:
                    name = item["item"].partition("/")[0]
                    self.call(name, item["Menu"], DBUSMENU, "Event", "isvu",
                              (entry["id"], "clicked", ("i", 0), 0))
                    return
        raise KeyError(f"no tray menu entry labelled {label!r}")


def _value(variant: tuple[str, Any]) -> Any:
    """A jeepney variant ``(signature, value)`` as a JSON value (byte arrays summarised)."""
    return _json(variant[1])


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value
