"""Throwaway demo homes: under one private temp directory, a Hermes home (``config.yaml`` with auto-continue, a
session in ``state.db``), a simulated installation (``sim_install``), tray dirs of its own (the user's real tray
state is never touched), and a simulated backend running a turn, SIGKILLed after ``die_after`` seconds (or by
:meth:`DemoHome.crash_backend`): exactly what a crashed Hermes leaves, a marker from a dead writer.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hermes_tray.demo import sim_state
from hermes_tray.demo.sim_backend import AUTO, write_control
from hermes_tray.demo.sim_install import create_sim_install, sim_command

DEMO_PROMPT = ("Refactor the config parser so unknown keys produce a warning instead of an error, "
               "then update the tests.")
DEMO_TITLE = "Demo: refactor the config parser"

_CONFIG = """\
# Demo Hermes home created by `hermes-tray demo` (safe to delete).
model:
  provider: custom
  base_url: http://127.0.0.1:9/v1  # not used: the simulated backend never calls a model
  default: demo-model
desktop:
  auto_continue:
    enabled: true
    freshness_minutes: 15
    max_attempts: 2
"""


@dataclass
class DemoHome:
    """Everything a demo run made, and how to point hermes-tray at it."""

    root: Path
    home: Path
    session_key: str
    install_root: Path
    launcher: Path
    capability: str
    backend: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    rounds: int = 0  # extra sessions "crash the backend" made (one per crash after the first turn)
    current: str = ""  # the session of the turn started last

    def __post_init__(self) -> None:
        self.current = self.current or self.session_key

    @property
    def backend_pid(self) -> int | None:
        return self.backend.pid if self.backend is not None else None

    def crash_backend(self) -> bool:
        """SIGKILL the simulated backend mid-turn (what a crash, OOM or forced quit does)."""
        if self.backend is None or self.backend.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            if os.name == "nt":
                self.backend.kill()
            else:
                os.kill(self.backend.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.backend.wait(timeout=5)
        return True

    def start_turn(self, *, turn_seconds: float = 3600.0, die_after: float | None = None,
                   prompt: str = DEMO_PROMPT, session_key: str | None = None) -> subprocess.Popen[bytes]:
        """Start a simulated backend running a turn on the demo session (again, for another round). Returns
        once that backend's own marker is on disk (its pid as the writer), so a crash right after always
        leaves an interrupted turn behind."""
        key = session_key or self.session_key
        self.current = key
        python = sim_command(self.install_root)[0]
        argv = [python, "-m", "hermes_tray.demo.sim_backend", "--home", str(self.home), "run-turn",
                "--session", key, "--prompt", prompt, "--turn-seconds", str(turn_seconds)]
        if die_after is not None:
            argv += ["--die-after", str(die_after)]
        fd = os.open(self.root / "sim-backend.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:  # handed to the child
            self.backend = subprocess.Popen(  # noqa: S603 - argv list
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env={**os.environ, **self.env},
                start_new_session=(os.name != "nt"))
        deadline = time.monotonic() + 10
        from hermes_tray_core import read_turn_marker

        while time.monotonic() < deadline and (read_turn_marker(self.home, key) or {}).get(
                "writer_pid") != self.backend.pid:
            if self.backend.poll() is not None:
                break
            time.sleep(0.02)
        return self.backend

    def crash_again(self) -> str:
        """The menu's "Demo: crash the backend", whatever state the demo is in: a backend mid-turn is
        killed; otherwise a new turn is started, on a new session, and killed. Every round is a session of
        its own (its own title), so one title is never waiting, finished and skipped at once. Returns the
        session key that was interrupted."""
        if self.backend is not None and self.backend.poll() is None:
            self.crash_backend()
            return self.current
        self.rounds += 1
        key = sim_state.create_session(self.home, title=f"{DEMO_TITLE} (round {self.rounds + 1})")
        self.current = key
        self.start_turn(session_key=key)
        self.crash_backend()
        return key

    def cleanup(self) -> None:
        """Stop the simulated backend and delete everything the demo made."""
        self.crash_backend()
        shutil.rmtree(self.root, ignore_errors=True)


def create_demo(root: Path | str | None = None, *, capability: str = AUTO, turn_seconds: float = 3600.0,
                die_after: float | None = 5.0, continuation_seconds: float = 4.0,
                start_turn: bool = True) -> DemoHome:
    """Build a demo home (see module doc); ``root`` default: a new private temp dir."""
    from hermes_tray_core import ensure_private_dir

    if root is None:
        root = Path(tempfile.mkdtemp(prefix="hermes-tray-demo-"))
    # private when we create it; a directory the user named (``--dir``) keeps its mode
    root = ensure_private_dir(Path(root))
    home = root / "hermes-home"
    home.mkdir(mode=0o700, exist_ok=True)
    cfg = home / "config.yaml"
    if not cfg.exists():
        fd = os.open(cfg, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_CONFIG)
    key = sim_state.create_session(home, title=DEMO_TITLE)
    sim_state.append_message(home, key, "user", "Read the config parser and tell me how it handles unknown keys.")
    sim_state.append_message(home, key, "assistant", "It raises KeyError on any unknown key.")
    write_control(home, turn_seconds=continuation_seconds)
    install_root = root / "hermes-install"
    launcher = create_sim_install(install_root, capability)
    env = {
        "HERMES_TRAY_CONFIG_DIR": str(root / "tray-config"),
        "HERMES_TRAY_STATE_DIR": str(root / "tray-state"),
        "HERMES_TRAY_LOG_DIR": str(root / "tray-logs"),
        "HERMES_TRAY_CACHE_DIR": str(root / "tray-cache"),
        "HERMES_TRAY_RUNTIME_DIR": str(root / "tray-run"),
        "HERMES_HOME": str(home),
    }
    from hermes_tray_core import TraySettings, save_settings

    save_settings(TraySettings(homes=(str(home),), hermes_command=tuple(sim_command(install_root))),
                  Path(env["HERMES_TRAY_CONFIG_DIR"]) / "config.toml")
    demo = DemoHome(root, home, key, install_root, launcher, capability, env=env)
    if start_turn:
        demo.start_turn(turn_seconds=turn_seconds, die_after=die_after)
    return demo


def default_demo_root() -> Path:
    """The one demo directory of this user (``hermes-tray`` without Hermes): reused, made afresh
    by each launch, so launches at login never pile up temp dirs."""
    from hermes_tray_core import cache_dir

    return cache_dir() / "demo"
