"""A user ``skip`` racing a ``resume`` of the same turn: exactly one of them wins.

"Never continue a turn the user skipped" and "exactly one continuation" together mean: if the
skip reported success, the backend must not run a continuation; if a continuation ran, the
skip must report that it lost. The race is made deterministic with the simulated backend's
``resume_delay`` knob: the skip lands after the resume has claimed the turn and checked the
marker, while the gateway is answering ``session.resume`` — the window every real resume has
(gateway start-up is hundreds of milliseconds for real Hermes).

Found with this test (legacy backends, i.e. hermes-agent 0.19.0 from PyPI): the skip succeeded,
then the tray recorded its own continuation marker unconditionally and submitted the note — the
skipped turn was continued. Fixed in a7f746a: skips take the resume's claim (``core.continuing.skip``), and
the legacy path takes the marker over by compare-and-swap before it submits. Both skips are
raced here: the tray/CLI one (claim) and a bare compare-and-remove (no claim).
"""

from __future__ import annotations

import fault_resume_race as R  # noqa: E402
import pytest

from hermes_tray_core.markers.store import list_turn_markers  # noqa: E402


@pytest.mark.parametrize("claim", [True, False], ids=["tray-cli-skip", "bare-compare-and-remove"])
@pytest.mark.parametrize("cap", ["auto-continue", "legacy"])
def test_skip_inside_the_resume_window_has_one_winner(sim_roots, tmp_path, cap, claim):
    r = R.skip_race_once(tmp_path, sim_roots[cap], claim=claim)
    assert r["continuations"] <= 1
    if r["skipped"]:
        assert r["continuations"] == 0, (f"{cap}: the skip reported success, yet the backend ran a continuation "
                                         f"(resume said {r['resume_outcome']}: {r['message']})")
        assert not r["resume_ok"], "the resume must report that it lost to the skip"
        assert r["key"] not in list_turn_markers(r["home"])
    else:
        assert r["continuations"] == 1, f"{cap}: the skip lost, so the resume must have run ({r['message']})"
