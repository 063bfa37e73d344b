"""Benchmark the Linux deliverable: bundle size and start-up of the frozen app vs the pip-installed app.

    python tests/bench/bench_packaging.py [--bundle DIR] [--tarball FILE] [--pip-command PATH] [--repeats N] [--json]

Without --bundle/--tarball it builds both (packaging/build.py, ~1 min); without --pip-command it
builds the wheel and pip-installs it into a fresh venv (a non-editable install, as users get).

Figures (targets from issue 7):
  * bundle size unpacked                                    (<= 150 MB)
  * hermes-tray-<v>-linux-<arch>.tar.gz size                (<= 60 MB)
  * start-up, frozen vs pip-installed, `--version` and `--help`, median of N runs,
    interleaved because the machine is shared              (frozen <= 1.5x pip)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MB = 1_000_000  # decimal megabytes, as the targets are stated
TARGETS = {"unpacked_mb": 150, "tarball_mb": 60, "startup_ratio": 1.5}


def tree_size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build(work: Path) -> tuple[Path, Path]:
    script = [sys.executable, str(REPO / "packaging" / "build.py")]
    subprocess.run([*script, "bundle", "--out", str(work), "--work", str(work / "pyi")], check=True)
    subprocess.run([*script, "linux-tarball", "--bundle", str(work / "hermes-tray"), "--out", str(work)], check=True)
    (tarball,) = work.glob("hermes-tray-*-linux-*.tar.gz")
    return work / "hermes-tray", tarball


def pip_install(work: Path) -> Path:
    quiet = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "wheel"), str(REPO)], **quiet)
    (wheel,) = (work / "wheel").glob("*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], **quiet)
    return venv / "bin" / "hermes-tray"


def time_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def startup(frozen: Path, pip: Path, repeats: int, home: Path) -> dict[str, dict[str, float]]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HERMES_HOME": str(home / ".hermes")}
    results = {}
    for args in (["--version"], ["--help"]):
        for exe in (frozen, pip):  # warm the page cache once each
            time_once([str(exe), *args], env)
        f_times, p_times = [], []
        for _ in range(repeats):
            f_times.append(time_once([str(frozen), *args], env))
            p_times.append(time_once([str(pip), *args], env))
        f_med, p_med = statistics.median(f_times), statistics.median(p_times)
        results[" ".join(args)] = {"frozen_ms": f_med * 1000, "pip_ms": p_med * 1000, "ratio": f_med / p_med}
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, help="an already-built one-folder bundle (dist/hermes-tray)")
    ap.add_argument("--tarball", type=Path, help="an already-built tarball")
    ap.add_argument("--pip-command", type=Path, help="hermes-tray from a pip/pipx install (default: build one)")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-packaging-") as tmp:
        work = Path(tmp)
        bundle, tarball = args.bundle, args.tarball
        if bundle is None or tarball is None:
            bundle, tarball = build(work / "dist")
        pip = args.pip_command or pip_install(work)
        home = work / "home"
        (home / ".hermes").mkdir(parents=True)
        res = {
            "unpacked_mb": tree_size(bundle) / MB,
            "tarball_mb": tarball.stat().st_size / MB,
            "startup": startup(bundle / "hermes-tray", pip, args.repeats, home),
            "repeats": args.repeats,
            "targets": TARGETS,
            "machine": f"{os.cpu_count()} cores",
        }
    ok = (
        res["unpacked_mb"] <= TARGETS["unpacked_mb"]
        and res["tarball_mb"] <= TARGETS["tarball_mb"]
        and all(s["ratio"] <= TARGETS["startup_ratio"] for s in res["startup"].values())
    )
    res["ok"] = ok
    if args.json:
        print(json.dumps(res, indent=2))
        return 0 if ok else 1
    print(f"bundle unpacked: {res['unpacked_mb']:6.1f} MB   (target <= {TARGETS['unpacked_mb']} MB)")
    print(f"tarball .tar.gz: {res['tarball_mb']:6.1f} MB   (target <= {TARGETS['tarball_mb']} MB)")
    for name, s in res["startup"].items():
        print(f"start-up `hermes-tray {name}`: frozen {s['frozen_ms']:6.1f} ms   pip {s['pip_ms']:6.1f} ms   "
              f"ratio {s['ratio']:.2f}x   (target <= {TARGETS['startup_ratio']}x, median of {args.repeats})")
    print("OK" if ok else "OVER TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
