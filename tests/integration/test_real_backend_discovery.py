"""An older backend's marker (no writer_pid) against the real hermes-agent 0.19.0 gateway process: actionable
when nothing serves the home (Hermes' own order), running while the real ``python -m tui_gateway.entry``
serves it (the reason names it), actionable again once that process is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.hermes.homes import discover_homes
from hermes_tray_core.scanning.scanner import scan

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of a real gateway: POSIX")


def _verdict(home: Path):
    turns = [t for t in scan(discover_homes(explicit=[home])).turns if t.session_key == "older-backend"]
    assert len(turns) == 1
    return turns[0]


def test_real_gateway_serving_the_home_holds_an_unknown_writer(tmp_path, hermes_python, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    home = tmp_path / "hermes-home"
    (home / "desktop").mkdir(parents=True)
    marker = {"attempts": 0, "prompt": "written by an older Hermes", "started_at": time.time() - 30,
              "auto_continue": True}
    (home / "desktop" / "interrupted_turns.json").write_text(json.dumps({"older-backend": marker}))
    assert _verdict(home).verdict == "actionable"

    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_HOME"] = str(home)
    proc = subprocess.Popen([str(hermes_python), "-m", "tui_gateway.entry"], env=env, cwd=str(tmp_path),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = proc.stdout.readline()  # the gateway's first frame: it is up
        assert "gateway.ready" in first, first
        turn = _verdict(home)
        assert (turn.writer, turn.verdict, turn.unsure) == ("unknown", "running", True)
        assert f"pid {proc.pid} (python -m tui_gateway.entry)" in turn.reason and turn.code == "backend-live"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert _verdict(home).verdict == "actionable"
