"""One virtual desktop (``../shared/tools/desktop-session``) per test session, as in its examples.

Skips with the reason when the tool or its packages are not there. The tray runs as a subprocess
with the desktop's environment and the demo home's private tray dirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DS_CANDIDATES = [
    os.environ.get("DESKTOP_SESSION_TOOL", ""),
    str(ROOT.parent / "shared" / "tools" / "desktop-session"),
    shutil.which("desktop-session") or "",
]
DS = next((c for c in DS_CANDIDATES if c and os.access(c, os.X_OK)), None)


class Desktop:
    def __init__(self, state_dir: str) -> None:
        lines = Path(state_dir, "env").read_text().splitlines()
        self.dir = state_dir
        self.env = {**os.environ, **dict(line.split("=", 1) for line in lines if "=" in line)}

    def ds(self, *args: object) -> str:
        return subprocess.run([DS, *map(str, args)], env=self.env, check=True, capture_output=True, text=True).stdout

    def notifications(self) -> list[dict]:
        return [json.loads(line) for line in self.ds("notifications").splitlines() if line.strip()]

    def click_action(self, nid: int, key: str) -> None:
        self.ds("click-action", nid, key)

    def shot(self, path: Path) -> None:
        self.ds("shot", path)

    def xdotool(self, *args: object) -> str:
        return subprocess.run(["xdotool", *map(str, args)], env=self.env, check=True, capture_output=True,
                              text=True).stdout


def _start_desktop(tmp_path_factory, *extra: str):
    if DS is None:
        pytest.skip("desktop-session tool not found (set DESKTOP_SESSION_TOOL)")
    ready = tmp_path_factory.mktemp("desktop") / "dir"
    log = tmp_path_factory.mktemp("desktop-log") / "desktop-session.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [DS, "run", *extra, "--", "sh", "-c",
             f'echo "$DESKTOP_SESSION_DIR" >{ready}.tmp && mv {ready}.tmp {ready} && exec sleep infinity'],
            stdout=out, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180  # the first run may apt-get install packages
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip(f"desktop-session could not start: {log.read_text(errors='replace')[-600:]}")
        time.sleep(0.05)
    return proc, Desktop(ready.read_text().strip())


def _stop_desktop(proc: subprocess.Popen) -> None:
    proc.terminate()  # SIGTERM: desktop-session stops only what it started
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def desktop(tmp_path_factory):
    """XEmbed tray (trayer): the icon is drawn, so screenshots show it."""
    proc, d = _start_desktop(tmp_path_factory)
    try:
        yield d
    finally:
        _stop_desktop(proc)


@pytest.fixture(scope="session")
def sni_desktop(tmp_path_factory):
    """StatusNotifierItem tray: the menu is exported over D-Bus and can be clicked by label."""
    proc, d = _start_desktop(tmp_path_factory, "--tray", "sni")
    try:
        yield d
    finally:
        _stop_desktop(proc)


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
def trayless_desktop(tmp_path_factory):
    """No tray host at all (GNOME without the AppIndicator extension, kiosks)."""
    proc, d = _start_desktop(tmp_path_factory, "--tray", "none")
    try:
        yield d
    finally:
        _stop_desktop(proc)


def start_tray(desktop: Desktop, demo, tmp_path: Path, *extra_env: tuple[str, str], args: tuple[str, ...] = ()) -> Tray:
    events = tmp_path / f"events-{time.monotonic_ns()}.jsonl"
    env = {**desktop.env, **demo.env, "HERMES_TRAY_EVENTS": str(events), **dict(extra_env)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tray", "tray", "--home", str(demo.home), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "tray.stderr", "ab"))  # noqa: SIM115
    return Tray(proc, events)


def wait_for(pred, timeout: float = 20.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
