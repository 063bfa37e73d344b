"""A memory group of its own, with a small limit, for a process the kernel's out-of-memory killer is to end.

Made where this process may make one (root, with the memory controller mounted: cgroup v1's ``memory``
hierarchy, or cgroup v2 with ``memory`` enabled below the root); otherwise the test skips, saying why. The kill is
real: a child moved into the group allocates past its limit and the kernel ends it (its log says so, the group's
own count moves, and so does ``/proc/vmstat``'s count for the whole machine).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

LIMIT = 32 * 1024 * 1024

#: A child that waits for a line on stdin, then allocates far past its group's limit (and is killed for it).
HOG = ("import sys, time\nsys.stdin.readline()\nblocks = []\n"
       "while True:\n    blocks.append(bytearray(8 * 1024 * 1024))\n    time.sleep(0.001)\n")


def _mount(kind: str) -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(rest) >= 3 and len(fields) >= 5 and fields[3] == "/":
            if kind == "v1" and rest[0] == "cgroup" and "memory" in rest[2].split(","):
                return Path(fields[4])
            if kind == "v2" and rest[0] == "cgroup2":
                return Path(fields[4])
    return None


def _where() -> tuple[Path, str] | str:
    """(the parent directory for a new group, "v1" | "v2"), or why none can be made here."""
    if not sys.platform.startswith("linux"):
        return "memory groups are Linux's"
    if os.geteuid() != 0:
        return "making a memory group needs root"
    v1 = _mount("v1")
    if v1 is not None and os.access(v1, os.W_OK):
        return v1, "v1"
    v2 = _mount("v2")
    if v2 is not None and "memory" in (v2 / "cgroup.subtree_control").read_text().split() and os.access(v2, os.W_OK):
        return v2, "v2"
    return "no writable memory controller here"


@contextlib.contextmanager
def memory_group() -> Iterator[tuple[Path, str]]:
    """A fresh memory group of :data:`LIMIT` bytes (no swap), removed afterwards: (its directory, "v1" | "v2")."""
    where = _where()
    if isinstance(where, str):
        pytest.skip(where)
    parent, kind = where
    group = parent / f"hermes-tray-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a memory group here: {exc}")
    try:
        if kind == "v1":
            (group / "memory.limit_in_bytes").write_text(str(LIMIT))
            with contextlib.suppress(OSError):
                (group / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))
        else:
            (group / "memory.max").write_text(str(LIMIT))
            with contextlib.suppress(OSError):
                (group / "memory.swap.max").write_text("0")
        yield group, kind
    finally:
        for _ in range(100):
            procs = [int(p) for p in (group / "cgroup.procs").read_text().split()] if group.exists() else []
            for pid in procs:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def join(group: Path, pid: int) -> None:
    (group / "cgroup.procs").write_text(str(pid))


def hog(group: Path | None = None) -> subprocess.Popen[bytes]:
    """A child that allocates without end once it reads a line; moved into ``group`` first when given."""
    proc = subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.PIPE)
    if group is not None:
        join(group, proc.pid)
    return proc


def oom_kill(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Let ``proc`` (a :func:`hog` in a small group) allocate until the kernel kills it; fails if it does not."""
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    assert proc.wait(timeout) == -signal.SIGKILL, "the out-of-memory killer did not end the process"


def vmstat_kills() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return -1
