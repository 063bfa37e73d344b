"""A user ``skip`` racing a ``resume`` of the same turn: exactly one of them wins.

"Never continue a turn the user skipped" and "exactly one continuation" together mean: if the
skip reported success, the backend must not run a continuation; if a continuation ran, the
skip must report that it lost. The race is made deterministic with the simulated backend's
``resume_delay`` knob: the skip lands after the resume has claimed the turn and checked the
marker, while the gateway is answering ``session.resume`` — the window every real resume has
(gateway start-up is hundreds of milliseconds for real Hermes).

Found with this test (legacy backends, i.e. hermes-agent 0.19.0 from PyPI): the skip succeeds,
then the tray records its own continuation marker unconditionally and submits the note — the
skipped turn is continued. Neither skip path (CLI ``skip``, tray ``engine.skip``) takes the
resume claim, and the legacy path does not re-check the marker it replaces.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("core.resume", reason="core.resume (issue 5) not landed yet")
pytest.importorskip("hermes_tray.demo.sim_install", reason="simulated backend (issue 5) not landed yet")

from core import decisions, gateway  # noqa: E402
from core.markers import list_turn_markers, remove_marker_if_unchanged  # noqa: E402
from core.resume import resume_turn  # noqa: E402
from hermes_tray.demo.sim_backend import read_turns, write_control  # noqa: E402
from hermes_tray.demo.sim_install import create_sim_install, sim_command  # noqa: E402
from hermes_tray.demo.testing import make_home, plant_marker, tray_dirs  # noqa: E402

OPTS = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, turn_timeout=30, decline_grace=0.5,
                              stop_grace=5, shutdown_grace=3)
PROMPT = "fault-race prompt: refactor the parser"


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    root = tmp_path_factory.mktemp("fault-sims")
    return {cap: create_sim_install(root / cap, cap) and root / cap for cap in ("auto-continue", "legacy")}


@pytest.fixture
def env(tmp_path, monkeypatch):
    for k, v in tray_dirs(tmp_path).items():
        monkeypatch.setenv(k, v)


def _wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return False


def _continuations(home: Path, key: str) -> int:
    return sum(1 for t in read_turns(home) if t.get("kind") in ("note", "auto-continue"))


@pytest.mark.parametrize("cap", ["auto-continue", "legacy"])
def test_skip_inside_the_resume_window_has_one_winner(sims, env, tmp_path, cap):
    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    shown = plant_marker(home, key, PROMPT)
    write_control(home, resume_delay=0.8)
    install = gateway.install_from_command(sim_command(sims[cap]))
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", resume_turn(home, key, shown, install=install,
                                                                         options=OPTS, via="fault-test")))
    t.start()
    # The resume has claimed the turn, checked the marker and spawned its gateway ...
    assert _wait_for(lambda: any(e.get("event") == "approved" for e in decisions.history(50, session_key=key)))
    time.sleep(0.1)
    # ... and now the user presses Skip on what they were shown (what the tray and the CLI do).
    skipped = remove_marker_if_unchanged(home, key, shown)
    t.join(60)
    res = out["r"]
    ran = _continuations(home, key)
    assert ran <= 1
    if skipped:
        assert ran == 0, (f"{cap}: the skip reported success, yet the backend ran a continuation "
                          f"(resume said {res.outcome}: {res.message})")
        assert not res.ok, "the resume must report that it lost to the skip"
        assert key not in list_turn_markers(home)
    else:
        assert ran == 1, f"{cap}: the skip lost, so the resume must have run ({res.outcome}: {res.message})"
