"""Fixtures for the real-Hermes integration tests: the cached hermes-agent venv, the mock model
server, and a home whose session already has one real turn in Hermes' own ``state.db``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hermes_venv import PyPIUnreachable, ensure_hermes_venv, venv_python  # noqa: E402
from mock_openai import MockOpenAI, write_hermes_config  # noqa: E402

SEED_PROMPT = "Create notes.txt listing the three largest files in this project, then summarise them."


@pytest.fixture(scope="session")
def hermes_python() -> Path:
    """The real Hermes interpreter (hermes-agent 0.19.0), created once and cached."""
    try:
        venv, _took = ensure_hermes_venv()
    except PyPIUnreachable as exc:
        pytest.skip(f"real-gateway tests need hermes-agent from PyPI: {exc}")
    return venv_python(venv)


@pytest.fixture(scope="module")
def mock_llm():
    with MockOpenAI(reply="Done: notes.txt now lists the three largest files.") as mock:
        yield mock


@pytest.fixture(scope="module")
def seeded_home(tmp_path_factory: pytest.TempPathFactory, hermes_python: Path, mock_llm: MockOpenAI):
    """A home whose session had one real turn through the real gateway. Returns (home, session key)."""
    from core import gateway

    home = tmp_path_factory.mktemp("seed") / "hermes-home"
    write_hermes_config(home, mock_llm.base_url)
    install = gateway.install_from_command([str(hermes_python)])
    gw = gateway.GatewayProcess(install, home, log_path=home.parent / "seed-gateway.log",
                                cwd=str(home.parent))
    gw.start()
    try:
        gw.wait_ready(120)
        created = gw.request("session.create", {})
        sid, key = created["session_id"], created["stored_session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": SEED_PROMPT})
        deadline_frames = []
        while True:
            ev = gw.events.get(timeout=120)
            assert isinstance(ev, dict), "gateway exited during the seed turn"
            deadline_frames.append(ev.get("type"))
            if ev.get("type") in ("message.complete", "error"):
                assert ev.get("type") == "message.complete", ev
                break
    finally:
        gw.shutdown(10)
    return home, key


@pytest.fixture
def real_home(tmp_path: Path, seeded_home: tuple[Path, str]) -> tuple[Path, str]:
    """A private copy of the seeded home (state.db and all) for one test."""
    src, key = seeded_home
    dst = tmp_path / "hermes-home"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock", "logs"))
    return dst, key
