"""Races between hermes-tray and writers it does not control.

``foreign_writer_race``: Hermes' own marker store (the non-locking reference, loaded from
``../shared/reference/``) records and clears markers in a child process at a realistic pace
(one write every 50 ms), while hermes-tray edits the same file: it records continuation
markers and skips them with the strict compare-and-remove, as the tray does on a user
decision. Measured:

- ``foreign_lost``: entries the Hermes writer had recorded and not cleared that vanished —
  only hermes-tray's edits can remove them (target 0). The Hermes writer checks before each
  of its writes and once more at the end.
- ``foreign_detected``: our writes that found the file changed under them and re-applied.
- ``residual window``: per write, the time from our last "unchanged?" check to the
  ``os.replace`` returning — a Hermes write landing inside it is lost; it cannot be closed
  without Hermes taking the lock. p50/p99/max reported.
- ``tray_lost`` / ``resurrected``: the other direction, which only the tray's bookkeeping can
  handle (a Hermes read-modify-write spanning our edit drops our entry or brings a skipped
  one back). Reported, not a target: a skipped marker that comes back must not cause a
  question or a continuation (checked at the tray/decision level).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import sys
import time
from pathlib import Path

from faultkit import REPO, mp_context

INTERVAL = 0.05
MAX_FOREIGN_LIVE = 8


def _load_reference():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.support.hermes_reference import load_reference_markers

    return load_reference_markers()


def _raw_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return set()
    return set(data) if isinstance(data, dict) else set()


def _foreign_writer(home: str, stop_path: str, out_path: str, seed: int, interval: float) -> None:
    ref = _load_reference()
    renames: list[tuple[float, float]] = []
    real_replace = os.replace

    def replace(src, dst, **kw):  # this child only: time every Hermes rename (CLOCK_MONOTONIC is system-wide)
        t0 = time.monotonic()
        try:
            return real_replace(src, dst, **kw)
        finally:
            renames.append((t0, time.monotonic()))

    os.replace = replace
    rng = random.Random(seed)
    path = Path(home) / "desktop" / "interrupted_turns.json"
    live: list[str] = []
    lost: list[str] = []
    writes = n = 0
    next_t = time.monotonic()
    Path(out_path + ".ready").write_text("1")
    while not os.path.exists(stop_path):
        present = _raw_keys(path)
        for k in [k for k in live if k not in present]:
            lost.append(k)
            live.remove(k)
        if not live or (len(live) < MAX_FOREIGN_LIVE and rng.random() < 0.55):
            key = f"hermes-{os.getpid()}-{n}"
            n += 1
            ref.record_turn_start(home, key, f"foreign turn {key}")
            live.append(key)
        else:
            key = live.pop(rng.randrange(len(live)))
            ref.clear_turn_marker(home, key)
        writes += 1
        next_t += interval
        time.sleep(max(0.0, next_t - time.monotonic()))
    present = _raw_keys(path)
    lost.extend(k for k in live if k not in present)
    Path(out_path).write_text(json.dumps({"writes": writes, "lost": lost, "live": live, "renames": renames}))


class _Detected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "changed under" in record.getMessage():
            self.count += 1


@contextlib.contextmanager
def _timed_writes(windows: list[float], gaps: list[float], spans: list[tuple[float, float]]):
    """Measure, for each marker write, the time from the last foreign-change check to the rename.

    ``gaps``: check done -> rename syscall entered (user space, the lower bound);
    ``windows``: check done -> rename returned (upper bound: includes the kernel's own wait
    for the directory lock and the journal, during which a rival rename may be ordered first).
    """
    from hermes_tray_core import fsutil

    orig = fsutil.atomic_write_bytes
    orig_replace = os.replace
    mark: dict[str, float] = {}

    def replace(src, dst, **kw):
        if "t0" in mark:
            gaps.append(time.perf_counter() - mark["t0"])
        return orig_replace(src, dst, **kw)

    def timed(target, data, *, mode=fsutil.FILE_MODE, sync_dir=True, before_replace=None):
        mark.clear()

        def check():
            if before_replace is not None:
                before_replace()
            mark["t0"] = time.perf_counter()

        orig(target, data, mode=mode, sync_dir=False, before_replace=check)
        t1 = time.perf_counter()
        windows.append(t1 - mark["t0"])
        m1 = time.monotonic()
        spans.append((m1 - (t1 - mark["t0"]), m1))
        mark.clear()
        if sync_dir:
            fsutil.fsync_dir(Path(target).parent)

    fsutil.atomic_write_bytes = timed
    os.replace = replace
    try:
        yield
    finally:
        fsutil.atomic_write_bytes = orig
        os.replace = orig_replace


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(len(v) * q))] * 1e6, 1)


def foreign_writer_race(
    workdir: Path, edits: int, rng: random.Random, *, interval: float = INTERVAL, foreign_check: bool = True
) -> dict:
    """Run the race; ``foreign_check=False`` disables hermes-tray's re-read-before-replace (baseline)."""
    from hermes_tray_core import markers

    home = Path(workdir) / "home"
    (home / "desktop").mkdir(parents=True, exist_ok=True)
    stop = Path(workdir) / "stop"
    out = Path(workdir) / "foreign.json"
    ctx = mp_context()
    proc = ctx.Process(target=_foreign_writer, args=(str(home), str(stop), str(out), rng.randrange(1 << 30), interval))
    proc.start()
    deadline = time.monotonic() + 20
    while not Path(str(out) + ".ready").exists():
        assert proc.is_alive() and time.monotonic() < deadline, "foreign writer did not start"
        time.sleep(0.005)

    store = markers.MarkerStore(home)
    # An entry of ours that stays: our writes never empty the file, so every one of them is a timed
    # temp-file + rename (the delete-when-empty path has no rename to time).
    store.record("tray-anchor", "anchor prompt")
    handler = _Detected()
    mlog = logging.getLogger("hermes_tray_core.markers")
    old_level = mlog.level
    mlog.addHandler(handler)
    mlog.setLevel(logging.INFO)
    windows: list[float] = []
    gaps: list[float] = []
    spans: list[tuple[float, float]] = []
    saved_retries = markers.FOREIGN_RETRIES
    if not foreign_check:
        markers.FOREIGN_RETRIES = 0
    removed: set[str] = set()
    tray_lost = skips_ok = skips_lost_race = 0
    t_start = time.monotonic()
    done = 0
    k = 0
    try:
        with _timed_writes(windows, gaps, spans):
            while done < edits:
                key = f"tray-{k}"
                k += 1
                store.record(key, f"continuation prompt {key}", attempts=1)
                done += 1
                time.sleep(rng.uniform(0, interval))
                listed = store.list()
                if key not in listed:
                    tray_lost += 1  # a Hermes read-modify-write spanning ours dropped it
                    continue
                if store.remove_if_unchanged(key, listed[key]):
                    skips_ok += 1
                    removed.add(key)
                else:
                    skips_lost_race += 1
                done += 1
                time.sleep(rng.uniform(0, interval))
    finally:
        markers.FOREIGN_RETRIES = saved_retries
        mlog.removeHandler(handler)
        mlog.setLevel(old_level)
        stop.write_text("1")
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0, f"foreign writer exited with {proc.exitcode}"
    result = json.loads(out.read_text())
    # Hermes renames that overlapped one of our check->rename windows: the only way left to lose an entry.
    in_window = 0
    j = 0
    spans.sort()
    for a, b in sorted(map(tuple, result["renames"])):
        while j < len(spans) and spans[j][1] < a:
            j += 1
        if j < len(spans) and spans[j][0] <= b:
            in_window += 1
    resurrected = sorted(removed & _raw_keys(home / "desktop" / "interrupted_turns.json"))
    return {
        "foreign_check": foreign_check,
        "edits": done,
        "seconds": round(time.monotonic() - t_start, 1),
        "foreign_writes": result["writes"],
        "foreign_lost": len(result["lost"]),
        "foreign_lost_keys": result["lost"][:10],
        "foreign_detected": handler.count,
        "foreign_renames_in_window": in_window,
        "tray_lost": tray_lost,
        "skips": skips_ok,
        "skip_lost_race": skips_lost_race,
        "resurrected_at_end": len(resurrected),
        "gap_us_p50": _pct(gaps, 0.5),
        "gap_us_p99": _pct(gaps, 0.99),
        "window_us_p50": _pct(windows, 0.5),
        "window_us_p99": _pct(windows, 0.99),
        "window_us_max": _pct(windows, 1.0),
        # A Hermes write (one per interval, uniformly placed) lands in a window with probability window/interval.
        "expected_losses_lo": round(sum(gaps) / interval, 3) if gaps else None,
        "expected_losses_hi": round(sum(windows) / interval, 3) if windows else None,
    }
