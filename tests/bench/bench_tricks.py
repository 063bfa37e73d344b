"""Benchmark: does each remaining speed or memory trick of the engine pay for itself? One run, alternated.

Each trick against its plain alternative, in what a user feels:

* ``core.digest`` (CPython's built-in SHA-256) vs ``hashlib.sha256`` (OpenSSL's: maps libcrypto);
* ``core.lazy_log`` (``logging`` imported on first use) vs ``logging.getLogger`` at import;
* the journal reader's fast path (``core.stores.turn_journal._parse_clean``: one C scan over the file) vs ``json.loads``
  line by line (what ``_parse_lines`` does when the fast path declines), and its read by descriptor
  (``core.stores.turn_journal._read_bytes``) vs ``open(path, "rb").read()``;
* ``hermes_tray.cli.main._exit_now`` (a finished command skips the interpreter's teardown) vs a normal exit.

Measured: ``hermes-tray status --json`` cold (empty scan cache: every WebUI journal parsed) and warm, on
bench_status's fixture (5 homes x 32 markers + 1,000 WebUI journals), wall and CPU time of a fresh
process, median of ``--runs``; and the tray's idle RSS after ``--idle-seconds`` on the repository's test
desktop (tests/desktop/session.py, XEmbed tray), median of ``--tray-runs``. Every variant runs through
the same launcher (the product's own entry point, with the plain alternative patched in first), and the
variants take turns within each repetition, so load on the machine hits them alike.

    python tests/bench/bench_tricks.py [--runs 15] [--tray-runs 3] [--idle-seconds 20] [--no-tray]

Run it with the interpreter of an environment where the product is installed (not editable).
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
sys.path[:0] = [str(REPO), str(REPO / "tests" / "bench")]

import bench_status  # noqa: E402

#: The plain alternative to core.stores.turn_journal._read_bytes (for the child processes below).
PLAIN_READ = r"""
def plain_read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
"""

#: argv[1]: the tricks to replace by their plain alternative (comma-separated); the rest: the command. Modules
#: are patched as importlib hands them out (``import hermes_tray.cli.main as m`` would bind the package's
#: ``main`` function, not the module).
LAUNCHER = PLAIN_READ + r"""
import importlib, sys
plain = set(filter(None, sys.argv[1].split(",")))
mod = importlib.import_module
if "lazy_log" in plain:
    import logging
    mod("hermes_tray_core.lazy_log").get_logger = logging.getLogger
if "digest" in plain:
    import hashlib
    mod("hermes_tray_core.digest")._sha256 = hashlib.sha256
if "journal" in plain:
    mod("hermes_tray_core.stores.turn_journal")._parse_clean = lambda text: None  # every file read line by line: json.loads
if "read" in plain:
    mod("hermes_tray_core.stores.turn_journal")._read_bytes = plain_read
if "exit" in plain:
    mod("hermes_tray.cli.main")._exit_now = lambda code: None  # the interpreter's ordinary teardown
sys.argv = ["hermes-tray", *sys.argv[2:]]
from hermes_tray.cli import entry
entry()
"""

VARIANTS = {"as shipped": "", "plain digest": "digest", "plain logging": "lazy_log", "plain journal reader": "journal",
            "plain file read": "read", "plain exit": "exit"}
#: which variants can change what: a trick is compared only where it can matter
STATUS_VARIANTS = ("as shipped", "plain digest", "plain logging", "plain journal reader", "plain file read",
                   "plain exit")
TRAY_VARIANTS = ("as shipped", "plain digest", "plain logging")


def _cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def launch(plain: str, *args: str) -> list[str]:
    """Run from a directory that holds no code (``-c`` puts the working directory on the path): the product
    comes from the installation."""
    return [sys.executable, "-c", LAUNCHER, plain, *args]


def status_run(plain: str, env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run(launch(plain, "status", "--json"), env=env, capture_output=True, text=True, cwd=cwd)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"status ({plain or 'as shipped'}) failed: {proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout


def bench_status_variants(runs: int) -> tuple[dict[str, dict[str, list[float]]], dict[str, list[float]]]:
    """(per variant and kind — ``"<variant>|cold"`` … and ``"floor"`` —: wall and CPU seconds of each run;
    :func:`reader_in_process`'s answer)."""
    base = Path(tempfile.mkdtemp(prefix="bench-tricks-"))
    try:
        homes = bench_status.build(base)
        env, cache = bench_status.user_env(base, homes)
        floor_cmd = [sys.executable, "-c", bench_status.FLOOR, *map(str, homes)]
        outputs = {}
        for variant in STATUS_VARIANTS:  # warm the page cache and the byte-code; the answers must agree
            outputs[variant] = json.loads(status_run(VARIANTS[variant], env, base)[2])
        ref = outputs["as shipped"]
        assert len(ref["turns"]) == bench_status.HOMES * bench_status.MARKERS, len(ref["turns"])
        for variant, doc in outputs.items():
            assert [t["session_key"] for t in doc["turns"]] == [t["session_key"] for t in ref["turns"]], variant
        out: dict[str, dict[str, list[float]]] = {}
        for _ in range(runs):
            c0, t0 = _cpu(), time.perf_counter()
            subprocess.run(floor_cmd, env=env, capture_output=True, check=True)
            out.setdefault("floor", {}).setdefault("wall", []).append(time.perf_counter() - t0)
            out["floor"].setdefault("cpu", []).append(_cpu() - c0)
            for variant in STATUS_VARIANTS:
                shutil.rmtree(cache, ignore_errors=True)
                for kind in ("cold", "warm"):
                    wall, cpu, _ = status_run(VARIANTS[variant], env, base)
                    row = out.setdefault(f"{variant}|{kind}", {})
                    row.setdefault("wall", []).append(wall)
                    row.setdefault("cpu", []).append(cpu)
        return out, reader_in_process(base, runs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


READER = PLAIN_READ + r"""
import json, sys, time
from hermes_tray_core.stores import turn_journal as journal
files = json.loads(sys.argv[1])
runs = int(sys.argv[2])
fast_parse, fd_read = journal._parse_clean, journal._read_bytes
variants = {"as shipped": (fast_parse, fd_read), "plain journal reader": (lambda text: None, fd_read),
            "plain file read": (fast_parse, plain_read)}
out = {k: [] for k in variants}
for _ in range(runs + 1):
    for name, (parse, read) in variants.items():
        journal._parse_clean, journal._read_bytes = parse, read
        t0 = time.process_time()
        docs = [journal.read_journal_files(sid, [(None, path)]) for sid, path in files]
        out[name].append(time.process_time() - t0)
        assert sum(len(d["events"]) for d in docs) == 7 * len(files)
print(json.dumps({k: v[1:] for k, v in out.items()}))  # the first pass warms the caches
"""


def reader_in_process(base: Path, runs: int) -> dict[str, list[float]]:
    """CPU time of reading every WebUI journal of the fixture once (the work of a cold scan), per variant,
    in one fresh process of the installation, variants alternated pass by pass."""
    files = sorted((p.name[:-len(".jsonl")], str(p)) for p in base.rglob("_turn_journal/*.jsonl"))
    proc = subprocess.run([sys.executable, "-c", READER, json.dumps(files), str(runs)], capture_output=True,
                          text=True, cwd=base, check=True)
    return json.loads(proc.stdout)


def tray_rss(runs: int, idle: float) -> dict[str, list[float]]:
    import psutil

    from tests.desktop.session import Desktop, TrayKind
    from tests.support.fixture_homes import FixtureHome

    out: dict[str, list[float]] = {v: [] for v in TRAY_VARIANTS}
    with Desktop(TrayKind.XEMBED) as desk:
        work = desk.dir / "tricks"
        home = FixtureHome(work / "home")
        home.db()
        home.close()
        (home.path / "desktop").mkdir(parents=True, exist_ok=True)
        home.write_config("desktop:\n  auto_continue:\n    enabled: true\n")
        for run in range(runs):
            procs = {}
            for variant in TRAY_VARIANTS:  # side by side, on the same desktop
                env = {**os.environ, **desk.env, "HERMES_TRAY_EVENTS": "-"}
                for key in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
                    env[f"HERMES_TRAY_{key}_DIR"] = str(work / f"{run}-{variant}" / key.lower())
                procs[variant] = subprocess.Popen(launch(VARIANTS[variant], "tray", "--home", str(home.path)),
                                                  env=env, stdout=subprocess.PIPE, text=True, cwd=work)
            try:
                for variant, proc in procs.items():
                    end = time.monotonic() + 60
                    while '"scan"' not in (proc.stdout.readline() if proc.stdout else ""):
                        if proc.poll() is not None or time.monotonic() > end:
                            raise SystemExit(f"tray ({variant}) did not scan")
                time.sleep(idle)
                for variant, proc in procs.items():
                    out[variant].append(psutil.Process(proc.pid).memory_info().rss / 2**20)
            finally:
                for proc in procs.values():
                    proc.terminate()
                for proc in procs.values():
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            print(f"tray run {run + 1}/{runs}: " + ", ".join(f"{v} {out[v][-1]:.1f} MB" for v in TRAY_VARIANTS),
                  file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--tray-runs", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--no-tray", action="store_true", help="status only (no desktop needed)")
    opts = ap.parse_args()

    st, reader_runs = bench_status_variants(opts.runs)
    med = {k: {m: statistics.median(v) * 1000 for m, v in row.items()} for k, row in st.items()}
    floor = med["floor"]
    print(f"status --json on {bench_status.HOMES} homes x {bench_status.MARKERS} markers + {bench_status.JOURNALS} "
          f"WebUI journals; median of {opts.runs} alternated runs; floor (stat-only python) "
          f"{floor['wall']:.1f} ms wall, {floor['cpu']:.1f} ms cpu")
    print(f"{'variant':<24}{'kind':<6}{'wall ms':>9}{'x floor':>9}{'cpu ms':>9}{'cpu vs shipped':>16}")
    for variant in STATUS_VARIANTS:
        for kind in ("cold", "warm"):
            m = med[f"{variant}|{kind}"]
            shipped = med[f"as shipped|{kind}"]
            print(f"{variant:<24}{kind:<6}{m['wall']:>9.1f}{m['wall'] / floor['wall']:>9.2f}{m['cpu']:>9.1f}"
                  f"{m['cpu'] - shipped['cpu']:>+10.1f} ms ({m['cpu'] / shipped['cpu']:.3f}x)")
    reader = {k: statistics.median(v) * 1000 for k, v in reader_runs.items()}
    print(f"\nreading the {bench_status.JOURNALS} WebUI journals once (a cold scan's share), in-process, CPU ms, "
          f"median of {opts.runs} alternated passes")
    for variant, ms in reader.items():
        print(f"  {variant:<22}{ms:>7.1f} ms  {ms - reader['as shipped']:+.1f} ms ({ms / reader['as shipped']:.2f}x)")
    if not opts.no_tray:
        rss = tray_rss(opts.tray_runs, opts.idle_seconds)
        shipped = statistics.median(rss["as shipped"])
        print(f"\ntray idle RSS after {opts.idle_seconds:.0f} s (test desktop, XEmbed), median of {opts.tray_runs} "
              "side-by-side runs")
        for variant in TRAY_VARIANTS:
            r = statistics.median(rss[variant])
            print(f"  {variant:<22}{r:>7.1f} MB  {r - shipped:+.1f} MB ({r / shipped:.3f}x)   runs: "
                  + " ".join(f"{x:.1f}" for x in rss[variant]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
