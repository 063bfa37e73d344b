"""Benchmark: ``hermes-tray status --json`` wall time, cold and warm, vs a stat-only floor.

Fixture: 5 Hermes homes (root + 4 profiles) × 32 markers (dead writers, sessions in a real
``state.db`` with a turn-lease table and Hermes' ``messages``: 20 rows of earlier turns per session, then
the interrupted turn's own tool calls, results and text) + 1,000 WebUI journals (200 per home). Measured
in one run, on the same files:

* floor — a minimal Python process that only ``stat``s every file ``status`` looks at;
* cold  — ``status --json`` with an empty scan cache (every journal parsed);
* warm  — ``status --json`` again (unchanged journals answered from the cache);
* the facts — the same scan in this process with and without reading how far each turn got and why it
  stopped (``Scanner(read_progress=...)``, alternated): what those reads add to a ``status``. Target ≤ 5 ms.

Each process figure is a fresh process (interpreter start-up included, as a user would see it); the median
of ``--runs`` repetitions is reported. Targets: cold ≤ 6× floor, warm ≤ 3× floor. ``--peer PYTHON`` also
times the ``status`` of another installation (that interpreter's environment, e.g. the code before a
change), alternated with this one's in every repetition.

    python tests/bench/bench_status.py [--runs 7] [--keep DIR] [--peer /path/to/other/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
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
HISTORY_ROWS = 20  # rows of earlier turns in each marker's session (not the interrupted turn's)
FACTS_TARGET_MS = 5.0

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
        home.db().execute("BEGIN")
        for i in range(MARKERS):
            key = f"2026{h:02d}{i:02d}_120000_{i:06x}"
            home.add_session(key, title=f"Session {h}/{i}")
            started = now - 60 * i
            for j in range(HISTORY_ROWS):  # earlier turns: not this turn's progress
                home.add_message(key, "user" if j % 2 == 0 else "assistant", "earlier " * 40, at=started - 3600 + j)
            home.add_message(key, "user", f"prompt {i}", at=started - 2)
            for j in range(i % 5):  # the interrupted turn: tool calls and their results, then some text
                home.add_message(key, "assistant", "", at=started + 3 * j + 1,
                                 calls=[("terminal", {"command": f"pytest -k case{j}\n" + "x" * 300})])
                home.add_message(key, "tool", "output line\n" * 200, at=started + 3 * j + 2, tool="terminal")
            if i % 2:
                home.add_message(key, "assistant", "Working on it.\n\n" + "detail " * 100, at=started + 20,
                                 finish="verify_hook_continue")
            entries[key] = {"attempts": i % 3, "prompt": f"prompt {i}\n" + "x" * 200, "started_at": started,
                            "auto_continue": True, "writer_pid": gone, "writer_start_time": now - 7200}
        home.db().execute("COMMIT")
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


def user_env(base: Path, homes: list[Path]) -> tuple[dict[str, str], Path]:
    """(the environment ``status`` runs in, the scan cache's directory). As a user runs it: the tray's dirs
    come from platformdirs (XDG variables point it into the fixture), not from HERMES_TRAY_* overrides;
    byte-code is cached (a pip install compiles it)."""
    env = env_for(base, HERMES_HOME=str(homes[0]), PYTHONPYCACHEPREFIX=str(base / "pycache"))
    for name in [k for k in env if k.startswith("HERMES_TRAY_")]:
        del env[name]
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        env[var] = str(base / "xdg" / var.lower())
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env, base / "xdg" / "xdg_cache_home" / "hermes-tray"


def status_argv(python: str) -> list[str]:
    """``status --json`` of the installation ``python`` belongs to: its console script, as a user runs it
    (else the module)."""
    script = shutil.which("hermes-tray", path=str(Path(python).parent))
    return [script, "status", "--json"] if script else [python, "-m", "hermes_tray", "status", "--json"]


def facts_cost(homes: list[Path], env: dict[str, str], runs: int) -> dict[tuple[str, bool], float]:
    """Median wall ms of one warm scan of every home in this process (as a warm ``status`` scans: the scan
    cache answers for the WebUI journals), with and without the facts (how far each turn got, why it
    stopped), alternated so that load hits both alike."""
    os.environ.update(env)
    from hermes_tray_core import Scanner, default_cache_file, discover_homes

    found = discover_homes(explicit=[str(h) for h in homes])
    times: dict[tuple[str, bool], list[float]] = {}
    for i in range(runs + 2):  # the first two warm the imports, the page cache and the scan cache
        for flag in ((True, False) if i % 2 else (False, True)):
            t0, c0 = time.perf_counter(), time.process_time()
            turns = Scanner(found, read_progress=flag, cache_file=default_cache_file()).scan().turns
            took, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert len(turns) == HOMES * MARKERS and all((t.progress is not None) == flag for t in turns)
            if i >= 2:
                times.setdefault(("wall", flag), []).append(took)
                times.setdefault(("cpu", flag), []).append(cpu)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build the fixture here and keep it")
    ap.add_argument("--peer", help="the python of another installation, timed alternately on the same files")
    opts = ap.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="bench-status-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        homes = build(base)
        env, cache = user_env(base, homes)
        status = status_argv(sys.executable)
        peer = status_argv(opts.peer) if opts.peer else None
        floor_cmd = [sys.executable, "-c", FLOOR, *map(str, homes)]
        _, out = timed(status, env)  # warm the OS page cache once; check the output
        assert (cache / "scan-cache.json").is_file(), "scan cache not where the benchmark clears it"
        doc = json.loads(out)
        nturns = len(doc["turns"])
        assert len(doc["homes"]) == HOMES and nturns == HOMES * MARKERS, (len(doc["homes"]), nturns)
        if peer:
            assert len(json.loads(timed(peer, env)[1])["turns"]) == nturns, "the peer reports other turns"
        _, nfiles = timed(floor_cmd, env)
        walls: dict[str, list[float]] = {}
        for _ in range(opts.runs):
            walls.setdefault("floor", []).append(timed(floor_cmd, env, "floor")[0])
            for who, argv in (("", status), ("peer ", peer)):
                if argv is None:
                    continue
                shutil.rmtree(cache, ignore_errors=True)
                for kind in ("cold", "warm"):
                    walls.setdefault(who + kind, []).append(timed(argv, env, who + kind)[0])
        wall = {k: statistics.median(v) * 1000 for k, v in walls.items()}
        cpu = {k: statistics.median(v) * 1000 for k, v in CPU.items()}
        f, fc = wall["floor"], cpu["floor"]
        print(f"fixture: {HOMES} homes x {MARKERS} markers + {JOURNALS} WebUI journals "
              f"({nfiles.strip()} files stat'ed by the floor); {nturns} turns reported; median of {opts.runs} runs")
        print(f"{'measure':<28}{'wall ms':>9}{'x floor':>9}{'cpu ms':>9}{'x floor':>9}")
        rows = [("floor (stat-only python)", "floor"), ("status --json, cold", "cold"), ("status --json, warm", "warm")]
        if peer:
            rows += [("peer status --json, cold", "peer cold"), ("peer status --json, warm", "peer warm")]
        for name, key in rows:
            print(f"{name:<28}{wall[key]:>9.1f}{wall[key] / f:>9.2f}{cpu[key]:>9.1f}{cpu[key] / fc if fc else 0:>9.2f}")
        if peer:
            print(f"this / peer (wall): cold {wall['cold'] / wall['peer cold']:.2f}x, "
                  f"warm {wall['warm'] / wall['peer warm']:.2f}x")
        print(f"target cold <= 6.0x floor (wall): {'met' if wall['cold'] / f <= 6.0 else 'NOT met'}")
        print(f"target warm <= 3.0x floor (wall): {'met' if wall['warm'] / f <= 3.0 else 'NOT met'}")
        n = max(opts.runs, 41)
        facts = facts_cost(homes, env, n)
        for kind in ("wall", "cpu"):
            with_, without = facts[(kind, True)], facts[(kind, False)]
            print(f"one warm scan of the {nturns} turns in this process, {kind} (median of {n}, alternated): "
                  f"{with_:.1f} ms with the facts, {without:.1f} ms without -> +{with_ - without:.1f} ms "
                  f"({with_ / without:.2f}x)")
        added = facts[("wall", True)] - facts[("wall", False)]
        print(f"target facts add <= {FACTS_TARGET_MS:.0f} ms (wall): {'met' if added <= FACTS_TARGET_MS else 'NOT met'}")
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
