"""The simulated backend speaks the gateway protocol and leaves what a real backend leaves."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from hermes_tray.demo import sim_state
from hermes_tray.demo.home import create_demo
from hermes_tray.demo.sim_backend import write_control
from hermes_tray_core.hermes.state_db import session_activity
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.store import list_turn_markers
from tests.support.sim_homes import make_home, read_turns, tray_dirs


class Client:
    def __init__(self, home: Path, capability: str, stderr=None) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "hermes_tray.demo.sim_backend", "--capability", capability],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, stderr=stderr,
                                  env={**os.environ, "HERMES_HOME": str(home)})
        self.n = 0

    def frame(self) -> dict:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        assert line, "backend closed stdout"
        return json.loads(line)

    def call(self, method: str, params: dict) -> tuple[dict, list[dict]]:
        assert self.p.stdin is not None
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        events = []
        while True:
            f = self.frame()
            if f.get("id") == self.n:
                return f, events
            events.append(f["params"])

    def until(self, etype: str) -> list[dict]:
        out = []
        while True:
            f = self.frame()["params"]
            out.append(f)
            if f["type"] == etype:
                return out

    def close(self) -> int:
        assert self.p.stdin is not None
        self.p.stdin.close()
        return self.p.wait(timeout=10)


def test_protocol_turn_with_marker_and_lease(tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.6)
    c = Client(home, "auto-continue")
    try:
        assert c.frame()["params"]["type"] == "gateway.ready"
        resp, _ = c.call("session.resume", {"session_id": key})
        sid = resp["result"]["session_id"]
        assert resp["result"]["resumed"] == key and "auto_continue" not in resp["result"]
        resp, _ = c.call("prompt.submit", {"session_id": sid, "text": "hello there"})
        assert resp["result"] == {"status": "streaming"}
        start = c.until("message.start")
        assert start[-1]["session_id"] == sid
        # Mid-turn: a marker from a live writer and a live turn lease, as a real backend holds.
        m = list_turn_markers(home)[key]
        assert m["prompt"] == "hello there" and marker_writer_state(m) == "alive"
        assert session_activity(home, key).lease.state == "live"
        frames = c.until("message.complete")
        assert frames[-1]["payload"]["status"] == "complete"
        assert any(f["type"] == "message.delta" for f in frames)
        assert key not in list_turn_markers(home)
        assert session_activity(home, key).lease.state == "free"
        assert sim_state.messages(home, key)[-2:][0] == ("user", "hello there")
    finally:
        assert c.close() == 0


def test_the_gateway_log_holds_what_the_gateway_said_even_when_it_crashes(tmp_path):
    """The tray keeps the gateway's stderr as its log: the simulated gateway writes one there, as
    Hermes' does, so the log a failure notification points at is never empty."""
    home, key = make_home(tmp_path / "home", turn_seconds=1.0)
    write_control(home, die_mid_turn=True)
    log = tmp_path / "gateway.log"
    with open(log, "w") as err:
        c = Client(home, "auto-continue", stderr=err)
        assert c.frame()["params"]["type"] == "gateway.ready"
        resp, _ = c.call("session.resume", {"session_id": key})
        c.call("prompt.submit", {"session_id": resp["result"]["session_id"], "text": "hello there"})
        assert c.p.wait(timeout=10) == -9  # SIGKILLed mid-turn
    text = log.read_text()
    assert "ready" in text and "request session.resume" in text
    assert "will crash mid-turn" in text and "simulated crash: SIGKILL mid-turn" in text
    assert "hello there" not in text  # identity and progress, never prompt text


def test_legacy_backend_writes_no_marker_and_never_continues(tmp_path):
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    from tests.support.sim_homes import plant_marker

    entry = plant_marker(home, key, "x")
    c = Client(home, "legacy")
    try:
        c.frame()
        resp, events = c.call("session.resume", {"session_id": key})
        assert "auto_continue" not in resp["result"] and events == []
        sid = resp["result"]["session_id"]
        c.call("prompt.submit", {"session_id": sid, "text": "y"})
        c.until("message.start")
        assert list_turn_markers(home)[key] == entry  # untouched by a backend without the feature
        c.until("message.complete")
    finally:
        c.close()


def test_interrupt_ends_the_turn_as_interrupted(tmp_path):
    home, key = make_home(tmp_path / "home")
    write_control(home, never_finish=True, turn_seconds=0.1)
    c = Client(home, "auto-continue")
    try:
        c.frame()
        sid = c.call("session.resume", {"session_id": key})[0]["result"]["session_id"]
        c.call("prompt.submit", {"session_id": sid, "text": "forever"})
        c.until("message.delta")
        resp, _ = c.call("session.interrupt", {"session_id": sid})
        assert resp["result"]["status"] == "interrupted"
        assert key not in list_turn_markers(home)
        assert c.until("message.complete")[-1]["payload"]["status"] == "interrupted"
    finally:
        c.close()


def test_demo_creates_a_crashing_turn_that_becomes_actionable(tmp_path):
    demo = create_demo(tmp_path / "demo", die_after=1.0)
    try:
        m = list_turn_markers(demo.home)[demo.session_key]
        assert marker_writer_state(m) == "alive"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and marker_writer_state(m) != "dead":
            time.sleep(0.1)
            m = list_turn_markers(demo.home)[demo.session_key]
        assert marker_writer_state(m) == "dead"
        assert session_activity(demo.home, demo.session_key).lease.state == "free"
        assert [t["kind"] for t in read_turns(demo.home)] == ["standalone"]
        assert (demo.home / "config.yaml").stat().st_mode & 0o777 == 0o600
    finally:
        demo.cleanup()
    assert not demo.root.exists()


def test_demo_command_prints_what_to_try(tmp_path):
    env = {**os.environ, **tray_dirs(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "hermes_tray", "demo", "--no-tray", "--crash-after", "0.5",
                        "--dir", str(tmp_path / "d"), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert Path(info["home"]).is_dir() and info["session_key"]
    deadline = time.monotonic() + 10
    from tests.support.sim_homes import pid_running

    while time.monotonic() < deadline and pid_running(info["backend_pid"]):
        time.sleep(0.1)
    assert not pid_running(info["backend_pid"])


def test_demo_crash_again_after_hermes_gave_up_starts_a_fresh_turn(tmp_path):
    """'Demo: crash the backend' once the retry budget is used up (Hermes gave up; its marker stays): a new
    turn on a new session is interrupted, so the demo never gets stuck; the given-up marker is left as is."""
    from hermes_tray_core.markers.store import MarkerStore
    from hermes_tray_core.scanning.scanner import scan

    demo = create_demo(tmp_path / "demo", die_after=None)
    try:
        first = demo.crash_again()  # the turn running now is killed
        assert first == demo.session_key
        gave_up = {**list_turn_markers(demo.home)[first], "attempts": 2}  # the budget (max_attempts 2) used up
        store = MarkerStore(demo.home)
        assert store.replace_if_unchanged(first, list_turn_markers(demo.home)[first], gave_up)
        verdicts = {t.session_key: t.verdict for t in scan([demo_home(demo)]).turns}
        assert verdicts[first] == "exhausted"
        again = demo.crash_again()
        assert again != first
        markers = list_turn_markers(demo.home)
        assert markers[first] == gave_up  # untouched
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and marker_writer_state(markers[again]) != "dead":
            time.sleep(0.1)
            markers = list_turn_markers(demo.home)
        verdicts = {t.session_key: t.verdict for t in scan([demo_home(demo)]).turns}
        assert verdicts[again] == "actionable" and verdicts[first] == "exhausted"
    finally:
        demo.cleanup()


def demo_home(demo):
    from hermes_tray_core.hermes.homes import discover_homes

    return discover_homes(explicit=[str(demo.home)])[0]


def test_every_demo_crash_is_a_session_of_its_own(tmp_path):
    """Issue 25.10. Before: each "Demo: crash the backend" after a finished or skipped turn reused the demo's
    one session, so one title showed as waiting, finished and skipped at once."""
    from hermes_tray_core.markers.store import MarkerStore
    from hermes_tray_core.scanning.scanner import scan

    demo = create_demo(tmp_path / "demo", die_after=None)
    try:
        first = demo.crash_again()  # the turn running now is killed: the demo's own session
        assert first == demo.session_key
        MarkerStore(demo.home).clear(first)  # as a finished (or skipped) turn leaves it
        keys = [first, demo.crash_again(), demo.crash_again()]
        assert len(set(keys)) == 3
        titles = {t.session_key: t.title for t in scan([demo_home(demo)]).turns}
        assert len({titles[k] for k in keys[1:]}) == 2 and all(titles[k] for k in keys[1:]), titles
    finally:
        demo.cleanup()


def test_the_demos_try_lines_work_in_a_shell_where_hermes_tray_is_not_on_path(tmp_path):
    """Issue 25.10. Before: the "Try" lines called a bare ``hermes-tray``, which the README's install
    (``python3 -m venv .venv && .venv/bin/pip install .``) does not put on PATH; and ``demo --help`` said "a
    new temp dir" without saying where ``hermes-tray`` with no Hermes makes it."""
    import shutil

    from tests.support.product import product_env, tray_argv

    env = product_env({**os.environ, **tray_dirs(tmp_path)})
    p = subprocess.run(tray_argv("demo", "--no-tray", "--crash-after", "0", "--dir", tmp_path / "d"),
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    demo_pid = int(re.search(r"kill -9 (\d+)", p.stdout).group(1))
    try:
        tries = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().endswith(" status")]
        assert tries and Path(tries[0].split()[0]).is_absolute()  # a path, never a bare name
        # short: a few lines of the user's words, none of them an environment to copy (issue 32.8)
        assert len(p.stdout.strip().splitlines()) <= 8 and "HERMES_TRAY_" not in p.stdout, p.stdout
        assert "rm -rf" in p.stdout  # --no-tray keeps the demo: how to remove it
        path = os.pathsep.join(d for d in env["PATH"].split(os.pathsep)  # as after the README's install
                               if not os.path.exists(os.path.join(d, "hermes-tray")))
        assert shutil.which("hermes-tray", path=path) is None
        shell = {k: v for k, v in env.items() if not k.startswith("HERMES_TRAY_")}
        ran = subprocess.run(tries[0], shell=True, capture_output=True, text=True, timeout=60,  # noqa: S602
                             env={**shell, "PATH": path})
        assert ran.returncode == 0 and "Demo: refactor the config parser" in ran.stdout, (tries[0], ran.stderr)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(demo_pid, signal.SIGKILL)
    helptext = subprocess.run(tray_argv("demo", "--help"), capture_output=True, text=True, env=env, timeout=60)
    said = " ".join(helptext.stdout.split())
    assert "removed when the tray quits" in said and "no Hermes installed uses " in said and "demo)" in said
