"""Group commit (core.marker_batch) under random SIGKILLs: four writers contend for one marker file, so
most changes go in batched by whichever holds the lock; one writer at a time is SIGKILLed at a random
moment and replaced.

Each writer (``tests.support.batch_children soak``) owns three keys and logs ``B``/``A`` around every
change. Before each kill all writers are SIGSTOPped and the file is checked: every key holds what its
owner last acknowledged, or what a change still in flight (or cut off by a kill) may leave. A lost
acknowledged change, or a batched change applied again after a later one, shows as a value outside
that set. At the end, one more write must leave nothing in the queue and no temp file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from faultkit import KillStats

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 4


def _writer(home: Path, n: int, start: int, log: Path, stop: Path, seed: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.batch_children", "soak", str(home), str(n),
                             str(start), str(log), str(stop), str(seed)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def acked(logs: list[Path]) -> tuple[dict[str, int | None], dict[str, set[int | None]], int]:
    """Each key's value after its last acknowledged change, the values changes not acknowledged may have
    left instead, and how many changes were acknowledged."""
    state: dict[str, int | None] = {}
    maybe: dict[str, set[int | None]] = {}
    count = 0
    for log in logs:
        inflight: tuple[int, str, str] | None = None
        for line in log.read_text().splitlines():
            parts = line.split()
            if parts[0] == "R":
                if inflight is not None:  # cut off by a kill: it may or may not have gone in, for good
                    maybe.setdefault(inflight[2], set()).add(inflight[0] if inflight[1] == "record" else None)
                inflight = None
            elif parts[0] == "B":
                inflight = (int(parts[1]), parts[2], parts[3])
            else:
                i, op, key = int(parts[1]), parts[2], parts[3]
                state[key] = i if op == "record" else None
                maybe.pop(key, None)
                inflight = None
                count += 1
        if inflight is not None:
            maybe.setdefault(inflight[2], set()).add(inflight[0] if inflight[1] == "record" else None)
    return state, maybe, count


def check(home: Path, logs: list[Path], when: str) -> int:
    """Assert the file against the acknowledged changes; returns how many were acknowledged."""
    path = home / "desktop" / "interrupted_turns.json"
    raw = json.loads(path.read_bytes()) if path.exists() else {}  # never torn
    actual = {k: int(e["prompt"].split()[1]) for k, e in raw.items()}
    state, maybe, count = acked(logs)
    state.setdefault("seed", 0)  # recorded before the writers started, never touched by them
    for key in set(state) | set(actual) | set(maybe):
        allowed = {state.get(key)} | maybe.get(key, set())
        assert actual.get(key) in allowed, (
            f"{when}: {key} is {actual.get(key)}, acknowledged {state.get(key)}, in flight {maybe.get(key)}")
    return count


def litter(home: Path) -> list[str]:
    desktop = home / "desktop"
    left = [n for n in os.listdir(desktop) if n.endswith((".tmp", ".btmp"))]
    queue = desktop / ".interrupted_turns.json.queue"
    return left + ([f"queue/{n}" for n in os.listdir(queue)] if queue.is_dir() else [])


def crash_group_commit(workdir: Path, kills: int, rng: random.Random) -> KillStats:
    from hermes_tray_core.markers import MarkerStore

    stats = KillStats("markers, 4 contending writers (group commit)")
    t0 = time.monotonic()
    home = Path(workdir) / "home"
    home.mkdir(parents=True, exist_ok=True)
    MarkerStore(home).record("seed", "soak 0")
    stop = Path(workdir) / "stop"
    logs = [Path(workdir) / f"acks{n}" for n in range(WRITERS)]
    procs = {n: _writer(home, n, 1_000_000_000 * (n + 1), logs[n], stop, rng.randrange(1 << 30))
             for n in range(WRITERS)}
    try:
        deadline = time.monotonic() + 30
        while not all(log.exists() for log in logs):
            assert time.monotonic() < deadline, "the writers did not start"
            time.sleep(0.005)
        last = 0
        for k in range(kills):
            time.sleep(rng.uniform(0.01, 0.05))
            for p in procs.values():
                os.kill(p.pid, signal.SIGSTOP)
            count = check(home, logs, f"before kill {k}")
            stats.checks += 1
            if count > last:
                stats.rounds_with_ops += 1
            last = count
            victim = rng.randrange(WRITERS)
            procs[victim].kill()
            procs[victim].wait(10)
            stats.kills += 1
            for p in procs.values():
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGCONT)
            start = 1_000_000_000 * (victim + 1) + 1_000_000 * (k + 1)
            procs[victim] = _writer(home, victim, start, logs[victim], stop, rng.randrange(1 << 30))
        stop.touch()
        for p in procs.values():
            _out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
    stats.ops_acked = check(home, logs, "at the end")
    MarkerStore(home).record("after", "soak 1")
    left = litter(home)
    assert left == [], f"left behind: {left}"
    stats.seconds = time.monotonic() - t0
    return stats
