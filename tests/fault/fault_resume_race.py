"""Exactly-once resume across every hermes-tray process, and the crash-loop bound.

``exactly_once_race``: one Hermes home served by the simulated backend, with the tray
(``hermes-tray``, auto mode), the headless helper (``hermes-tray helper``, auto mode) and two
``hermes-tray resume KEY --wait`` processes per turn all racing. Many turns are interrupted at
the same instant (markers from really-dead writers planted together); every process tries to
resume every turn. The backend logs each turn it runs (``sim_turns.jsonl``): exactly one
continuation per turn, or it is a double dispatch.

``crash_loop``: a backend that dies (SIGKILL) in every continuation; the helper in auto mode and
repeated ``hermes-tray resume`` calls keep trying. The backend must run exactly
``max_attempts`` continuations, then the tray says it gave up (journal ``gave-up``), never more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from faultkit import environ


def _cli() -> list[str]:
    return [sys.executable, "-m", "hermes_tray"]


def _env(root: Path, extra: dict | None = None) -> dict[str, str]:
    from tests.support.sim_homes import tray_dirs

    env = {**os.environ, **tray_dirs(root), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env.update(extra or {})
    return env


def _write_settings(root: Path, sim_root: Path, mode: str, *, notify: bool = False) -> None:
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.stores.settings import TraySettings, save_settings

    save_settings(
        TraySettings(mode=mode, notify=notify, hermes_command=tuple(sim_command(sim_root))),
        root / "tray-config" / "config.toml",
    )


def _start(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    """Start a process; its event stream (HERMES_TRAY_EVENTS) goes beside its log, ``<log>.events``."""
    fh = open(log, "wb")  # noqa: SIM115 - closed with the process
    env = {**env, "HERMES_TRAY_EVENTS": str(log) + ".events"}
    proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    proc._log = fh  # type: ignore[attr-defined]
    return proc


def _scanned(log: Path) -> bool:
    """Has the tray or helper logging to ``log`` finished a scan (its watchers are armed by then)?"""
    try:
        return '"event": "scan"' in Path(str(log) + ".events").read_text()
    except FileNotFoundError:
        return False


def _stop(proc: subprocess.Popen, timeout: float = 15) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    proc._log.close()  # type: ignore[attr-defined]
    return proc.returncode


def _wait_for(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _continuations(home: Path) -> dict[str, int]:
    from tests.support.sim_homes import read_turns

    out: dict[str, int] = {}
    for t in read_turns(home):
        if t.get("kind") in ("note", "auto-continue"):
            k = t.get("session") or t.get("key") or t.get("session_key")
            out[k] = out.get(k, 0) + 1
    return out


def _gateways_running(root: Path) -> int:
    """Gateways serving a home under ``root``: by their HERMES_HOME, since the simulated gateway's command
    line names its install (a session-wide directory elsewhere), never the home."""
    import psutil

    base = os.path.realpath(root) + os.sep
    n = 0
    for p in psutil.process_iter(["cmdline"]):
        try:
            if "tui_gateway.entry" not in (p.info["cmdline"] or []):
                continue
            if os.path.realpath(p.environ().get("HERMES_HOME", "")).startswith(base):
                n += 1
        except (psutil.Error, OSError):
            continue
    return n


def exactly_once_race(workdir: Path, turns: int, sim_root: Path, *, cli_per_turn: int = 2,
                      with_tray: bool = True, with_helper: bool = True, turn_seconds: float = 0.3,
                      start_together: bool = False) -> dict:
    """``start_together``: the turns were interrupted while no tray ran (power loss); the tray, the
    helper and the ``resume`` commands all start at the same instant. Otherwise the tray and the
    helper are up and watching when the turns are interrupted, and the commands start then."""
    from hermes_tray.demo import sim_state
    from hermes_tray_core.markers.store import list_turn_markers
    from tests.support.sim_homes import make_home, plant_marker

    root = Path(workdir)
    home, first = make_home(root / "home", turn_seconds=turn_seconds)
    keys = [first] + [sim_state.create_session(home, title=f"race {i}") for i in range(1, turns)]
    _write_settings(root, sim_root, "auto")
    env = _env(root)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    daemons = []

    def start_daemons() -> None:
        if with_helper:
            daemons.append(_start(_cli() + ["helper", "--no-notifications", "--home", str(home)], env,
                                  logs / "helper.out"))
        if with_tray:
            daemons.append(_start(_cli() + ["--home", str(home)], env, logs / "tray.out"))

    clis: list[subprocess.Popen] = []
    try:
        if not start_together:
            start_daemons()
            want = (["helper.out"] if with_helper else []) + (["tray.out"] if with_tray else [])
            assert _wait_for(lambda: all(_scanned(logs / w) for w in want), 30), "tray/helper did not start"

        t0 = time.monotonic()
        for k in keys:  # all interrupted "at once"
            plant_marker(home, k, f"race prompt for {k}")
        if start_together:
            start_daemons()
        clis += [
            _start(_cli() + ["resume", k, "--home", str(home), "--wait"], env, logs / f"resume-{i}-{n}.out")
            for i, k in enumerate(keys) for n in range(cli_per_turn)
        ]
        for p in clis:
            try:
                p.wait(120)
            except subprocess.TimeoutExpired:
                pass
        codes = [_stop(p) for p in clis]
        settled = _wait_for(lambda: not list_turn_markers(home) and _gateways_running(root) == 0, 60)
        seconds = time.monotonic() - t0
    except BaseException:
        for p in clis + daemons:
            _stop(p, timeout=5)
        raise
    daemon_codes = [_stop(p) for p in daemons]
    counts = _continuations(home)
    per_turn = [counts.get(k, 0) for k in keys]
    cli_out = {p.args[4] if len(p.args) > 4 else "?": [] for p in clis}
    for i, p in enumerate(clis):
        cli_out.setdefault(p.args[4], []).append((codes[i], Path(p._log.name).read_text(errors="replace")[-300:]))
    return {
        "turns": turns,
        "contenders_per_turn": cli_per_turn + int(with_tray) + int(with_helper),
        "continuations": sum(per_turn),
        "double_dispatches": sum(max(0, c - 1) for c in per_turn),
        "missed": sum(1 for c in per_turn if c == 0),
        "cli_completed": sum(1 for c in codes if c == 0),
        "cli_refused": sum(1 for c in codes if c == 1),
        "cli_other": sorted(c for c in codes if c not in (0, 1)),
        "markers_left": len(list_turn_markers(home)),
        "settled": settled,
        "daemon_exit": daemon_codes,
        "seconds": round(seconds, 1),
        "per_turn": per_turn,
        "cli_out": cli_out,
    }


def crash_loop(workdir: Path, sim_root: Path, *, max_attempts: int = 2, resume_calls: int = 6,
               with_helper: bool = True) -> dict:
    """Every continuation dies mid-turn. Count continuations the backend ran and what the tray said."""
    from hermes_tray.demo.sim_backend import write_control
    from hermes_tray_core.markers.store import list_turn_markers
    from hermes_tray_core.stores.ledger import ledger
    from tests.support.sim_homes import make_home, plant_marker

    root = Path(workdir)
    home, key = make_home(root / "home", max_attempts=max_attempts, turn_seconds=0.6)
    write_control(home, die_mid_turn=True, turn_seconds=0.6)
    _write_settings(root, sim_root, "auto")
    env = _env(root)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    helper = None
    outs = []
    try:
        if with_helper:
            helper = _start(_cli() + ["helper", "--no-notifications", "--home", str(home)], env, logs / "helper.out")
            assert _wait_for(lambda: _scanned(logs / "helper.out"), 30), "the helper did not start"
        plant_marker(home, key, "crash loop prompt")
        for i in range(resume_calls):
            p = subprocess.run(_cli() + ["resume", key, "--home", str(home), "--wait"], env=env,
                               capture_output=True, text=True, timeout=120)
            text = (p.stdout + p.stderr).strip()
            outs.append((p.returncode, text.splitlines()[-1:] if text else []))
            time.sleep(0.3 if i < resume_calls - 1 else 0)
        # Give the helper time to try again on its own, as it would over a day.
        time.sleep(3.0 if with_helper else 0)
        _wait_for(lambda: _gateways_running(root) == 0, 30)
        # The user asks once more, after everything settled: told it gave up (the helper may have won every
        # earlier call's claim, so none of those saw the end).
        p = subprocess.run(_cli() + ["resume", key, "--home", str(home), "--wait"], env=env,
                           capture_output=True, text=True, timeout=120)
        outs.append((p.returncode, (p.stdout + p.stderr).strip().splitlines()))
    finally:
        if helper is not None:
            _stop(helper)
    from tests.support.sim_homes import read_turns

    conts = [t for t in read_turns(home) if t.get("kind") in ("note", "auto-continue")]
    with environ({k: v for k, v in env.items() if k.startswith("HERMES_TRAY_")}):
        events = [e.get("event") for e in reversed(ledger().history(500, session_key=key))]
    marker = list_turn_markers(home).get(key)
    return {
        "max_attempts": max_attempts,
        "continuations": len(conts),
        "attempts_seen": [t.get("attempt") for t in conts],
        "gave_up_journalled": "gave-up" in events,
        "events": events,
        "marker_attempts": marker.get("attempts") if marker else None,
        "cli": outs,
    }


def dumps(d: dict) -> str:
    return json.dumps({k: v for k, v in d.items() if k not in ("cli_out", "events", "cli")})


def skip_race_once(workdir: Path, sim_root: Path, *, delay: float = 0.8, skip_after: float = 0.1,
                   claim: bool = True) -> dict:
    """A user skip landing inside a resume's window (after the claim and marker check, while the
    gateway answers ``session.resume``). In-process resume (thread) + a skip. ``claim=True``: the skip
    the tray and the CLI make (``core.continuing.skip.skip_turn``, which takes the resume's claim when it exists);
    ``claim=False``: a bare compare-and-remove, as a skip that does not take the claim (an older tray, a
    hand edit) would. One winner: skip ok XOR a continuation ran."""
    import threading

    from hermes_tray.demo.sim_backend import write_control
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.backend.install import install_from_command
    from hermes_tray_core.continuing import gateway
    from hermes_tray_core.continuing.resume import resume_turn
    from hermes_tray_core.markers.store import remove_marker_if_unchanged
    from hermes_tray_core.stores.ledger import ledger
    from hermes_tray_core.turn import Turn
    from tests.support.sim_homes import make_home, plant_marker, tray_dirs

    root = Path(workdir)
    saved = {k: os.environ.get(k) for k in tray_dirs(root)}
    os.environ.update(tray_dirs(root))
    try:
        home, key = make_home(root / "home", turn_seconds=0.3)
        shown = plant_marker(home, key, "skip race prompt")
        write_control(home, resume_delay=delay)
        install = install_from_command(sim_command(sim_root))
        opts = gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30, decline_grace=0.5,
                                      stop_grace=5, shutdown_grace=3)
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault(
            "r", resume_turn(Turn.of(home, key, shown), install=install, options=opts, via="fault-race")))
        t.start()
        _wait_for(lambda: any(e.get("event") == "approved" for e in ledger().history(50, session_key=key)), 20)
        time.sleep(skip_after)
        skip_turn = None
        if claim:
            try:
                from hermes_tray_core.continuing.skip import skip_turn
            except ImportError:  # before core.continuing.skip existed, the CLI and the tray did a bare compare-and-remove
                skip_turn = None
        if skip_turn is not None:
            skipped = skip_turn(Turn.of(home, key, shown), via="fault-race").ok
        else:
            skipped = remove_marker_if_unchanged(home, key, shown)
        t.join(60)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    res = out["r"]
    ran = _continuations(home).get(key, 0)
    return {"skipped": skipped, "continuations": ran, "resume_outcome": res.outcome, "resume_ok": res.ok,
            "message": res.message, "double_winner": bool(skipped and ran), "home": home, "key": key}


def kill_the_resumer(workdir: Path, sim_root: Path, *, rounds: int, seed: int, max_attempts: int = 3,
                     turn_seconds: float = 0.8, delay_range: tuple[float, float] = (0.05, 1.6)) -> dict:
    """SIGKILL ``hermes-tray resume --wait`` at a random point (claim, check, gateway start-up,
    ``session.resume``, mid-continuation), then run another ``resume`` at once. Its dead claim is taken
    over immediately, so the second resume races whatever the first left running. Invariant, counted
    at the backend: no two continuations that did work (their note reached the transcript) share an
    attempt number, and there are never more than ``max_attempts`` of them. (A turn the backend logged as
    started whose gateway then died with its resumer — stdin closed — before recording its marker ran
    nothing and left the marker as it was; it is counted separately as ``started_without_work``.)"""
    import random

    from tests.support.sim_homes import make_home, plant_marker, read_turns

    rng = random.Random(seed)
    root = Path(workdir)
    _write_settings(root, sim_root, "ask")
    env = _env(root)
    out = {"rounds": 0, "double_dispatches": 0, "over_budget": 0, "continuations": 0, "kill_points": []}
    for r in range(rounds):
        home, key = make_home(root / f"home-{r}", max_attempts=max_attempts, turn_seconds=turn_seconds)
        plant_marker(home, key, f"kill-the-resumer prompt {r}")
        a = subprocess.Popen(_cli() + ["resume", key, "--home", str(home), "--wait"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delay = rng.uniform(*delay_range)
        time.sleep(delay)
        a.kill()
        a.wait()
        b = subprocess.run(_cli() + ["resume", key, "--home", str(home), "--wait"], env=env,
                           capture_output=True, text=True, timeout=120)
        _wait_for(lambda: _gateways_running(root) == 0, 30)
        turns = [t for t in read_turns(home) if t.get("kind") in ("note", "auto-continue")]
        attempts = [t.get("attempt") for t in turns if t.get("kind") == "auto-continue"]
        # Continuations that did work: the note reached the session's transcript (the backend appends it
        # after recording the turn's marker). A turn logged as started whose gateway died before that
        # (its resumer was killed, stdin closed) ran nothing and left the marker as it was.
        from hermes_tray.demo import sim_state
        from hermes_tray_core.hermes.note import is_continuation_note

        worked = sum(1 for role, text in sim_state.messages(home, key) if role == "user" and is_continuation_note(text))
        dup = max(0, worked - len(set(attempts))) if attempts else 0
        out["rounds"] += 1
        out["continuations"] += worked
        out["double_dispatches"] += dup
        out["over_budget"] += max(0, worked - max_attempts)
        out["kill_points"].append((round(delay, 2), len(turns), b.returncode))
        out["started_without_work"] = out.get("started_without_work", 0) + max(0, len(turns) - worked)
        if dup or len(attempts) != len(set(attempts)):
            out.setdefault("duplicates", []).append({"delay": round(delay, 3), "turns": turns, "worked": worked,
                                                     "second_resume": (b.returncode, b.stdout[-300:])})
    return out
