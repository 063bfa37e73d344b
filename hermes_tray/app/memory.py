"""Keep an idle tray small: glibc gives every allocating thread its own 64 MB arena, and the half-empty arenas of
the GUI, detector, notifier and resume threads stay resident, so two arenas it is; after start-up
``malloc_trim`` returns what imports and the first scan left free. No-ops elsewhere.
"""

from __future__ import annotations

import ctypes
import gc
import sys

_M_ARENA_MAX = -8


def _libc():
    """The process's own symbols, libc's among them (no ``ctypes.util``: it costs 5 ms before the icon)."""
    return ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def limit_arenas(count: int = 2) -> None:
    """Call before any thread starts."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        try:
            libc.mallopt(_M_ARENA_MAX, count)
        except Exception:  # boundary: a C library call: a libc without it changes nothing
            pass


def trim() -> None:
    """Collect garbage and give free heap pages back to the OS."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        try:
            libc.malloc_trim(0)
        except Exception:  # boundary: a C library call: a libc without it changes nothing
            pass
