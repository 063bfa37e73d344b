"""Races: hermes-tray's skips against Hermes' own marker writer (the reference ``turn_marker`` module, in
its own process, recording and clearing at >= 100 writes/s with no cross-process lock).

After the run and a 2 s settle: no Hermes marker lost, no cleared entry back, no skipped entry back.
CI runs 1,500 skips through the library and a couple of dozen through the real ``hermes-tray skip``;
``tests/bench/bench_markers.py`` runs the long version and prints the counts.
"""

from __future__ import annotations

import os

import pytest

SKIPS = int(os.environ.get("HERMES_TRAY_FAULT_RACE_SKIPS", "1500"))
CLI_SKIPS = int(os.environ.get("HERMES_TRAY_FAULT_RACE_CLI_SKIPS", "24"))



@pytest.fixture(autouse=True)
def _reference():
    from tests.support.hermes_reference import reference_or_skip

    reference_or_skip()


def _check(r: dict, skips: int) -> None:
    print({k: v for k, v in r.items() if k != "examples"})
    assert r["skips"] >= skips, r
    assert r["hermes_writes_per_s"] >= 100, r  # the peer really wrote at the rate we claim
    assert r["lost"] == 0, r  # no Hermes marker lost
    assert r["ghosts"] == 0, r  # no entry Hermes cleared came back
    assert r["skipped_back"] == 0, r  # no skipped entry came back


def test_library_skips_against_hermes_writer_lose_and_resurrect_nothing(tmp_path):
    import fault_races

    _check(fault_races.hermes_writer_race(tmp_path, SKIPS, via="primitive"), SKIPS)


def test_cli_skips_against_hermes_writer_lose_and_resurrect_nothing(tmp_path):
    import fault_races

    r = fault_races.hermes_writer_race(tmp_path, CLI_SKIPS, via="cli")
    _check(r, CLI_SKIPS)
    assert r["cli_seconds_max"] is not None
