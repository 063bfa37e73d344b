"""The tray's log files are private (0600) and never written through a symlink: the resume worker's
log (``hermes-tray resume`` without --wait), the tray's rotating log, and core.stores.logfiles itself."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.markers.store import list_turn_markers
from hermes_tray_core.stores.fsutil import UnsafePathError
from hermes_tray_core.stores.logfiles import open_private_append, prune_logs, safe_file_part
from tests.support.sim_homes import make_home, plant_marker, read_turns, settings_for, tray_dirs

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX modes and O_NOFOLLOW")

PROMPT = "Tidy the release notes and tag 1.4."


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def cli_resume(key: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # umask 022, as on most desktops: files that take the default mode come out 0644
    return subprocess.run([sys.executable, "-m", "hermes_tray", "resume", key, "--home", str(home), "--json"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: os.umask(0o022))  # noqa: PLW1509 - test only


def wait_gone(home: Path, key: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and key in list_turn_markers(home):
        time.sleep(0.1)


def test_resume_without_wait_keeps_the_worker_log_private(sims, tmp_path):
    env = tray_dirs(tmp_path)
    home, key = make_home(tmp_path / "home", turn_seconds=0.5)
    settings_for(sims["legacy"].argv[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    plant_marker(home, key, PROMPT)
    p = cli_resume(key, home, env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outcome"] == "started"
    wait_gone(home, key)
    log = Path(env["HERMES_TRAY_LOG_DIR"]) / "resume-worker.log"
    assert log.is_file() and mode(log) == 0o600
    assert mode(log.parent) == 0o700
    # A log an older version left world-readable is narrowed on the next use.
    os.chmod(log, 0o644)
    _home2, key2 = make_home(home, title="second")
    plant_marker(home, key2, PROMPT)
    p = cli_resume(key2, home, env)
    assert p.returncode == 0, p.stderr
    wait_gone(home, key2)
    assert mode(log) == 0o600


def test_resume_without_wait_refuses_a_symlinked_worker_log(sims, tmp_path):
    env = tray_dirs(tmp_path)
    home, key = make_home(tmp_path / "home")
    settings_for(sims["legacy"].argv[0], Path(env["HERMES_TRAY_CONFIG_DIR"]))
    entry = plant_marker(home, key, PROMPT)
    logs = Path(env["HERMES_TRAY_LOG_DIR"])
    logs.mkdir(mode=0o700, parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    (logs / "resume-worker.log").symlink_to(victim)
    p = cli_resume(key, home, env)
    assert p.returncode == 1 and "cannot open the background helper's log" in p.stdout + p.stderr, p.stderr
    assert victim.read_text() == "precious\n" and mode(victim) == 0o644
    assert read_turns(home) == [] and list_turn_markers(home)[key] == entry


def test_tray_log_handler_refuses_a_symlink_and_rotates_into_private_files(tmp_path):
    from hermes_tray.app.logging_setup import _PrivateRotatingHandler

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    link = tmp_path / "hermes-tray.log"
    link.symlink_to(victim)
    with pytest.raises(OSError):
        _PrivateRotatingHandler(link, maxBytes=200, backupCount=2, encoding="utf-8")
    assert victim.read_text() == "precious\n" and mode(victim) == 0o644  # not chmodded through the link
    link.unlink()
    old = os.umask(0o022)
    try:
        handler = _PrivateRotatingHandler(link, maxBytes=200, backupCount=2, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        for i in range(20):
            handler.emit(logging.makeLogRecord({"msg": f"line {i} " + "x" * 40}))
        handler.close()
    finally:
        os.umask(old)
    files = sorted(tmp_path.glob("hermes-tray.log*"))
    assert len(files) == 3 and all(mode(f) == 0o600 for f in files)


def test_open_private_append_and_helpers(tmp_path):
    old = os.umask(0)
    try:
        fd = open_private_append(tmp_path / "a.log")
    finally:
        os.umask(old)
    os.close(fd)
    assert mode(tmp_path / "a.log") == 0o600
    os.mkfifo(tmp_path / "fifo.log")
    with pytest.raises(UnsafePathError):
        os.close(open_private_append(tmp_path / "fifo.log"))
    assert safe_file_part("cron:job_1.a-b/c\\d") == "cron_job_1.a-b_c_d"
    for i in range(25):
        f = tmp_path / "gw" / f"{i:02d}.log"
        f.parent.mkdir(exist_ok=True)
        f.write_text("x")
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    (tmp_path / "gw" / "keep.txt").write_text("not a log")
    assert prune_logs(tmp_path / "gw", keep=20) == 5
    assert sorted(p.name for p in (tmp_path / "gw").iterdir())[:2] == ["05.log", "06.log"]
    assert (tmp_path / "gw" / "keep.txt").exists()
