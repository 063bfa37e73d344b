"""Start marks: what identifies a process in the tray's own records, unmoved by wall-clock steps.

psutil's create time is the boot time plus the start since boot, so a wall-clock step moves it for every live
process. The tray's own records of a process therefore carry a mark beside it:

* Linux: ``linux:<boot id>:<pid>:<start ticks>``: neither moves with the clock; a reboot changes the boot id.
* elsewhere: ``psutil:<pid>:<create time>:<boot time>``: a step moves both (or neither, where the OS keeps the
  creation instant), so either agreeing within 1 ms is the same process. Not met there: a pid reused in a
  later boot at the same boot-relative instant would pass; leases also expire, which bounds it.

A mark names its pid, so a mark left beside another pid is never taken for that pid's.
"""

from __future__ import annotations

import os
import sys

from hermes_tray_core.process.identity import START_TIME_TOLERANCE, process_errors
from hermes_tray_core.process.machine import read_head

__all__ = ["PROC", "mark_pid", "same_process", "start_mark"]

#: The procfs this module reads (the real one; psutil's ``PROCFS_PATH`` is psutil's business).
PROC = "/proc"


def _linux_mark(pid: int, boot: str) -> str | None:
    """Boot id + start ticks: immune to wall-clock steps by construction."""
    try:
        data = read_head(f"{PROC}/{int(pid)}/stat") or b""
        # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")".
        ticks = int(data[data.rindex(b")") + 2:].split()[19])  # field 22 of stat(5); [0] is field 3 (state)
    except (ValueError, IndexError):
        return None
    return f"linux:{boot}:{int(pid)}:{ticks}"


def _psutil_mark(pid: int) -> str | None:
    """psutil create time + the boot time it was computed from (see the module doc for what this misses)."""
    try:
        import psutil

        created = float(psutil.Process(int(pid)).create_time())
        booted = float(psutil.boot_time())
    except process_errors():  # gone, not ours to read, or a platform that answers oddly: no mark
        return None
    return f"psutil:{int(pid)}:{created!r}:{booted!r}"


_BOOT_ID = (read_head(f"{PROC}/sys/kernel/random/boot_id") or b"").decode("ascii", "replace").strip() \
    if sys.platform.startswith("linux") and os.path.exists(f"{PROC}/self/stat") else ""
_KIND = "linux" if _BOOT_ID else "psutil"


def start_mark(pid: int) -> str | None:
    """The start mark of the live process ``pid`` (None when it cannot be read: gone, or hidden from us)."""
    return _linux_mark(pid, _BOOT_ID) if _BOOT_ID else _psutil_mark(pid)


def _fields(mark: object) -> tuple[str, int, list[str]] | None:
    """(kind, pid, the fields after the kind's prefix) of a mark, or None when it is not one."""
    if not isinstance(mark, str):
        return None
    kind, _, rest = mark.partition(":")
    parts = rest.split(":")  # linux: boot id, pid, ticks; psutil: pid, create time, boot time
    try:
        return kind, int(parts[1] if kind == "linux" else parts[0]), parts
    except (ValueError, IndexError):
        return None


def mark_pid(mark: object) -> int | None:
    """The pid a mark was taken of, or None when ``mark`` is not a mark."""
    fields = _fields(mark)
    return fields[1] if fields is not None else None


def same_process(mark: object, pid: int) -> bool | None:
    """Is ``pid`` now the process ``mark`` was taken of? None when that cannot be told (another platform's
    mark, or unreadable: the caller's liveness check decides)."""
    recorded = _fields(mark)
    if recorded is None or recorded[0] != _KIND:
        return None
    if recorded[1] != pid:
        return False
    current = _fields(start_mark(pid))
    if current is None:
        return None
    a, b = recorded[2], current[2]
    if _KIND == "linux":
        return a == b
    try:
        ca, ba, cb, bb = float(a[1]), float(a[2]), float(b[1]), float(b[2])
    except (ValueError, IndexError):
        return False
    return abs(ca - cb) < START_TIME_TOLERANCE or abs((ca - ba) - (cb - bb)) < START_TIME_TOLERANCE
