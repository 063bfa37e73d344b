"""Benchmark: the headless helper's CPU while Hermes rewrites the marker file continuously (a storm).

    python tests/bench/bench_storm.py [--seconds 120] [--idle-seconds 20] [--limit 10]

On the repository's test desktop (``tests/desktop/session.py``: a session bus and a recording notification
server), ``hermes-tray helper`` watches a home where six turns crash (real Hermes, SIGKILLed), then a real
Hermes process rewrites the marker file as fast as it can for ``--seconds`` (``tests/support/marker_storm.py``:
its own turn recorded and cleared, and each crashed turn's marker made to flicker by a second backend's stale
write). Printed, all from this one run: the helper's CPU (% of one core) while idle with the six turns waiting
and during the storm, the storm's ratio to idle and to ``--limit`` (default 10 % of a core), the storm's
whole-file writes per second, and the notifications the server received. Needs the real Hermes
(``python tests/integration/hermes_venv.py g2``). Run it with the interpreter of an environment where the
product is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

TURNS = [f"storm-{i}" for i in range(6)]


def cpu_percent(proc: psutil.Process, seconds: float) -> float:
    """% of one core ``proc`` used over the next ``seconds`` (all its threads)."""
    before, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    time.sleep(seconds)
    return (sum(proc.cpu_times()[:2]) - before) / (time.monotonic() - t0) * 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--limit", type=float, default=10.0, help="% of one core the storm may cost")
    args = parser.parse_args()
    from tests.desktop.session import Desktop, TrayKind
    from tests.support.hermes_reference import hermes_python
    from tests.support.marker_storm import crash_turns, start_storm
    from tests.support.product import product_env, tray_argv

    python = hermes_python()
    if python is None:
        print("needs the real Hermes: python tests/integration/hermes_venv.py g2")
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-storm-"))
    home = work / "hermes-home"
    (home / "desktop").mkdir(parents=True)
    (home / "config.yaml").write_text("model: {}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES")}
    env["HOME"] = str(work / "user")
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        env[f"HERMES_TRAY_{name}_DIR"] = str(work / f"tray-{name.lower()}")
    hermes_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    with Desktop(TrayKind.NONE) as desktop:
        env.update(desktop.env)
        helper = subprocess.Popen(tray_argv("helper", "--home", home), env=product_env(env),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(5)  # start-up and the first scan are not idle time
            proc = psutil.Process(helper.pid)
            crash_turns(python, home, TURNS, env=hermes_env)
            time.sleep(5)  # the crash storm's notification and journal write
            idle = cpu_percent(proc, args.idle_seconds)
            t0 = time.time()
            storm = start_storm(python, home, args.seconds, env=hermes_env)
            time.sleep(1)  # the writer's interpreter starting
            during = cpu_percent(proc, max(1.0, args.seconds - 2))
            writes = int((storm.communicate(timeout=args.seconds + 120)[0] or "0").strip())
            time.sleep(3)
            notes = [n for n in desktop.notifications() if n["app_name"] == "Hermes Tray" and n["time"] >= t0]
        finally:
            helper.terminate()
            helper.wait(timeout=30)
    print(f"marker storm: {writes} whole-file writes in {args.seconds:.0f} s ({writes / args.seconds:.0f}/s), "
          f"{len(TURNS)} crashed turns flickering")
    print(f"  helper CPU idle (turns waiting) {idle:5.2f} % of a core over {args.idle_seconds:.0f} s")
    vs_idle = f"{during / idle:.0f}× idle" if idle >= 0.05 else "idle too small to divide by"
    print(f"  helper CPU under the storm      {during:5.2f} % of a core ({vs_idle}), "
          f"{during / args.limit:.2f}× the limit of {args.limit:.0f} %: {'met' if during <= args.limit else 'NOT met'}")
    print(f"  notifications during the storm: {len(notes)} (for {len(TURNS)} turns, all notified before it began)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
