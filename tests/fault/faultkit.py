"""Crash-injection harness: real child processes, killed with SIGKILL at random points.

Method (the same for every kind of write, see README in this directory):

1. A child process runs a writer loop forever: operation ``i``, then an *ack* line ``i``
   appended to an ack file. The ack is written only after the operation returned, so every
   acked operation is one the caller was told had succeeded.
2. The parent waits until the child is inside its loop (first line ``R``), sleeps a random
   delay drawn from the round's seeded RNG, and sends SIGKILL. The child never exits by
   itself: every round ends with a SIGKILL delivered to a writer that is mid-loop.
3. The parent then checks the files with the project's own readers (and raw parsers):
   every file parses, every acked operation is present, the only operation whose effect
   may or may not be visible is the single in-flight one, and no temp file is left that a
   reader would pick up.

Children are forked by a ``forkserver`` (a clean, single-threaded process with ``core``
pre-imported), so a kill round costs a few milliseconds and the parent's threads (Qt,
hypothesis) never leak into a forked writer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Kills per kind: CI default 50; the bench driver raises it (>= 500).
DEFAULT_KILLS = 50


def kills_per_kind(default: int = DEFAULT_KILLS) -> int:
    try:
        return max(1, int(os.environ.get("HERMES_TRAY_FAULT_KILLS", default)))
    except ValueError:
        return default


def seed() -> int:
    """Seed for the kill delays: the run's (``HERMES_TRAY_TEST_SEED`` replays it; printed on failure)."""
    from tests.support.seed import run_seed

    return run_seed()


_CTX = None


def mp_context():
    global _CTX
    if _CTX is None:
        if sys.platform == "win32":  # pragma: no cover
            _CTX = multiprocessing.get_context("spawn")
        else:
            if str(HERE) not in sys.path:
                sys.path.insert(0, str(HERE))
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["faultkit", "hermes_tray_core.stores.fsutil", "hermes_tray_core.process.identity"])
            _CTX = ctx
    return _CTX


class Acker:
    """Appends one line per completed operation; a SIGKILL can cut only the line in flight."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def __call__(self, token: object) -> None:
        os.write(self.fd, f"{token}\n".encode())


def _child_main(target: Callable, ack_path: str, err_path: str, args: tuple) -> None:
    try:
        ack = Acker(ack_path)
        target(ack, *args)
        # A writer loop must never return on its own: make that visible.
        with open(err_path, "w") as f:
            f.write("writer loop returned before it was killed\n")
        os._exit(71)
    except BaseException:
        try:
            with open(err_path, "w") as f:
                f.write(traceback.format_exc())
        finally:
            os._exit(70)


@dataclasses.dataclass
class RoundResult:
    index: int
    acks: list[str]
    delay: float
    pid: int


@dataclasses.dataclass
class KillStats:
    kind: str
    kills: int = 0
    ops_acked: int = 0
    rounds_with_ops: int = 0
    checks: int = 0
    seconds: float = 0.0
    extra: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.extra.items())
        return (
            f"{self.kind:<14} kills={self.kills:<5} survived={self.kills:<5} "
            f"acked_ops={self.ops_acked:<6} rounds_with_ops={self.rounds_with_ops:<5} "
            f"{self.seconds:6.1f}s{extra}"
        )


def wait_ready(ack_path: Path, proc, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ack_path.stat().st_size > 0:
                return
        except FileNotFoundError:
            pass
        if not proc.is_alive():
            return
        time.sleep(0.0005)
    raise AssertionError(f"writer child {proc.pid} never became ready")


def kill_rounds(
    kind: str,
    workdir: Path,
    target: Callable,
    *,
    kills: int,
    rng: random.Random,
    args_for: Callable[[int], tuple] = lambda r: (),
    verify: Callable[[RoundResult], None],
    delay: tuple[float, float] = (0.0, 0.03),
) -> KillStats:
    """Run ``kills`` rounds of: start writer child, SIGKILL it at a random point, verify."""
    ctx = mp_context()
    stats = KillStats(kind)
    acks_dir = Path(workdir) / "_acks"
    acks_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for r in range(kills):
        ack_path = acks_dir / f"{kind}-{r}.ack"
        err_path = acks_dir / f"{kind}-{r}.err"
        proc = ctx.Process(target=_child_main, args=(target, str(ack_path), str(err_path), args_for(r)))
        proc.start()
        wait_ready(ack_path, proc)
        d = rng.uniform(*delay)
        if d:
            time.sleep(d)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.join(30)
        if proc.exitcode != -signal.SIGKILL:
            err = err_path.read_text() if err_path.exists() else "(no traceback)"
            raise AssertionError(f"{kind} round {r}: writer exited with {proc.exitcode} before the kill:\n{err}")
        lines = ack_path.read_text().splitlines() if ack_path.exists() else []
        acks = [ln for ln in lines[1:] if ln]  # first line is the ready mark
        stats.kills += 1
        stats.ops_acked += len(acks)
        stats.rounds_with_ops += bool(acks)
        verify(RoundResult(r, acks, d, proc.pid))
        stats.checks += 1
        ack_path.unlink(missing_ok=True)
    stats.seconds = time.monotonic() - t0
    return stats


def temp_litter(directory: Path, target_name: str) -> list[str]:
    """Writer temp files for ``target_name`` in ``directory`` (names a reader never opens)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names
                  if n.startswith(f".{target_name}.") and re.fullmatch(r"\..+\.\d+\.[0-9a-f]{8}\.tmp", n))


def report(stats: KillStats) -> None:
    """Print a stats line (shown with -s / -rA; the bench driver collects them)."""
    print(stats.line(), flush=True)


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Point this process's engine calls at a test's tray dirs for a moment, then put back what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
