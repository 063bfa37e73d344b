"""GUI tests run offscreen with every user and tray dir in tmp (both by tests/conftest.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from hermes_tray_core.keys import home_path
from hermes_tray_core.scanning.scanner import TurnRecord
from hermes_tray_core.turn import Marker, Turn

pytest.importorskip("pytestqt")

from hermes_tray import qt_guard  # noqa: E402

try:
    qt_guard.check()
except qt_guard.BrokenBindings as exc:  # say it once instead of a none_dealloc abort mid-suite
    pytest.exit(f"{exc}  (reinstall the test venv: pip install -e '.[test,build]')", returncode=2)


@pytest.fixture(autouse=True)
def _finish_controller_writes(monkeypatch: pytest.MonkeyPatch):
    """Every controller a test made finishes its queued writes before the test's dirs go away, so a
    late write never lands in the next test's journal."""
    from hermes_tray.controller import Controller

    made: list[Controller] = []
    init = Controller.__init__

    def tracking_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Controller, "__init__", tracking_init)
    yield
    for ctrl in made:
        try:
            ctrl.drain(10)
        except RuntimeError:  # shut down already
            pass


def make_record(session_key: str, **fields: Any) -> TurnRecord:
    """A real scanner record with plausible defaults (an actionable desktop turn 5 minutes old)."""
    base: dict[str, Any] = dict(
        home=Path("/home/u/.hermes"), profile="default", title="Fix the flaky test",
        prompt_excerpt="make test_upload stop timing out on CI", age_seconds=300.0, writer="dead",
        verdict="actionable", reason="its writer is gone and the turn is fresh", source="desktop",
    )
    started_at, attempts = fields.pop("started_at", time.time() - 300), fields.pop("attempts", 0)
    marker = Marker.read(fields.pop("entry", None))._replace(started=started_at, attempts=attempts)
    base.update(fields)
    return TurnRecord(turn=Turn(home_path(base["home"]), session_key, marker), **base)


@pytest.fixture
def rec():
    return make_record
