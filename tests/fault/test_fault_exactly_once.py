"""Exactly one continuation per interrupted turn, whoever races for it; and the crash-loop bound.

Real processes: the tray (``hermes-tray``, offscreen Qt, auto mode), the headless helper, and two
``hermes-tray resume --wait`` per turn, against the simulated backend, which logs every turn it
runs — so continuations are counted at the backend, not inferred from what the tray says.
``tests/bench/bench_fault.py`` runs more turns and rounds.
"""

from __future__ import annotations

import os

import fault_resume_race as R  # noqa: E402
import pytest

TURNS = int(os.environ.get("HERMES_TRAY_FAULT_RACE_TURNS", "4"))


@pytest.mark.parametrize(
    "cap,together",
    [("auto-continue", False), ("legacy", True)],
    ids=["auto-continue-backend,tray-watching", "legacy-backend,all-start-together"],
)
def test_every_process_races_to_resume_every_turn(sim_roots, tmp_path, cap, together):
    r = R.exactly_once_race(tmp_path, TURNS, sim_roots[cap], start_together=together)
    print(R.dumps(r))
    assert r["double_dispatches"] == 0, r["per_turn"]
    assert r["missed"] == 0 and r["continuations"] == TURNS, r
    assert r["markers_left"] == 0 and r["settled"], r
    assert r["cli_other"] == [], r["cli_out"]
    assert r["daemon_exit"] == [0, 0], "tray/helper did not exit cleanly on SIGTERM"
    # Losers were told why: every refused command names the process that won.
    for outs in r["cli_out"].values():
        for code, text in outs:
            if code == 1:
                assert "already resuming" in text or "no longer marked" in text or "running" in text, text


@pytest.mark.parametrize("cap", ["auto-continue", "legacy"])
def test_crash_loop_stops_at_max_attempts(sim_roots, tmp_path, cap):
    """A backend that dies in every continuation: exactly max_attempts dispatches, then 'gave up'."""
    r = R.crash_loop(tmp_path, sim_roots[cap], max_attempts=2, resume_calls=4)
    print({k: v for k, v in r.items() if k != "cli"})
    assert r["continuations"] == 2, r
    assert r["gave_up_journalled"], r["events"]
    assert any(code == 1 and any("gave up" in line.lower() for line in lines) for code, lines in r["cli"]), r["cli"]


@pytest.mark.parametrize("cap", ["auto-continue", "legacy"])
def test_killing_the_resumer_never_doubles_a_continuation(sim_roots, tmp_path, cap, random_seed):
    """SIGKILL a `resume --wait` at a random point and resume again at once: no attempt runs twice."""
    rounds = int(os.environ.get("HERMES_TRAY_FAULT_RESUMER_KILLS", "4"))
    r = R.kill_the_resumer(tmp_path, sim_roots[cap], rounds=rounds, seed=random_seed)
    print(r)
    assert r["double_dispatches"] == 0, r
    assert r["over_budget"] == 0, r
