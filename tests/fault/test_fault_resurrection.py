"""A skipped marker brought back by a non-locking Hermes writer never leads to a question or a
continuation: the tray and the helper skip it again, silently.

(``test_fault_races`` measures how often Hermes' store resurrects entries hermes-tray removed; this
checks what the tray does when it happens.) The resurrected entry is written back byte-exact, as
a Hermes read-modify-write that read the file before the skip would write it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import fault_resume_race as R  # noqa: E402
import pytest


@pytest.fixture
def sim(sim_roots):
    return sim_roots["auto-continue"]


def _resurrect(home: Path, key: str, entry: dict) -> None:
    path = home / "desktop" / "interrupted_turns.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        doc = {}
    doc[key] = entry
    tmp = path.with_name(".hermes_stale.tmp")
    tmp.write_text(json.dumps(doc, ensure_ascii=False))
    os.replace(tmp, path)


def _notifications(root: Path, key: str) -> int:
    log = root / "tray-logs" / "hermes-tray-helper.log"
    try:
        return sum(1 for line in log.read_text().splitlines() if "notification" in line and key in line)
    except FileNotFoundError:
        return 0


def _skip_cli(root: Path, home: Path, key: str) -> None:
    import subprocess

    r = subprocess.run(R._cli() + ["skip", key, "--home", str(home)], env=R._env(root), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("mode", ["ask", "auto"])
def test_resurrected_skip_is_skipped_again_silently(sim, tmp_path, mode):
    from hermes_tray_core.markers.store import list_turn_markers
    from tests.support.sim_homes import make_home, plant_marker

    home, key = make_home(tmp_path / "home", turn_seconds=0.3)
    R._write_settings(tmp_path, sim, mode, notify=True)  # no session bus: notifications go to the log
    env = R._env(tmp_path)
    (tmp_path / "logs").mkdir()
    helper = None
    try:
        if mode == "ask":  # the helper is up, asks once, the user skips
            helper = R._start(R._cli() + ["helper", "--no-notifications", "--home", str(home)], env,
                              tmp_path / "logs" / "helper.out")
            assert R._wait_for(lambda: R._scanned(tmp_path / "logs" / "helper.out"), 30), "the helper did not start"
        entry = plant_marker(home, key, "resurrection prompt")
        if mode == "ask":
            assert R._wait_for(lambda: _notifications(tmp_path, key) >= 1, 15), "the helper never asked"
        _skip_cli(tmp_path, home, key)
        assert key not in list_turn_markers(home)
        asked = _notifications(tmp_path, key)
        _resurrect(home, key, entry)  # Hermes writes back its stale copy
        if mode == "auto":  # the helper starts after the resurrection (a login later), in auto mode
            helper = R._start(R._cli() + ["helper", "--no-notifications", "--home", str(home)], env,
                              tmp_path / "logs" / "helper.out")
        gone = R._wait_for(lambda: key not in list_turn_markers(home), 15)
        time.sleep(1.5)
    finally:
        if helper is not None:
            R._stop(helper)
    assert R._continuations(home).get(key, 0) == 0, "a skipped turn was continued"
    assert _notifications(tmp_path, key) == asked, "the user was asked again about a skipped turn"
    assert gone, ("the resurrected marker was not skipped again: it stays pending in the menu "
                  "(Controller.on_scan skips idents already in _seen before checking skipped_before)")
