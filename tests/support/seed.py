"""One seed for the randomised tests of a run: drawn once per test process, named with every failure of a test
that uses it (``tests/conftest.py``), and taken back from ``HERMES_TRAY_TEST_SEED`` to replay that run's draws —
the ``random_seed`` fixture's, the fault harness's and Hypothesis' (its ``--hypothesis-seed``)."""

from __future__ import annotations

import os

SEED_ENV = "HERMES_TRAY_TEST_SEED"
_drawn: list[int] = []


def run_seed() -> int:
    """``HERMES_TRAY_TEST_SEED`` when set, else a fresh 32-bit draw, the same for the whole process."""
    if not _drawn:
        raw = os.environ.get(SEED_ENV, "").strip()
        _drawn.append(int(raw) if raw else int.from_bytes(os.urandom(4), "little"))
    return _drawn[0]


def replay_hint() -> str:
    return f"replay with {SEED_ENV}={run_seed()}"
