"""One test desktop per kind of tray per test session (``tests/desktop/session.py``: Xvfb, a private
session bus, python-dbusmock's notification server, and trayer or a StatusNotifierWatcher).

The tray runs as a subprocess of the installed product with the desktop's environment and the demo
home's private tray dirs. A desktop that cannot start fails the test with the reason: ``./tests/run``
installs what it needs, so on a machine set up by it no end-to-end test skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.desktop.session import Desktop, DesktopUnavailable, TrayKind
from tests.support.product import product_env, tray_argv

ROOT = Path(__file__).resolve().parents[2]


def _desktop(kind: TrayKind):
    try:
        desktop = Desktop(kind).start()
    except DesktopUnavailable as exc:
        pytest.fail(f"the test desktop ({kind.value} tray) did not start: {exc}")
    return desktop


@pytest.fixture(scope="session")
def desktop():
    """XEmbed tray (trayer): the icon is drawn, so screenshots show it."""
    d = _desktop(TrayKind.XEMBED)
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def sni_desktop():
    """StatusNotifierItem tray: the menu is exported over D-Bus and can be clicked by label."""
    d = _desktop(TrayKind.SNI)
    try:
        yield d
    finally:
        d.stop()


class Tray:
    """A running ``hermes-tray`` with its event stream (``HERMES_TRAY_EVENTS``)."""

    def __init__(self, proc: subprocess.Popen, events: Path) -> None:
        self.proc = proc
        self.events_file = events

    def events(self) -> list[dict]:
        try:
            text = self.events_file.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(x) for x in text.splitlines() if x.strip()]

    def wait_event(self, pred, timeout: float = 20.0, what: str = "event") -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for ev in self.events():
                if pred(ev):
                    return ev
            assert self.proc.poll() is None, f"tray exited ({self.proc.returncode}) while waiting for {what}"
            time.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout} s; events: {self.events()[-5:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="session")
def dunst_like_desktop():
    """A StatusNotifierItem tray and a notification server that leaves a note up after one of its actions ran,
    as dunst's action menu does (``ActionInvoked`` without ``NotificationClosed``)."""
    try:
        d = Desktop(TrayKind.SNI, action_closes=False).start()
    except DesktopUnavailable as exc:
        pytest.fail(f"the test desktop (dunst-like notifications) did not start: {exc}")
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def trayless_desktop():
    """No tray host at all (GNOME without the AppIndicator extension, kiosks)."""
    d = _desktop(TrayKind.NONE)
    try:
        yield d
    finally:
        d.stop()


def start_tray(desktop: Desktop, demo, tmp_path: Path, *extra_env: tuple[str, str], args: tuple[str, ...] = ()) -> Tray:
    events = tmp_path / f"events-{time.monotonic_ns()}.jsonl"
    env = product_env({**os.environ, **desktop.env, **demo.env, "HERMES_TRAY_EVENTS": str(events), **dict(extra_env)})
    proc = subprocess.Popen(tray_argv("tray", "--home", demo.home, *args), env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "tray.stderr", "ab"))  # noqa: SIM115
    return Tray(proc, events)


def wait_for(pred, timeout: float = 20.0, what: str = "condition", seen=None):
    """``pred``'s first truthy value within ``timeout``; on timeout, ``seen()`` (what was there instead)
    goes into the message, so a failure says what the user saw."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f"; seen instead: {seen()}" if seen else ""))
