"""A wall-clock step as the kernel makes it, for one test: from :meth:`ClockStep.step` on, every boot time
psutil reads is off by ``delta`` seconds — and so is every create time psutil computes from it, for every
live process, exactly what NTP or a VM host does when it steps the clock.

How: psutil reads the boot time from ``<PROCFS_PATH>/stat`` (``btime``) on every ``create_time()`` and the
rest from ``<PROCFS_PATH>/<pid>/…``. The step points ``psutil.PROCFS_PATH`` at a prepared copy of ``/proc``:
a ``stat`` file whose ``btime`` is moved by ``delta``, and a symlink to the real entry for everything else
(every pid now, and the next pids the kernel will hand out, dangling until then: a missing process reads
as gone, as in ``/proc``). Python processes started after the step see it too (a ``sitecustomize`` on
``PYTHONPATH`` points their psutil at the same copy), as every process sees a real step. Nothing else is
touched: ``/proc/<pid>/stat``'s start ticks and the boot id, which the tray's start marks read straight from
the real ``/proc``, do not move in a real step either. The wall clock (``time.time()``) is not moved.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

#: How many pids past the last one handed out the copy covers (processes started during the test).
FUTURE_PIDS = 4096


def _next_pids(count: int) -> list[int]:
    try:
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        top = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return []
    out, pid = [], last
    for _ in range(min(count, top - 1)):
        pid = pid + 1 if pid + 1 < top else 300  # the kernel wraps past the low pids kept for daemons
        out.append(pid)
    return out


class ClockStep:
    """One test's clock step by ``delta`` seconds (``0``: no step; :meth:`step` then changes nothing)."""

    def __init__(self, delta: int, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.delta = int(delta)
        self.root = root
        self._mp = monkeypatch
        self.stepped = False

    def __repr__(self) -> str:
        return f"ClockStep({self.delta:+d} s)"

    def step(self) -> None:
        """Step the clock now (idempotent)."""
        if self.stepped or self.delta == 0:
            self.stepped = True
            return
        if not sys.platform.startswith("linux"):
            pytest.skip("the clock step is simulated through Linux's /proc")
        import psutil

        proc = self.root / "proc"
        proc.mkdir(parents=True)
        text = Path("/proc/stat").read_text()
        moved, n = re.subn(r"^btime (\d+)$", lambda m: f"btime {int(m.group(1)) + self.delta}", text, flags=re.M)
        assert n == 1, "no btime line in /proc/stat"
        (proc / "stat").write_text(moved)
        names = set(os.listdir("/proc")) | {str(p) for p in _next_pids(FUTURE_PIDS)}
        for name in names - {"stat"}:
            os.symlink(f"/proc/{name}", proc / name)
        site = self.root / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(
            f"try:\n    import psutil\n    psutil.PROCFS_PATH = {str(proc)!r}\nexcept Exception:\n    pass\n")
        before = psutil.boot_time()
        self._mp.setattr(psutil, "PROCFS_PATH", str(proc))
        self._mp.setenv("PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
        assert psutil.boot_time() == before + self.delta
        self.stepped = True


STEPS = (0, 10, -10, 3600, -3600)
STEP_IDS = ("no-step", "step+10s", "step-10s", "step+1h", "step-1h")
