"""Long-run fault driver for hermes-tray (issue 8): kills, races, crash loops, hostile input.

Runs the same scenarios as ``tests/fault`` with the counts turned up and prints the figures
for the "Reliability" table in docs/reliability.md:

- crash injection: >= 500 SIGKILLs per kind (atomic write, markers, journal, lease,
  config.toml, config.yaml), each followed by the full check (``tests/fault/fault_scenarios.py``);
- skips against Hermes' own writer at ~100 writes/s (1,000 by default): lost / ghost /
  skipped-back counts, on the disk and on tmpfs;
- exactly-once races: rounds of tray + helper + 2 ``resume`` per turn, double dispatches;
- skip racing resume, double winners; the crash-loop bound;
- hostile input: the hypothesis tests with many more examples, and the tray/helper storm.

Usage (from the repo root, the project installed):

    python tests/bench/bench_fault.py                      # everything, default counts
    python tests/bench/bench_fault.py --only kills --kills 1000
    python tests/bench/bench_fault.py --only race,exactly-once --edits 2000 --rounds 10

Not collected by pytest (tests/bench is excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAULT = REPO / "tests" / "fault"
sys.path[:0] = [str(FAULT), str(REPO)]

SECTIONS = ("kills", "race", "exactly-once", "kill-resumer", "skip-race", "crash-loop", "hostile")


def log(msg: str) -> None:
    print(msg, flush=True)


def run_kills(n: int, seed: int, rows: dict, kinds_filter: str | None = None) -> None:
    import fault_scenarios as sc

    kinds = [
        ("atomic write (fsutil)", sc.crash_fsutil),
        ("markers", sc.crash_markers),
        ("lease ops", sc.crash_lease),
        ("config.toml", sc.crash_settings),
        ("config.yaml", sc.crash_config_yaml),
        ("ledger (bounded at each start)", sc.crash_ledger),
    ]
    if kinds_filter:
        kinds = [k for k in kinds if any(f.strip() in k[0] for f in kinds_filter.split(","))]
    log(f"\n== crash injection: {n} SIGKILLs per kind (seed {seed}) ==")
    for label, fn in kinds:
        work = Path(tempfile.mkdtemp(prefix="bench-fault-"))
        try:
            stats = fn(work, n, random.Random(seed))
            log(stats.line())
            rows.setdefault("kills", []).append((label, stats.kills, stats.ops_acked, stats.extra))
        except AssertionError as exc:
            log(f"{label}: FAILED after some kills: {exc}")
            rows.setdefault("kills", []).append((label, f"FAILED: {exc}", 0, {}))
        finally:
            shutil.rmtree(work, ignore_errors=True)


def run_race(edits: int, seed: int, rows: dict) -> None:
    """Skips against Hermes' own writer (the reference, ~100 writes/s, its own process); see fault_races."""
    import fault_races

    log(f"\n== non-locking Hermes writer (~100 writes/s) vs {edits} hermes-tray skips ==")
    variants = [("ext4/disk", None)]
    shm = os.environ.get("HERMES_TRAY_BENCH_TMPFS", "/dev/" + "shm")  # a tmpfs, for the no-journal comparison
    if os.path.isdir(shm):
        variants.append(("tmpfs", shm))
    for label, where in variants:
        work = Path(tempfile.mkdtemp(prefix="bench-race-", dir=where))
        try:
            r = fault_races.hermes_writer_race(work, edits, via="primitive", rate=105.0, max_seconds=900)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        log(f"{label}: {json.dumps(r)}")
        rows.setdefault("race", []).append((label, r))


def _sims(root: Path) -> dict:
    from hermes_tray.demo.sim_install import create_sim_install

    for cap in ("auto-continue", "legacy"):
        create_sim_install(root / cap, cap)
    return {cap: root / cap for cap in ("auto-continue", "legacy")}


def run_exactly_once(rounds: int, turns: int, rows: dict) -> None:
    import fault_resume_race as R

    log(f"\n== exactly-once: {rounds} rounds x 2 set-ups x {turns} turns, 4 contenders per turn ==")
    root = Path(tempfile.mkdtemp(prefix="bench-once-"))
    sims = _sims(root / "sims")
    total_turns = doubles = missed = 0
    try:
        for i in range(rounds):
            for cap, together in (("auto-continue", False), ("legacy", True), ("auto-continue", True),
                                  ("legacy", False)):
                r = R.exactly_once_race(root / f"r{i}-{cap}-{together}", turns, sims[cap], start_together=together)
                total_turns += r["turns"]
                doubles += r["double_dispatches"]
                missed += r["missed"]
                log(f"round {i} {cap:<13} together={together!s:<5} {R.dumps(r)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows["exactly-once"] = (total_turns, total_turns * 4, doubles, missed)


def run_kill_resumer(rounds: int, seed: int, rows: dict) -> None:
    import fault_resume_race as R

    log(f"\n== SIGKILL a `resume --wait` at a random point, resume again at once: {rounds} rounds per backend ==")
    root = Path(tempfile.mkdtemp(prefix="bench-killres-"))
    sims = _sims(root / "sims")
    out = {}
    try:
        for cap in ("auto-continue", "legacy"):
            r = R.kill_the_resumer(root / cap, sims[cap], rounds=rounds, seed=seed)
            out[cap] = r
            log(f"{cap}: rounds={r['rounds']} continuations={r['continuations']} "
                f"double_dispatches={r['double_dispatches']} over_budget={r['over_budget']} "
                f"started_but_cut_before_work={r.get('started_without_work', 0)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows["kill-resumer"] = out


def run_skip_race(rounds: int, rows: dict) -> None:
    import fault_resume_race as R

    log(f"\n== skip racing resume: {rounds} rounds per backend kind, skip at random points of the window ==")
    root = Path(tempfile.mkdtemp(prefix="bench-skip-"))
    sims = _sims(root / "sims")
    rng = random.Random(7)
    out = {}
    try:
        for cap in ("auto-continue", "legacy"):
            for claim in (True, False):
                n = double = skip_won = resume_won = 0
                for i in range(rounds):
                    r = R.skip_race_once(root / f"{cap}-{claim}-{i}", sims[cap], delay=0.6,
                                         skip_after=rng.uniform(0.0, 0.7), claim=claim)
                    n += 1
                    double += r["double_winner"]
                    skip_won += r["skipped"] and not r["continuations"]
                    resume_won += (not r["skipped"]) and r["continuations"] == 1
                label = f"{cap}, {'tray/CLI skip' if claim else 'bare compare-and-remove'}"
                out[label] = (n, double, skip_won, resume_won)
                log(f"{label}: rounds={n} double_winners={double} skip_won={skip_won} resume_won={resume_won}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows["skip-race"] = out


def run_crash_loop(rows: dict) -> None:
    import fault_resume_race as R

    log("\n== crash loop: every continuation SIGKILLed; helper in auto mode + 6 resume commands ==")
    root = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    sims = _sims(root / "sims")
    out = []
    try:
        for cap in ("auto-continue", "legacy"):
            for max_attempts in (1, 2, 3):
                r = R.crash_loop(root / f"{cap}-{max_attempts}", sims[cap], max_attempts=max_attempts, resume_calls=6)
                held = r["continuations"] == max_attempts and r["gave_up_journalled"]
                out.append((cap, max_attempts, r["continuations"], held))
                log(f"{cap} max_attempts={max_attempts}: continuations={r['continuations']} "
                    f"attempts={r['attempts_seen']} gave_up_journalled={r['gave_up_journalled']} held={held}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows["crash-loop"] = out


def run_hostile(examples: int, rows: dict) -> None:
    log(f"\n== hostile input: hypothesis with {examples} examples per test, plus the tray storm ==")
    env = {**os.environ, "HERMES_TRAY_FAULT_EXAMPLES": str(examples), "QT_QPA_PLATFORM": "offscreen"}
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-W", "ignore::UserWarning",
         str(FAULT / "test_fault_hostile.py"), str(FAULT / "test_fault_tray_hostile.py"), "-k", "not bomb"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    tried = 0
    for line in p.stdout.splitlines():
        m = re.search(r"hostile (.+?)\s+tried=(\d+)", line)
        if m:
            tried += int(m.group(2))
            log(line)
        m = re.search(r"hostile tray\+helper storm: (\d+) rewrites", line)
        if m:
            tried += int(m.group(1))
            log(line)
    summary = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-500:]
    log(f"pytest: {summary}")
    failed = re.search(r"(\d+) failed", summary)
    rows["hostile"] = (tried, int(failed.group(1)) if failed else 0, summary)


def table(rows: dict) -> str:
    out = ["| What | Measured |", "| --- | --- |"]
    for label, kills, ops, _extra in rows.get("kills", []):
        out.append(f"| SIGKILLs survived: {label} | {kills} kills, {ops} acknowledged writes checked, 0 lost/torn |")
    for label, r in rows.get("race", []):
        out.append(
            f"| Hermes non-locking writer ({r['hermes_writes_per_s']} writes/s) vs {r['skips']} tray skips ({label}) | "
            f"{r['lost']} Hermes entries lost, {r['ghosts']} cleared entries back, {r['skipped_back']} skipped "
            f"entries back; {r['reapplied']} stale writes undone in the settle window |"
        )
    if "exactly-once" in rows:
        t, c, d, m = rows["exactly-once"]
        out.append(f"| Exactly-once races (tray + helper + 2 CLI per turn) | {t} turns, {c} contenders: "
                   f"{d} double dispatches, {m} missed |")
    for cap, r in rows.get("kill-resumer", {}).items():
        out.append(f"| `resume` SIGKILLed at random, resumed again at once ({cap}) | {r['rounds']} kills: "
                   f"{r['double_dispatches']} double dispatches, {r['over_budget']} over budget |")
    for cap, (n, double, sw, rw) in rows.get("skip-race", {}).items():
        out.append(f"| Skip racing resume ({cap} backend) | {n} races: {double} double winners "
                   f"(skip won {sw}, resume won {rw}) |")
    if rows.get("crash-loop"):
        held = all(h for *_x, h in rows["crash-loop"])
        desc = ", ".join(f"{cap} budget {m}: {c}" for cap, m, c, _h in rows["crash-loop"])
        out.append(f"| Crash loop bound (dispatches at each budget) | {'held' if held else 'BROKEN'}: {desc} |")
    if "hostile" in rows:
        tried, failed, _s = rows["hostile"]
        out.append(f"| Hostile inputs tried / crashes | {tried} / {failed} failing tests |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--kills", type=int, default=500)
    ap.add_argument("--kinds", default=None, help="only these kill kinds (substrings, comma list)")
    ap.add_argument("--edits", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5, help="exactly-once rounds (x4 set-ups)")
    ap.add_argument("--turns", type=int, default=6, help="turns per exactly-once round")
    ap.add_argument("--skip-rounds", type=int, default=10)
    ap.add_argument("--resumer-kills", type=int, default=25, help="kill-the-resumer rounds per backend kind")
    ap.add_argument("--examples", type=int, default=500, help="hypothesis examples per hostile test")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    rows: dict = {}
    t0 = time.monotonic()
    if "kills" in only:
        run_kills(args.kills, args.seed, rows, args.kinds)
    if "race" in only:
        run_race(args.edits, args.seed, rows)
    if "exactly-once" in only:
        run_exactly_once(args.rounds, args.turns, rows)
    if "kill-resumer" in only:
        run_kill_resumer(args.resumer_kills, args.seed, rows)
    if "skip-race" in only:
        run_skip_race(args.skip_rounds, rows)
    if "crash-loop" in only:
        run_crash_loop(rows)
    if "hostile" in only:
        run_hostile(args.examples, rows)
    log(f"\n== Reliability (seed {args.seed}, {time.monotonic() - t0:.0f} s) ==")
    log(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
