"""Benchmark the ledger, the WebUI journal reader and core.stores.lease against bare baselines measured in the
same run.

    python tests/bench/bench_journal_lease.py [--dir DIR] [--quick]

Figures:
  * ledger decisions/s vs a bare SQLite INSERT + COMMIT (WAL, synchronous=FULL) on the same disk  (>= 0.5x)
  * read + derive of a 100,000-event WebUI journal vs a bare json.loads loop       (>= 0.7x)
  * lease acquire+release/s in one process
  * lease grants/s and holder changes/s with 8 contending processes
The WebUI's own journal (loaded from ../shared/reference when present) is timed alongside
for context. Baselines and candidates are interleaved and the median is reported, because
the machine is shared.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

from hermes_tray_core.stores import turn_journal as journal  # noqa: E402
from hermes_tray_core.stores.lease import LeaseStore  # noqa: E402

REFERENCE = Path(os.environ.get("HERMES_TRAY_REFERENCE_DIR", REPO.parent / "shared" / "reference"))


def load_webui():
    src = REFERENCE / "webui_turn_journal.py.txt"
    if not src.is_file():
        return None
    lines = src.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("@@")) + 1
    code = "\n".join(line[1:] if line.startswith("+") else line for line in lines[start:])
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("webui_ref", loader=None))
    exec(compile(code, str(src), "exec"), mod.__dict__)  # noqa: S102 - read-only reference, bench only
    return mod


def sample_event(i: int) -> dict:
    kinds = ("submitted", "worker_started", "assistant_started", "completed")
    return {"event": kinds[i % 4], "turn_id": f"20260101T120000Z-{i // 4:012x}", "created_at": 1767268800.0 + i,
            "stream_id": f"st-{i // 4}", "message": "Refactor the parser and run the tests " * 3}


def bench_ledger(root: Path, n: int, rounds: int, block: int = 20) -> dict:
    """Ledger decisions (each its own durable transaction) against a bare SQLite INSERT + COMMIT in WAL with
    ``synchronous=FULL`` on the same disk, interleaved in small blocks (order alternating), so a burst of load
    from other processes on the shared machine hits both alike."""
    import sqlite3

    from hermes_tray_core.stores.ledger import Ledger
    from hermes_tray_core.turn import TurnId

    bare, ours = [], []
    for r in range(rounds):
        d = root / f"ledger{r}"
        d.mkdir(parents=True)
        conn = sqlite3.connect(d / "bare.sqlite3", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, at REAL, event TEXT, details TEXT)")
        book = Ledger(d / "ledger.sqlite3")
        book.record("notified", TurnId(str(d), "warmup", 1.0, 0))  # type: ignore[arg-type]
        t_bare = t_ours = 0.0

        def run_bare(lo: int, hi: int, conn: sqlite3.Connection = conn) -> float:
            t0 = time.perf_counter()
            for _i in range(lo, hi):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t (at, event, details) VALUES (?, ?, ?)", (time.time(), "notified",
                                                                                      '{"via":"bench"}'))
                conn.execute("COMMIT")
            return time.perf_counter() - t0

        def run_ours(lo: int, hi: int, d: Path = d, book: Ledger = book) -> float:
            t0 = time.perf_counter()
            for i in range(lo, hi):
                book.record("notified", TurnId(str(d), f"s{i}", 1.0, 0), via="bench")  # type: ignore[arg-type]
            return time.perf_counter() - t0

        for k, lo in enumerate(range(0, n, block)):
            hi = min(n, lo + block)
            if k % 2:
                t_ours += run_ours(lo, hi)
                t_bare += run_bare(lo, hi)
            else:
                t_bare += run_bare(lo, hi)
                t_ours += run_ours(lo, hi)
        conn.close()
        bare.append(n / t_bare)
        ours.append(n / t_ours)
        shutil.rmtree(d)
    ratios = [o / b for o, b in zip(ours, bare, strict=True)]
    return {"bare_per_s": statistics.median(bare), "ours_per_s": statistics.median(ours),
            "ratio": statistics.median(ratios)}


def bench_read(root: Path, n: int, rounds: int, webui) -> dict:
    d = root / "read"
    (d / "_turn_journal").mkdir(parents=True)
    path = d / "_turn_journal" / "big.jsonl"
    with open(path, "wb") as fh:
        for i in range(n):
            fh.write((json.dumps({**sample_event(i), "version": 1, "session_id": "big"}, ensure_ascii=False,
                                 separators=(",", ":")) + "\n").encode())
    bare, ours, ref = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with open(path, "rb") as fh:
            data = fh.read()
        parsed = [json.loads(line) for line in data.decode("utf-8").splitlines()]
        bare.append(time.perf_counter() - t0)
        assert len(parsed) == n
        del parsed
        t0 = time.perf_counter()
        got = journal.read_journal_files("big", [(None, path)])
        states = journal.derive_turn_journal_states(got["events"])
        ours.append(time.perf_counter() - t0)
        assert len(got["events"]) == n and len(states) == n // 4
        del got, states
        if webui is not None:
            t0 = time.perf_counter()
            got = webui.read_turn_journal("big", session_dir=d)
            webui.derive_turn_journal_states(got["events"])
            ref.append(time.perf_counter() - t0)
            del got
    ratios = [b / o for b, o in zip(bare, ours, strict=True)]
    out = {"events": n, "bare_s": statistics.median(bare), "ours_s": statistics.median(ours),
           "ratio": statistics.median(ratios)}
    if ref:
        out["webui_s"] = statistics.median(ref)
    return out


def bench_lease_single(root: Path, n: int) -> dict:
    with LeaseStore(root / "single.sqlite3") as store:
        t0 = time.perf_counter()
        for _ in range(n):
            store.release(store.acquire("resume:h:s", "bench", ttl=30))
        elapsed = time.perf_counter() - t0
    return {"cycles_per_s": n / elapsed}


CONTENDER = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[5])
    from hermes_tray_core.stores.lease import LeaseStore
    db, idx, start_at, duration = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    s = LeaseStore(db)
    grants = []
    while time.time() < start_at:
        time.sleep(0.002)
    while time.time() < start_at + duration:
        lease = s.acquire("turn", "w" + idx, ttl=30, wait=duration, poll=float(sys.argv[6]))
        if lease is None:
            continue
        grants.append(lease.epoch)
        s.release(lease)
        time.sleep(0.0005)  # step back briefly, as a real caller would between turns
    print(json.dumps(grants))
""")


def bench_lease_contention(root: Path, procs: int, duration: float, poll: float) -> dict:
    db = root / f"contended-{poll}.sqlite3"
    LeaseStore(db).close()
    start_at = time.time() + 1.5
    children = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(db), str(i), str(start_at), str(duration),
                                  str(REPO), str(poll)], stdout=subprocess.PIPE, text=True) for i in range(procs)]
    owner: dict[int, int] = {}
    for i, c in enumerate(children):
        out, _ = c.communicate(timeout=duration + 60)
        for epoch in json.loads(out):
            owner[epoch] = i
    epochs = sorted(owner)
    assert epochs == list(range(1, len(epochs) + 1)), "epochs must be unique and gap-free"
    changes = sum(1 for a, b in zip(epochs, epochs[1:], strict=False) if owner[a] != owner[b])
    return {"processes": procs, "poll_s": poll, "grants_per_s": len(epochs) / duration,
            "holder_changes_per_s": changes / duration,
            "processes_served": len(set(owner.values()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hermes-tray-bench-", dir=args.dir))
    webui = load_webui()
    q = args.quick
    try:
        res = {
            "ledger": bench_ledger(root, 100 if q else 300, 3 if q else 5),
            "read": bench_read(root, 20_000 if q else 100_000, 3 if q else 7, webui),
            "lease_single": bench_lease_single(root, 200 if q else 1000),
            "lease_8proc": bench_lease_contention(root, 8, 1.5 if q else 3.0, 0.05),
            "lease_8proc_fastpoll": bench_lease_contention(root, 8, 1.5 if q else 3.0, 0.002),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    a, r, s = res["ledger"], res["read"], res["lease_single"]
    print(f"ledger decision: {a['ours_per_s']:8.0f}/s   bare SQLite insert+commit {a['bare_per_s']:8.0f}/s   "
          f"ratio {a['ratio']:.2f}x (target >= 0.50)")
    print(f"read+derive {r['events']:,} events: {r['ours_s'] * 1000:7.1f} ms   bare json.loads {r['bare_s'] * 1000:7.1f} ms"
          f"   ratio {r['ratio']:.2f}x (target >= 0.70)"
          + (f"   [WebUI reference {r['webui_s'] * 1000:.1f} ms]" if "webui_s" in r else ""))
    print(f"lease acquire+release, 1 process: {s['cycles_per_s']:8.0f}/s")
    for key in ("lease_8proc", "lease_8proc_fastpoll"):
        c = res[key]
        print(f"lease, {c['processes']} contending processes (poll {c['poll_s'] * 1000:g} ms): "
              f"{c['grants_per_s']:6.0f} grants/s, {c['holder_changes_per_s']:6.0f} hand-overs/s "
              f"(holder changed), {c['processes_served']}/{c['processes']} processes served")
    ok = a["ratio"] >= 0.5 and r["ratio"] >= 0.7
    print("targets:", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
