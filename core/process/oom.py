"""Was this very process ended by the kernel's out-of-memory killer? Two facts name the process itself, never
the machine's count of kills (``/proc/vmstat`` counts every OOM kill, in any memory group, and names no one):

* **the kernel's log** (``/dev/kmsg``, where readable) names the pid it killed; only lines logged after the
  process was seen alive count, so a recycled pid never reads as killed;
* **its own memory group**'s OOM-kill count, read while it lives and at its death; only a group that holds
  processes itself, since a parent's count also moves for its children.

Each answer is None when it cannot tell, never a guess. ``PROC``, ``MOUNTINFO`` and ``KMSG`` are test seams.

Not met: another process in the same memory group killed for memory at the same moment reads as this one (the
log, when readable, names the pid and is asked first).
"""

from __future__ import annotations

import errno
import os
import re
from typing import NamedTuple

from hermes_tray_core.process.machine import field, read_head

__all__ = ["KMSG", "MOUNTINFO", "PROC", "KernelLog", "MemoryGroup", "memory_group"]

PROC = "/proc"
MOUNTINFO = "/proc/self/mountinfo"
KMSG = "/dev/kmsg"

_KILLED = re.compile(rb"[Kk]illed process (\d+) \(([^)\n]{0,64})\)")
_KEEP = 256  # kill lines remembered between two looks (a storm of kills costs this much at most)


class MemoryGroup(NamedTuple):
    """A process's memory group: the file its kill count is read from, the group's name, and the count then."""

    path: str
    name: str
    kills: int

    def fact(self, pid: int) -> str | None:
        """The sentence saying the killer ended a process of this group since the count was read, or None."""
        now = field(self.path, b"oom_kill")
        if now is None or now <= self.kills:
            return None
        return (f"its memory group {self.name} counted an out-of-memory kill as its Hermes process (pid {pid}) "
                "ended")


def _mounts() -> tuple[str | None, str | None]:
    """Where the memory controller is mounted: (cgroup v2's mount, cgroup v1's memory mount); None where it is not."""
    data = read_head(MOUNTINFO) or b""
    v2 = v1 = None
    for line in data.decode("utf-8", "replace").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3 or fields[3] != "/":
            continue  # a group mounted from inside another (a bind of a sub-tree): its paths do not join simply
        point = fields[4].replace("\\040", " ")
        if rest[0] == "cgroup2" and v2 is None:
            v2 = point
        elif rest[0] == "cgroup" and "memory" in rest[2].split(",") and v1 is None:
            v1 = point
    return v2, v1


def _leaf(directory: str) -> bool:
    try:
        with os.scandir(directory) as it:
            return not any(e.is_dir(follow_symlinks=False) for e in it)
    except OSError:
        return False


def memory_group(pid: int) -> MemoryGroup | None:
    """The memory group of the live process ``pid`` and its kill count now, or None (no readable group)."""
    data = read_head(f"{PROC}/{int(pid)}/cgroup")
    if not data:
        return None
    v2_path = v1_path = None
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_path = parts[2]
        elif "memory" in parts[1].split(","):
            v1_path = parts[2]
    v2, v1 = _mounts()
    candidates: list[tuple[str, str, tuple[str, ...]]] = []
    if v1 and v1_path:
        candidates.append((v1, v1_path, ("memory.oom_control",)))
    if v2 and v2_path:
        candidates.append((v2, v2_path, ("memory.events.local", "memory.events")))
    for mount, path, files in candidates:
        if path in ("", "/") or ".." in path.split("/"):
            continue  # the root group counts every process of the machine
        directory = os.path.join(mount, path.lstrip("/"))
        for name in files:
            file = os.path.join(directory, name)
            count = field(file, b"oom_kill")
            if count is None:
                continue
            if not name.endswith(".local") and not _leaf(directory):
                break  # its count also moves for the groups below it
            return MemoryGroup(file, path, count)
    return None


class KernelLog:
    """The kernel's log from where it stood when first asked: which pids it killed for memory after a
    :meth:`mark`. One descriptor, read without blocking; unreadable, every answer is None."""

    def __init__(self, path: str | None = None) -> None:
        self._path = path or KMSG
        self._fd: int | None = None
        self._failed = False
        self._read = 0  # lines read so far
        self._kills: dict[int, tuple[int, str]] = {}  # pid -> (the line's number, the process's name)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        if self._fd is not None:
            return True
        if self._failed:
            return False
        fd = None
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            os.lseek(fd, 0, os.SEEK_END)  # only what is logged from now on
        except OSError:
            if fd is not None:
                os.close(fd)
            self._failed = True
            return False
        self._fd = fd
        return True

    def _drain(self) -> None:
        fd = self._fd
        if fd is None:
            return
        for _ in range(100_000):  # the ring holds at most a few thousand lines
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # lines were overwritten before they were read: go on with the rest
                    continue
                self.close()
                self._failed = True
                return
            if not record:
                return
            self._read += 1
            _prefix, _, text = record.partition(b";")
            m = _KILLED.search(text.split(b"\n", 1)[0])
            if m:
                self._kills[int(m.group(1))] = (self._read, m.group(2).decode("utf-8", "replace"))
                while len(self._kills) > _KEEP:
                    del self._kills[next(iter(self._kills))]

    def mark(self) -> int | None:
        """How far the log is read now (None: it cannot be read)."""
        if not self._open():
            return None
        self._drain()
        return self._read if self._fd is not None else None

    def killed(self, pid: int, since: int | None) -> str | None:
        """The sentence saying the kernel's log names ``pid`` as killed for memory after the mark ``since``."""
        if since is None or not self._open():
            return None
        self._drain()
        found = self._kills.get(int(pid))
        if found is None or found[0] <= since:
            return None
        name = f" ({found[1]})" if found[1] else ""
        return f"the kernel's log: it killed pid {pid}{name} for lack of memory"
