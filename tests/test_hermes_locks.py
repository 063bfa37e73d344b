"""The tray takes Hermes' own locks as well as its own: ``config.yaml.lock`` around its config edits and
``desktop/.interrupted_turns.lock`` around marker writes where that file exists. A Hermes-style holder (a real
process holding ``flock`` on the file, as newer Hermes does) makes the tray wait; one that keeps it past the wait
makes the tray report and change nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.hermes import locks
from hermes_tray_core.hermes.config_edit import BackendConfigError, write_auto_continue
from hermes_tray_core.markers.store import MarkerStore, MarkerStoreError
from tests.support.sim_homes import make_home, plant_marker

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def hold(path: Path, seconds: float) -> subprocess.Popen[str]:
    """A Hermes-style holder of ``path`` for ``seconds`` (returns once it holds the lock)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the holder uses flock (Windows: msvcrt byte 0)")


def test_a_config_edit_waits_for_hermes_then_writes(tmp_path):
    home, _ = make_home(tmp_path / "h")
    holder = hold(home / "config.yaml.lock", 1.0)
    t0 = time.monotonic()
    cfg = write_auto_continue(home, max_attempts=5)
    waited = time.monotonic() - t0
    holder.wait()
    assert waited >= 0.8  # it waited for Hermes' write to end
    assert cfg.auto_continue.max_attempts == 5 and "max_attempts: 5" in (home / "config.yaml").read_text()


def test_a_config_edit_past_hermes_wait_is_reported_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "WAIT", 1.0)
    home, _ = make_home(tmp_path / "h")
    before = (home / "config.yaml").read_bytes()
    holder = hold(home / "config.yaml.lock", 30)
    try:
        t0 = time.monotonic()
        with pytest.raises(BackendConfigError) as info:
            write_auto_continue(home, enabled=False)
        assert 0.9 <= time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait()
    assert "Hermes kept config.yaml.lock locked for more than 1 s" in info.value.user_message
    assert "left unchanged" in info.value.user_message
    assert (home / "config.yaml").read_bytes() == before


def test_the_config_lock_is_made_private_when_hermes_has_none_yet(tmp_path):
    home, _ = make_home(tmp_path / "h")
    write_auto_continue(home, max_attempts=3)
    assert (home / "config.yaml.lock").stat().st_mode & 0o777 == 0o600


def test_marker_writes_wait_for_hermes_marker_lock_where_it_exists(tmp_path, monkeypatch):
    home, key = make_home(tmp_path / "h")
    entry = plant_marker(home, key, "Tidy the imports.")
    assert not (home / "desktop" / ".interrupted_turns.lock").exists()  # none invented for a Hermes without it
    holder = hold(home / "desktop" / ".interrupted_turns.lock", 1.0)
    t0 = time.monotonic()
    assert MarkerStore(home).remove_if_unchanged(key, entry, settle=False)
    assert time.monotonic() - t0 >= 0.8
    holder.wait()
    monkeypatch.setattr(locks, "WAIT", 1.0)
    other = plant_marker(home, key, "Tidy the imports again.")
    holder = hold(home / "desktop" / ".interrupted_turns.lock", 30)
    try:
        with pytest.raises(MarkerStoreError, match="Hermes kept .interrupted_turns.lock locked"):
            MarkerStore(home).remove_if_unchanged(key, other, settle=False)
    finally:
        holder.kill()
        holder.wait()
    assert MarkerStore(home).list()[key] == other  # nothing changed
