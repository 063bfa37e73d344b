"""Test and benchmark helpers that drive the simulated backend (test-only: not shipped in the wheel).

They build what a crash leaves behind — a home with a session and a marker whose writer is a
real process that has really exited — so tests exercise the same liveness checks users hit.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_tray.demo import sim_state
from hermes_tray.demo.sim_backend import AUTO, LEGACY, TURNS_FILE, write_control
from hermes_tray_core.markers.store import MarkerStore
from hermes_tray_core.process.identity import ProcessIdentity, process_start_time
from hermes_tray_core.turn import Marker, Turn

CONFIG = """\
# test home
desktop:
  auto_continue:
    enabled: true
    freshness_minutes: {freshness}
    max_attempts: {max_attempts}
"""


def tray_dirs(root: Path) -> dict[str, str]:
    """``HERMES_TRAY_*_DIR`` values under ``root`` (set them so nothing touches the real user state)."""
    return {
        "HERMES_TRAY_CONFIG_DIR": str(root / "tray-config"),
        "HERMES_TRAY_STATE_DIR": str(root / "tray-state"),
        "HERMES_TRAY_LOG_DIR": str(root / "tray-logs"),
        "HERMES_TRAY_CACHE_DIR": str(root / "tray-cache"),
        "HERMES_TRAY_RUNTIME_DIR": str(root / "tray-run"),
    }


def dead_identity() -> ProcessIdentity:
    """The identity of a process that ran and has exited (and been reaped): a crashed writer."""
    # -I -S: no site import, so the stand-in "crashed backend" costs a few ms, not a full start-up.
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(0.02)"])  # noqa: S603
    start = process_start_time(proc.pid)
    proc.wait()
    return ProcessIdentity(proc.pid, start if start is not None else 1.0)


def make_home(root: Path, *, max_attempts: int = 2, freshness: int = 15, turn_seconds: float = 0.5,
              title: str = "Test session") -> tuple[Path, str]:
    """A Hermes home for the simulated backend: config.yaml, state.db with one session. Returns (home, key)."""
    home = Path(root)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG.format(freshness=freshness, max_attempts=max_attempts),
                                      encoding="utf-8")
    key = sim_state.create_session(home, title=title)
    write_control(home, turn_seconds=turn_seconds, deltas=4)
    return home, key


def plant_marker(home: Path, key: str, prompt: str, *, attempts: int = 0,
                 writer: ProcessIdentity | None = None) -> dict:
    """A marker as a backend that died mid-turn leaves it (dead writer unless ``writer`` given)."""
    return MarkerStore(home).record(key, prompt, attempts=attempts, writer=writer or dead_identity())


def turn_of(home: Path | str, key: str, prompt: str, *, attempts: int = 0, expected: dict | None = None) -> Turn:
    """The turn a continuation is handed: the entry the caller checked (``expected``: compared before the note is
    submitted), else one known by its prompt and attempts alone (nothing to compare)."""
    marker = Marker.read(expected) if expected is not None else Marker(prompt=prompt, attempts=attempts)
    return Turn.of(home, key, None)._replace(marker=marker)


def settings_for(install_python: str, config_dir: Path) -> Path:
    """Tray settings naming the (simulated or real) Hermes interpreter as ``hermes_command``."""
    from hermes_tray_core.stores.settings import TraySettings, save_settings

    return save_settings(TraySettings(hermes_command=(install_python,)), Path(config_dir) / "config.toml")


def pid_running(pid: int | None) -> bool:
    """True while ``pid`` exists and is not a zombie (for "nothing is left running" checks)."""
    if not pid:
        return False
    from hermes_tray_core.process.identity import process_liveness

    return process_liveness(pid) == "alive"


def env_with(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def read_turns(home: Path | str) -> list[dict[str, Any]]:
    """The turns simulated backends ran on ``home`` (one dict per turn start)."""
    try:
        lines = (Path(home) / TURNS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


@contextlib.contextmanager
def running_sim_dashboard(root: Path | str, home: Path | str, *, env: dict[str, str] | None = None,
                          timeout: float = 30.0) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Start the simulated running backend (:mod:`tests.support.sim_dashboard`) with the interpreter of the sim
    install at ``root`` for ``home``, the way Hermes runs (``<python> …/hermes dashboard --port 0``); yields
    (process, port); SIGKILLed at the end."""
    root = Path(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    launcher = root / "tests-bin" / "hermes"
    if not launcher.exists():
        launcher.parent.mkdir(exist_ok=True)
        capability = AUTO if (root / "sim-packages" / "tui_gateway" / "turn_marker.py").exists() else LEGACY
        launcher.write_text("import sys\n\nfrom tests.support.sim_dashboard import main\n\n"
                            f"sys.exit(main(sys.argv[1:], {capability!r}))\n", encoding="utf-8")
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_TRAY_")}
    child_env.pop("HERMES_DASHBOARD_SESSION_TOKEN", None)
    child_env.update(env or {})
    child_env["HERMES_HOME"] = str(home)
    proc = subprocess.Popen([str(python), str(launcher), "dashboard", "--no-open", "--port", "0"],  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=child_env)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        port = 0
        while time.monotonic() < deadline:
            line = proc.stdout.readline().decode("utf-8", "replace")
            if not line:
                raise RuntimeError("the simulated dashboard exited during start-up")
            if line.startswith("HERMES_DASHBOARD_READY port="):
                port = int(line.strip().split("=", 1)[1])
                break
        if not port:
            raise RuntimeError("the simulated dashboard did not become ready")
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
