"""Every way a user's tray ends, while a continuation runs in a Hermes the tray started: the turn goes on to its
end, once, and that Hermes then ends (nothing left behind). Crash-only: a polite quit and a crash leave the turn
the same way.

The ways: Quit from the icon's menu (XEmbed: the Qt menu on trayer, right click then the entry, with xdotool),
the status window's Quit (no tray; Alt+Q), a second launch told to quit (``hermes-tray quit``), SIGTERM, SIGHUP,
SIGINT, SIGQUIT, SIGKILL. The real Hermes and the SNI menu, the X server going away and SIGKILLs at chosen
moments: tests/integration/test_real_crash_only.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from hermes_tray.demo import sim_state
from tests.e2e.conftest import start_tray, wait_for
from tests.support.product import product_env, tray_argv
from tests.support.sim_homes import pid_running, read_turns

pytest.importorskip("desktop_notifier")
pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals, X11")

WAYS = ["menu", "status-window", "hermes-tray-quit", "SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL"]


@pytest.fixture
def demo(tmp_path, monkeypatch):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, continuation_seconds=8.0)
    for k, v in d.env.items():
        monkeypatch.setenv(k, v)
    yield d
    d.cleanup()


def _gateways(home) -> set[int]:
    """The simulated Hermes processes serving ``home`` (the demo's own backend excluded by the caller)."""
    import psutil

    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            argv = p.info["cmdline"] or []
            if any(a in ("tui_gateway.entry", "hermes_tray.demo.sim_backend") for a in argv) and os.path.realpath(p.environ().get("HERMES_HOME", "")) \
                    == os.path.realpath(home):
                out.add(p.info["pid"])
        except (psutil.Error, OSError):
            continue
    return out


def _continuations(home) -> list[dict]:
    return [t for t in read_turns(home) if t.get("kind") != "standalone"]


def _quit(way: str, tray, desktop, demo) -> None:
    if way == "menu":
        (icon,) = wait_for(lambda: [i for i in desktop.xembed_icons() if i["pid"] == tray.proc.pid], 20, "the icon")
        x, y, w, h = icon["geometry"]
        desktop.xdotool("mousemove", x + w // 2, y + h // 2, "click", "3")
        time.sleep(1.0)  # open while the continuation's elapsed time ticks
        desktop.xdotool("key", "Up", "Return")  # the last entry: Quit
    elif way == "status-window":
        wid = wait_for(lambda: desktop.xdotool("search", "--onlyvisible", "--name", "^Hermes Tray$").split(), 20,
                       "the status window")[-1]
        desktop.xdotool("windowfocus", "--sync", wid, "key", "alt+q")
    elif way == "hermes-tray-quit":
        env = product_env({**os.environ, **desktop.env, **demo.env})
        done = subprocess.run(tray_argv("quit"), env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hermes-tray quit; anything it was continuing goes on in Hermes."
    else:
        tray.proc.send_signal(getattr(signal, way))


@pytest.mark.parametrize("way", WAYS)
def test_however_the_tray_ends_a_continuation_in_the_hermes_it_started_goes_on_once(
        way, request, demo, tmp_path) -> None:
    desktop = request.getfixturevalue("trayless_desktop" if way == "status-window" else "desktop")
    key = demo.session_key
    tray = start_tray(desktop, demo, tmp_path)
    try:
        tray.wait_event(lambda e: e["event"] in ("tray-shown", "status-window"), what="the tray or its status window")
        tray.wait_event(lambda e: e["event"] == "scan" and e["verdicts"].get(key) == "running", what="running")
        theirs = _gateways(demo.home)  # the demo's own Hermes, which the crash below ends
        killed = time.time()
        assert demo.crash_backend()
        note = wait_for(lambda: [n for n in desktop.notifications() if n["app_name"] == "Hermes Tray"
                                 and n["summary"].startswith("Interrupted: ") and n["time"] >= killed][-1:],
                        15, "the note")[0]
        time.sleep(0.6)
        desktop.click_action(note["id"], "resume")
        ours = wait_for(lambda: _gateways(demo.home) - theirs, 20, "the Hermes the tray starts")
        wait_for(lambda: _continuations(demo.home), 20, "the continuation to start")
        time.sleep(1.5)
        _quit(way, tray, desktop, demo)
        code = tray.proc.wait(timeout=60)
    finally:
        if tray.proc.poll() is None:
            tray.proc.kill()
            tray.proc.wait()
    expected = {"SIGKILL": -signal.SIGKILL, "SIGQUIT": -signal.SIGQUIT}.get(way, 0)
    assert code == expected, (tmp_path / "tray.stderr").read_text()[-3000:]
    # the continuation goes on without the tray, to its end, once
    wait_for(lambda: [r for r, _c in sim_state.messages(demo.home, key)][-1:] == ["assistant"], 30,
             "the continuation to finish", seen=lambda: sim_state.messages(demo.home, key)[-2:])
    assert len(_continuations(demo.home)) == 1
    wait_for(lambda: not any(pid_running(p) for p in ours), 30, "the Hermes the tray started to end")
