"""Benchmark: ``hermes-tray status --json`` wall time, cold and warm, vs a stat-only floor.

Fixture: 5 Hermes homes (root + 4 profiles) × 32 markers (dead writers, sessions in a real
``state.db`` with a turn-lease table) + 1,000 WebUI journals (200 per home). Measured in one
run, on the same files:

* floor — a minimal Python process that only ``stat``s every file ``status`` looks at;
* cold  — ``status --json`` with an empty scan cache (every journal parsed);
* warm  — ``status --json`` again (unchanged journals answered from the cache).

Each is a fresh process (interpreter start-up included, as a user would see it); the median of
``--runs`` repetitions is reported. Target: warm ≤ 3× floor.

    python tests/bench/bench_status.py [--runs 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

from tests.support.fixture_homes import FixtureHome, dead_pid, env_for, journal_turn  # noqa: E402

HOMES = 5
MARKERS = 32
JOURNALS = 1000

FLOOR = r"""
import os, sys
n = 0
for home in sys.argv[1:]:
    for rel in ("desktop/interrupted_turns.json", "config.yaml", "state.db"):
        try:
            os.stat(os.path.join(home, rel)); n += 1
        except OSError:
            pass
    try:
        for e in os.scandir(os.path.join(home, "webui", "sessions", "_turn_journal")):
            e.stat(); n += 1
    except OSError:
        pass
print(n)
"""


def build(base: Path) -> list[Path]:
    now = time.time()
    gone = dead_pid()
    root = FixtureHome(base / "hermes")
    homes = [root] + [FixtureHome(base / "hermes" / "profiles" / f"p{i}") for i in range(HOMES - 1)]
    for h, home in enumerate(homes):
        home.write_config("# bench\ndesktop:\n  auto_continue:\n    freshness_minutes: 30\nmodel: {provider: x}\n")
        entries = {}
        for i in range(MARKERS):
            key = f"2026{h:02d}{i:02d}_120000_{i:06x}"
            home.add_session(key, title=f"Session {h}/{i}")
            entries[key] = {"attempts": i % 3, "prompt": f"prompt {i}\n" + "x" * 200, "started_at": now - 60 * i,
                            "auto_continue": True, "writer_pid": gone, "writer_start_time": 1.0}
        home.db()  # lease table exists (no rows)
        home.write_markers(entries)
        home.close()
        for j in range(JOURNALS // HOMES):
            events = journal_turn(f"20260101T000000Z-{j:012x}", ["submitted", "worker_started", "assistant_started",
                                                                 "completed"], t0=now - 3600, text="hello " * 20)
            events += journal_turn(f"20260101T000100Z-{j:012x}", ["submitted", "worker_started", "completed"],
                                   t0=now - 1800)
            home.write_journal(f"web{h}_{j:04d}", events)
    return [h.path for h in homes]


def _child_cpu() -> float:
    try:
        import resource

        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime
    except ImportError:  # Windows: no per-child CPU accounting here
        return 0.0


CPU: dict[str, list[float]] = {}


def timed(argv: list[str], env: dict, label: str = "") -> tuple[float, str]:
    """Wall time of one fresh process (and its CPU time, recorded under ``label``)."""
    c0 = _child_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - t0
    CPU.setdefault(label, []).append(_child_cpu() - c0)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build the fixture here and keep it")
    opts = ap.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="bench-status-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        homes = build(base)
        env = env_for(base, HERMES_HOME=str(homes[0]), PYTHONPYCACHEPREFIX=str(base / "pycache"))
        # As a user runs it: the tray's dirs come from platformdirs (XDG variables point it into the
        # fixture), not from HERMES_TRAY_* overrides; byte-code is cached (a pip install compiles it).
        for name in [k for k in env if k.startswith("HERMES_TRAY_")]:
            del env[name]
        for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
            env[var] = str(base / "xdg" / var.lower())
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cache = base / "xdg" / "xdg_cache_home" / "hermes-tray"
        script = shutil.which("hermes-tray", path=str(Path(sys.executable).parent))
        # The installed console script, as a user runs it (else the module).
        status = [script, "status", "--json"] if script else [sys.executable, "-m", "hermes_tray", "status", "--json"]
        floor_cmd = [sys.executable, "-c", FLOOR, *map(str, homes)]
        _, out = timed(status, env)  # warm the OS page cache once; check the output
        assert (cache / "scan-cache.json").is_file(), "scan cache not where the benchmark clears it"
        doc = json.loads(out)
        nturns = len(doc["turns"])
        assert len(doc["homes"]) == HOMES and nturns == HOMES * MARKERS, (len(doc["homes"]), nturns)
        _, nfiles = timed(floor_cmd, env)
        floor, cold, warm = [], [], []
        for _ in range(opts.runs):
            floor.append(timed(floor_cmd, env, "floor")[0])
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(timed(status, env, "cold")[0])
            warm.append(timed(status, env, "warm")[0])
        f, c, w = (statistics.median(x) * 1000 for x in (floor, cold, warm))
        fc, cc, wc = (statistics.median(CPU[k]) * 1000 for k in ("floor", "cold", "warm"))
        print(f"fixture: {HOMES} homes x {MARKERS} markers + {JOURNALS} WebUI journals "
              f"({nfiles.strip()} files stat'ed by the floor); {nturns} turns reported; median of {opts.runs} runs")
        print(f"{'measure':<28}{'wall ms':>9}{'x floor':>9}{'cpu ms':>9}{'x floor':>9}")
        for name, wall, cpu in (("floor (stat-only python)", f, fc), ("status --json, cold", c, cc),
                                ("status --json, warm", w, wc)):
            print(f"{name:<28}{wall:>9.1f}{wall / f:>9.2f}{cpu:>9.1f}{cpu / fc if fc else 0:>9.2f}")
        print(f"target warm <= 3.0x floor (wall): {'met' if w / f <= 3.0 else 'NOT met'}")
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
