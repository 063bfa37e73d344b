"""GUI tests run offscreen (tests/conftest.py sets QT_QPA_PLATFORM) with every tray file in tmp."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytestqt")

from hermes_tray import qt_guard  # noqa: E402

qt_guard.install()  # PySide6 refcount bug on Python < 3.12: see hermes_tray/qt_guard.py


@pytest.fixture(autouse=True)
def private_tray_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        monkeypatch.setenv(f"HERMES_TRAY_{name}_DIR", str(tmp_path / f"tray-{name.lower()}"))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    return tmp_path


@dataclass
class Rec:
    """A stand-in for ``core.scanner.TurnRecord`` with the documented fields."""

    session_key: str
    home: Path = Path("/home/u/.hermes")
    profile: str = "default"
    title: str | None = "Fix the flaky test"
    prompt_excerpt: str = "make test_upload stop timing out on CI"
    started_at: float = field(default_factory=lambda: time.time() - 300)
    age_seconds: float = 300.0
    attempts: int = 0
    writer: str = "dead"
    verdict: str = "actionable"
    reason: str = "its writer is gone and the turn is fresh"
    source: str = "desktop"
    entry: dict[str, Any] | None = None


@pytest.fixture
def rec():
    return Rec
