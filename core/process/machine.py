"""When this computer last started (a turn whose Hermes started before that was cut off by the restart at the
latest): ``PROC_STAT`` (a test seam) on Linux, else psutil; None when it cannot tell, never a guess.
"""

from __future__ import annotations

import sys

from hermes_tray_core.process.identity import process_errors

__all__ = ["PROC_STAT", "boot_time"]

#: Where the kernel says when it booted (``btime``).
PROC_STAT = "/proc/stat"


def read_head(path: str, limit: int = 1 << 20) -> bytes | None:
    """The first ``limit`` bytes of ``path``, or None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except (OSError, ValueError):
        return None


def field(path: str, name: bytes) -> int | None:
    """The integer after ``name`` on its line of a ``/proc`` table file, or None."""
    for line in (read_head(path) or b"").splitlines():
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
        value = field(PROC_STAT, b"btime")
        if value is not None:
            return float(value)
    try:
        import psutil

        return float(psutil.boot_time())
    except process_errors():  # psutil answers oddly on exotic systems (RuntimeError): then it cannot be told
        return None

