"""Crash injection: SIGKILL writers at random points, >= 50 kills per kind in CI.

See ``fault_scenarios.py`` for what each kind checks after every kill. Replay a failing run
with ``HERMES_TRAY_TEST_SEED=<seed printed in the failure>``; raise the count with
``HERMES_TRAY_FAULT_KILLS`` (the bench driver runs >= 500 per kind).
"""

from __future__ import annotations

import random

import fault_scenarios as sc
import pytest
from faultkit import kills_per_kind, report, seed

pytestmark = pytest.mark.serial  # kills writers at random moments, counts the rounds that got work done

KILLS = kills_per_kind()


def _run(fn, tmp_path):
    s = seed()
    try:
        stats = fn(tmp_path, KILLS, random.Random(s))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n(replay with HERMES_TRAY_TEST_SEED={s})") from exc
    report(stats)
    assert stats.kills >= KILLS
    # Most kills must land inside the writer loop, after at least one completed operation.
    assert stats.rounds_with_ops >= KILLS // 2, stats.line()
    return stats


def test_crash_atomic_write(tmp_path):
    """fsutil.atomic_write_bytes: after every kill the file is the last acked or the in-flight write."""
    _run(sc.crash_fsutil, tmp_path)


def test_crash_markers(tmp_path):
    _run(sc.crash_markers, tmp_path)


def test_crash_lease(tmp_path):
    _run(sc.crash_lease, tmp_path)


def test_harness_catches_a_torn_write(tmp_path):
    """The method has teeth: an in-place (truncate + write) writer is caught within 50 kills."""
    # Caught either by the per-round parse check or by the checksum of a torn body: both are the harness noticing.
    with pytest.raises(AssertionError, match="round|checksum"):
        sc.crash_fsutil(tmp_path, 50, random.Random(seed()), naive=True)


def test_crash_tray_settings(tmp_path):
    _run(sc.crash_settings, tmp_path)


def test_crash_backend_config_yaml(tmp_path):
    _run(sc.crash_config_yaml, tmp_path)


def test_crash_ledger(tmp_path):
    _run(sc.crash_ledger, tmp_path)
