"""Guard against a PySide6 refcount bug that would crash a long-running tray on Python < 3.12.

Measured here with PySide6 6.12 on CPython 3.11: every call of a ``void`` Qt method (``setEnabled``,
``QTimer.start``, ``setObjectName``…) drops one reference to ``None`` that it never took. ``None``
starts with ~5,000 references, so after a few thousand calls — minutes of a tray rebuilding its
menu — CPython aborts with "none_dealloc: deallocating None" (or "bool_dealloc"). Python 3.12 made
these singletons immortal, which is why the bindings get away with it there.

:func:`install` checks whether this build has the bug (a few void calls, refcount compared) and,
only then, does what 3.12 does: gives ``None``/``True``/``False`` a reference count no leak can
exhaust. Idempotent, cheap, and a no-op on 3.12+ or on a build without the bug.
"""

from __future__ import annotations

import sys

_done = False
_applied = False


def has_refcount_bug() -> bool:
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(16):
        probe.setObjectName("probe")
    return sys.getrefcount(None) < before


def install() -> bool:
    """Returns True when the protection was applied (the bug is present)."""
    global _done, _applied
    if _done:
        return _applied
    _done = True
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not has_refcount_bug():
        return False
    import ctypes

    for obj in (None, True, False, Ellipsis, NotImplemented):
        # ob_refcnt is the first field of every CPython object (release builds)
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40
    _applied = True
    return True
