"""Benchmark: ``resume`` → the continuation's ``message.start``, vs a minimal client, same run.

For each backend (the simulated one, and the real hermes-agent 0.19.0 gateway when its cached
venv exists or can be created), alternating runs of:

* **hermes-tray**: ``core.resume.resume_turn`` — claim lease, marker re-check, policy, journal,
  capability (cached), spawn, ``gateway.ready``, ``session.resume``, marker for the run,
  ``prompt.submit`` — until ``message.start`` arrives;
* **minimal client**: ``Popen`` + readline + ``json`` doing only spawn, ready, ``session.resume``,
  ``prompt.submit``, first ``message.start``.

Both take each time stamp where the frame has just been read and parsed from the gateway's stdout
(hermes-tray: in its reader thread; the minimal client: after its ``readline``), ``time.monotonic``.

Prints medians split into spawn→ready, resume round trip and resume→first frame, and the ratio
(target ≤ 1.1×).

Then, with the real ``hermes dashboard`` (0.19.0) running for the home, alternating runs of:

* **hermes-tray, running backend**: ``resume_turn`` as the tray calls it — claim, re-check, policy,
  journal, finding the dashboard (process table), its port and token (page), capability (cached),
  ``/api/ws`` connect, ``session.active_list``, ``session.resume``, marker, ``prompt.submit`` —
  until ``message.start``;
* **minimal WebSocket client**: connect with the known port and token, ``gateway.ready``,
  ``session.resume``, ``prompt.submit``, first ``message.start`` — nothing else;
* **hermes-tray, spawned gateway**: the same ``resume_turn`` told not to use the running backend.

Prints the ratio to the minimal client (target ≤ 1.1×) and the speed-up over the spawned path.
Run: ``python tests/bench/bench_resume.py [--runs N] [--real-runs N] [--live-runs N] [--no-real]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
import _testpath  # noqa: E402,F401 - the installed product; tests.* from this checkout

from hermes_tray.demo.sim_install import create_sim_install, sim_command  # noqa: E402
from hermes_tray_core import gateway  # noqa: E402
from hermes_tray_core.resume import resume_turn  # noqa: E402
from tests.support.sim_homes import make_home, plant_marker, tray_dirs  # noqa: E402

PROMPT = "Benchmark prompt: summarise the repository layout."


def minimal_client(argv: list[str], home: Path, key: str, cwd: str) -> dict[str, float]:
    """The floor: spawn, ready, session.resume, prompt.submit, first message.start — nothing else."""
    env = gateway.gateway_environment(home)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,  # noqa: S603
                         env=env, cwd=cwd)
    assert p.stdin is not None and p.stdout is not None
    out: dict[str, float] = {}
    try:
        def until(pred):
            while True:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError("gateway exited")
                f = json.loads(line)
                if pred(f):
                    return f

        until(lambda f: f.get("method") == "event" and f["params"].get("type") == "gateway.ready")
        out["ready"] = time.monotonic() - t0
        t1 = time.monotonic()
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.resume",
                                  "params": {"session_id": key}}).encode() + b"\n")
        p.stdin.flush()
        sid = until(lambda f: f.get("id") == 1)["result"]["session_id"]
        out["resume"] = time.monotonic() - t1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
                                  "params": {"session_id": sid, "text": "x " + PROMPT}}).encode() + b"\n")
        p.stdin.flush()
        until(lambda f: f.get("method") == "event" and f["params"].get("type") == "message.start")
        out["first_frame"] = time.monotonic() - t1
        out["total"] = time.monotonic() - t0
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return out


def tray_run(home: Path, key: str, install: gateway.HermesInstall, cwd: str) -> dict[str, float]:
    entry = plant_marker(home, key, PROMPT)
    t0 = time.monotonic()
    res = resume_turn(home, key, entry, install=install, via="bench")
    if res.outcome != "completed" or res.continuation is None:
        raise RuntimeError(f"bench resume failed: {res.outcome}: {res.message}")
    t = res.continuation.timings
    return {"ready": t["ready"], "resume": t["resume"], "first_frame": t["first_frame"],
            "total": t["message_start_at"] - t0}


def ws_minimal_client(port: int, token: str, key: str) -> float:
    """The floor through the running backend: connect, ready, session.resume, prompt.submit, message.start."""
    from websockets.sync.client import connect

    t0 = time.monotonic()
    with connect(f"ws://127.0.0.1:{port}/api/ws?token={token}", origin=f"http://127.0.0.1:{port}",
                 max_size=None, compression=None) as ws:
        def until(pred):
            while True:
                for line in str(ws.recv(timeout=60)).split("\n"):
                    if line.strip():
                        f = json.loads(line)
                        if pred(f):
                            return f

        until(lambda f: f.get("method") == "event" and f["params"].get("type") == "gateway.ready")
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.resume", "params": {"session_id": key}}))
        sid = until(lambda f: f.get("id") == 1)["result"]["session_id"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
                            "params": {"session_id": sid, "text": "x " + PROMPT}}))
        until(lambda f: f.get("method") == "event" and f["params"].get("type") == "message.start")
        took = time.monotonic() - t0
        until(lambda f: f.get("method") == "event" and f["params"].get("type") == "message.complete")  # untimed
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session.close", "params": {"session_id": sid}}))
        until(lambda f: f.get("id") == 3)
    return took


LIVE_PARTS: list[dict[str, float]] = []


def tray_live_run(home: Path, key: str, *, prefer: bool, install: gateway.HermesInstall | None = None) -> float:
    entry = plant_marker(home, key, PROMPT)
    t0 = time.monotonic()
    res = resume_turn(home, key, entry, install=install, via="bench", prefer_running_backend=prefer)
    c = res.continuation
    if res.outcome != "completed" or c is None:
        raise RuntimeError(f"bench resume failed: {res.outcome}: {res.message}")
    want = gateway.RUNNING_BACKEND if prefer else gateway.SEPARATE_PROCESS
    if c.ran_in != want:
        raise RuntimeError(f"bench resume ran {c.ran_in}, wanted {want}: {res.fallback_reason}")
    if prefer:
        LIVE_PARTS.append({k: v for k, v in c.timings.items() if not k.endswith("_at")})
    return c.timings["message_start_at"] - t0


def bench_live(hermes_python: Path, home: Path, key: str, runs: int) -> None:
    from real_dashboard import running_dashboard

    from hermes_tray_core.live_backend import find_live_backend

    real = gateway.install_from_command([str(hermes_python)])
    with running_dashboard(hermes_python, home) as (_proc, port):
        backend, why = find_live_backend(home)
        if backend is None:
            raise RuntimeError(f"the dashboard is not usable: {why}")
        token = backend.token.reveal()
        gateway.probe_capabilities(gateway.HermesInstall((str(hermes_python),), str(hermes_python), "bench"),
                                   env=gateway.gateway_environment(home), cwd=str(Path.home()))
        gateway.probe_capabilities(real, env=gateway.gateway_environment(home), cwd=str(Path.home()))
        tray_live_run(home, key, prefer=True)  # warm-up: the dashboard's first agent build, page cache
        ws_minimal_client(port, token, key)
        ours, floor, spawned = [], [], []
        LIVE_PARTS.clear()
        rng = random.Random(11)
        for _ in range(runs):
            steps = [lambda: ours.append(tray_live_run(home, key, prefer=True)),
                     lambda: floor.append(ws_minimal_client(port, token, key)),
                     lambda: spawned.append(tray_live_run(home, key, prefer=False, install=real))]
            rng.shuffle(steps)
            for step in steps:
                step()
        from hermes_tray_core.live_backend import forget

        cold = []
        for _ in range(5):  # what a fresh process (the `hermes-tray resume` CLI) pays to find the backend
            forget(home)
            t = time.monotonic()
            find_live_backend(home)
            cold.append(time.monotonic() - t)
    m_ours, m_floor, m_spawned = (statistics.median(x) for x in (ours, floor, spawned))
    load = f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs" if hasattr(os, "getloadavg") else ""
    print(f"\nreal running backend: hermes dashboard 0.19.0 (median of {runs} runs; ms)")
    print(f"  hermes-tray through the running backend   {m_ours * 1e3:9.1f}   (runs: "
          + ", ".join(f"{x * 1e3:.0f}" for x in ours) + ")")
    print(f"  minimal WebSocket client (same two calls)  {m_floor * 1e3:9.1f}   (runs: "
          + ", ".join(f"{x * 1e3:.0f}" for x in floor) + ")")
    print(f"  hermes-tray with a spawned gateway         {m_spawned * 1e3:9.1f}   (runs: "
          + ", ".join(f"{x * 1e3:.0f}" for x in spawned) + ")")
    print(f"  ratio to the minimal client {m_ours / m_floor:.3f}×  (target ≤ 1.1×); hermes-tray's own work "
          f"{(m_ours - m_floor) * 1e3:.1f} ms")
    parts = ("find_backend", "ready", "active_list", "resume", "marker", "submit", "first_frame")
    print("  hermes-tray's steps, medians (ms): " + ", ".join(
        f"{k} {statistics.median(p[k] for p in LIVE_PARTS if k in p) * 1e3:.1f}" for k in parts
        if any(k in p for p in LIVE_PARTS)) + "  (first_frame counts from the resume request)")
    print(f"  (the tray and helper reuse the backend they found while it lives; a fresh process finds it anew: "
          f"median {statistics.median(cold) * 1e3:.1f} ms)")
    print(f"  speed-up over the spawned gateway {m_spawned / m_ours:.1f}×  (expected ≥ 10×){load}")


def med(rows: list[dict[str, float]], k: str) -> float:
    return statistics.median(r[k] for r in rows)


def report(name: str, ours: list[dict[str, float]], floor: list[dict[str, float]]) -> float:
    print(f"\n{name}  (median of {len(ours)} runs; ms)")
    print(f"  {'':16}{'before spawn':>13}{'spawn→ready':>12}{'resume':>10}{'→1st frame':>12}{'total':>10}")
    for label, rows in (("hermes-tray", ours), ("minimal client", floor)):
        pre = statistics.median(r["total"] - r["ready"] - r["first_frame"] for r in rows)
        print(f"  {label:16}{pre * 1e3:13.1f}{med(rows, 'ready') * 1e3:12.1f}{med(rows, 'resume') * 1e3:10.1f}"
              f"{med(rows, 'first_frame') * 1e3:12.1f}{med(rows, 'total') * 1e3:10.1f}")
    print("  (before spawn: claim lease + marker re-check + policy for hermes-tray; →1st frame counts from the "
          "resume request)")
    own = (statistics.median(r["total"] - r["ready"] - r["first_frame"] for r in ours)
           + med(ours, "first_frame") - med(floor, "first_frame"))
    print(f"  hermes-tray's own work (before spawn + extra to the 1st frame): {own * 1e3:.1f} ms "
          f"= {own / med(floor, 'total') * 100:.1f}% of the minimal client's total; the rest is the gateway's own "
          "start-up, which varies run to run")
    ratio = med(ours, "total") / med(floor, "total")
    load = f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs" if hasattr(os, "getloadavg") else ""
    print(f"  ratio {ratio:.3f}×  (target ≤ 1.1×){load}")
    return ratio


def bench(name: str, install: gateway.HermesInstall, home: Path, key: str, runs: int, cwd: str) -> float:
    gateway.probe_capabilities(install, env=gateway.gateway_environment(home), cwd=cwd)  # warm the cache
    tray_run(home, key, install, cwd)  # warm-up (pyc, page cache)
    minimal_client(list(install.argv), home, key, cwd)
    ours, floor = [], []
    rng = random.Random(7)
    for _ in range(runs):
        pair = [lambda: floor.append(minimal_client(list(install.argv), home, key, cwd)),
                lambda: ours.append(tray_run(home, key, install, cwd))]
        rng.shuffle(pair)  # no systematic "who runs second" bias
        for step in pair:
            step()
    return report(name, ours, floor)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--real-runs", type=int, default=4)
    ap.add_argument("--live-runs", type=int, default=7)
    ap.add_argument("--only-live", action="store_true", help="only the running-backend comparison")
    ap.add_argument("--no-real", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    os.environ.update(tray_dirs(tmp))
    cwd = str(Path.home())

    if args.only_live:
        live_only(tmp, args.live_runs)
        return
    root = tmp / "sim"
    create_sim_install(root, "legacy")
    sim = gateway.install_from_command(sim_command(root))
    home, key = make_home(tmp / "sim-home", turn_seconds=0.05)
    t = time.monotonic()
    gateway.clear_capability_cache()
    gateway.probe_capabilities(sim, env=gateway.gateway_environment(home), cwd=cwd)
    print(f"capability probe (cold, then cached per interpreter): {(time.monotonic() - t) * 1e3:.0f} ms")
    bench("simulated backend (legacy: tray submits the note)", sim, home, key, args.runs, cwd)

    if args.no_real:
        return
    from hermes_venv import PyPIUnreachable, ensure_hermes_venv, venv_python
    from mock_openai import MockOpenAI, write_hermes_config
    from real_session import seed_real_session

    try:
        venv, _ = ensure_hermes_venv()
    except PyPIUnreachable as exc:
        print(f"\nreal gateway: skipped ({exc})")
        return
    with MockOpenAI() as mock:
        rhome = tmp / "real-home"
        write_hermes_config(rhome, mock.base_url)
        real = gateway.install_from_command([str(venv_python(venv))])
        rkey = seed_real_session(venv_python(venv), rhome, prompt="seed turn", cwd=cwd)
        bench("real gateway (hermes-agent 0.19.0)", real, rhome, rkey, args.real_runs, cwd)
        bench_live(venv_python(venv), rhome, rkey, args.live_runs)


def live_only(tmp: Path, runs: int) -> None:
    from hermes_venv import ensure_hermes_venv, venv_python
    from mock_openai import MockOpenAI, write_hermes_config
    from real_session import seed_real_session

    venv, _ = ensure_hermes_venv()
    with MockOpenAI() as mock:
        rhome = tmp / "live-home"
        write_hermes_config(rhome, mock.base_url)
        rkey = seed_real_session(venv_python(venv), rhome, prompt="seed turn", cwd=str(Path.home()))
        bench_live(venv_python(venv), rhome, rkey, runs)


if __name__ == "__main__":
    main()
