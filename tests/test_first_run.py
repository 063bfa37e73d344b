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


def test_no_command_without_hermes_opens_the_demo(tmp_path):
    env = _isolated_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tray"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        out = ""
        while time.monotonic() < deadline and "Hermes home" not in out:
            line = proc.stdout.readline()
            if not line:
                break
            out += line
        assert "demo ready" in out, out
        assert "Hermes home" in out
        time.sleep(1.0)
        assert proc.poll() is None, "the tray should be running on the demo home"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert "throwaway demo home" in err
    assert proc.returncode == 0, err
    # The demo never touched the (empty) real home.
    assert not (tmp_path / "home" / ".hermes").exists()
