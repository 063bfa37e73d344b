"""Two facts about this computer that can say why a process stopped: when the computer last started (a
turn whose Hermes started before that was cut off by the restart at the latest) and how many processes the
kernel's out-of-memory killer has ended since then (a count that moves as the OOM killer strikes).

Each is read from one file named here — ``PROC_STAT`` and ``VMSTAT`` are the seam a test points at a file
of its own — and each read answers None when it cannot tell (not Linux, no such line, unreadable), never a
guess. Elsewhere the boot time comes from psutil; the OOM count exists only on Linux (4.13 and later).
"""

from __future__ import annotations

import sys

from hermes_tray_core.process.identity import process_errors

__all__ = ["PROC_STAT", "VMSTAT", "boot_time", "oom_kills"]

#: Where the kernel says when it booted (``btime``) and how many OOM kills it made (``oom_kill``).
PROC_STAT = "/proc/stat"
VMSTAT = "/proc/vmstat"


def _field(path: str, name: bytes) -> int | None:
    """The integer after ``name`` on its line of a ``/proc`` table file, or None."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    for line in data.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def boot_time() -> float | None:
    """When this computer last started (wall clock), or None when it cannot be read."""
    if sys.platform.startswith("linux"):
        value = _field(PROC_STAT, b"btime")
        if value is not None:
            return float(value)
    try:
        import psutil

        return float(psutil.boot_time())
    except process_errors():  # psutil answers oddly on exotic systems (RuntimeError): then it cannot be told
        return None


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has ended since boot (``oom_kill`` of
    ``/proc/vmstat``), or None where the kernel does not say."""
    return _field(VMSTAT, b"oom_kill")
