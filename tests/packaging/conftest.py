"""Packaging tests: register the ``slow`` marker (real builds; CI runs them all the same)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: builds a real artifact (minutes); run by CI all the same")
