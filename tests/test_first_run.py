"""A newcomer without Hermes who runs ``hermes-tray`` gets the demo, not an empty tray."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hermes_tray.cli.tray import hermes_present


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES", "XDG_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        PATH=str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin",
        HERMES_TRAY_CONFIG_DIR=str(tmp_path / "cfg"),
        HERMES_TRAY_STATE_DIR=str(tmp_path / "state"),
        HERMES_TRAY_CACHE_DIR=str(tmp_path / "cache"),
        HERMES_TRAY_LOG_DIR=str(tmp_path / "log"),
        HERMES_TRAY_RUNTIME_DIR=str(tmp_path / "run"),
        QT_QPA_PLATFORM="offscreen",
    )
    (tmp_path / "home").mkdir()
    return env


def test_hermes_present_follows_homes_and_installs(tmp_path, monkeypatch):
    env = _isolated_env(tmp_path)
    for key in [k for k in os.environ if k.startswith("HERMES")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = argparse.Namespace(homes=None)
    assert not hermes_present(args)
    assert hermes_present(argparse.Namespace(homes=[str(tmp_path)]))
    (tmp_path / "home" / ".hermes").mkdir()
    assert hermes_present(args)


def _wait_for_demo(proc: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline and "Hermes home" not in out:
        line = proc.stdout.readline()
        if not line:
            break
        out += line
    return out


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def test_no_command_without_hermes_opens_the_demo(tmp_path):
    env = _isolated_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tray"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = _wait_for_demo(proc)
        assert "demo ready" in out, out
        assert "Hermes home" in out
        assert "rm -rf" not in out, out  # made afresh at each start: nothing to clean up by hand
        time.sleep(1.0)
        assert proc.poll() is None, "the tray should be running on the demo home"
    finally:
        err = _stop(proc)
    assert "throwaway demo home" in err
    assert proc.returncode == 0, err
    # The demo never touched the (empty) real home.
    assert not (tmp_path / "home" / ".hermes").exists()


def test_demo_launches_reuse_one_dir_and_a_second_hands_off(tmp_path):
    """Launch after launch (at login, say) without Hermes: one demo dir of the user's, no temp
    dirs piling up, and a second launch asks the running demo to show itself and exits."""
    import json

    env = _isolated_env(tmp_path)
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    first = subprocess.Popen([sys.executable, "-m", "hermes_tray"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = _wait_for_demo(first)
        demo_root = tmp_path / "cache" / "demo"
        assert f"demo ready in {demo_root}" in out, out
        assert list((tmp_path / "tmp").glob("hermes-tray-demo-*")) == []
        assert (demo_root / "sim-backend.log").stat().st_mode & 0o777 == 0o600
        assert (demo_root.stat().st_mode & 0o777) == 0o700
        events = tmp_path / "events.jsonl"
        t0 = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "hermes_tray"], env={**env, "HERMES_TRAY_EVENTS": str(events)},
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert time.monotonic() - t0 < 30
        assert "already running" in second.stderr
        lines = [json.loads(x) for x in events.read_text().splitlines()]
        assert [x["event"] for x in lines] == ["handed-over"] and lines[0]["delivered"] is True
        assert first.poll() is None, "the running demo is left alone"
        assert (demo_root / "hermes-home").is_dir(), "and its directory was not wiped"
    finally:
        err = _stop(first)
    assert first.returncode == 0, err
    assert list((tmp_path / "tmp").glob("hermes-tray-demo-*")) == []


def test_demo_dir_given_keeps_its_mode(tmp_path):
    """``--dir PATH`` on an existing directory of the user's: used, never chmodded."""
    env = _isolated_env(tmp_path)
    target = tmp_path / "mine"
    target.mkdir()
    os.chmod(target, 0o755)
    proc = subprocess.run([sys.executable, "-m", "hermes_tray", "demo", "--no-tray", "--crash-after", "0",
                           "--dir", str(target)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr
        assert target.stat().st_mode & 0o777 == 0o755
        assert (target / "hermes-home").is_dir()
    finally:
        import psutil

        for p in psutil.process_iter(["cmdline"]):  # the demo's simulated backend (started by this test)
            cmd = p.info.get("cmdline") or []
            if "hermes_tray.demo.sim_backend" in cmd and str(target / "hermes-home") in cmd:
                p.kill()
