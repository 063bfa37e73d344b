"""Refuse, with a clear message, to run on PySide6 bindings that drop references to ``None``.

PYSIDE-3474 (https://bugreports.qt.io/browse/PYSIDE-3474): PySide6 6.12.0 on CPython < 3.12 (where ``None`` is
not immortal) drops one reference to ``None`` on every call of a ``void`` Qt method; after a few thousand calls,
minutes of a tray rebuilding its menu, CPython aborts ("none_dealloc"). Measured on CPython 3.11.7
(tests/test_qt_bindings.py): 6.12.0 aborts after ~5,200 ``setObjectName`` calls, 6.11.3 loses none in 11,000.
``pyproject.toml`` pins ``PySide6-Essentials<6.12`` there; :func:`check` turns a bypassed pin (a distribution's
package, ``--no-deps``) into this message at start instead of a crash minutes later.
"""

from __future__ import annotations

import sys

__all__ = ["BrokenBindings", "check", "has_refcount_bug"]


class BrokenBindings(RuntimeError):
    """The installed PySide6 has the ``None`` refcount bug (PYSIDE-3474)."""


def has_refcount_bug() -> bool:
    """A few void calls, ``None``'s reference count compared (a no-op on Python 3.12+, where it is immortal)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    from PySide6.QtCore import QObject

    probe = QObject()
    calls = 500  # an affected build loses one reference per call; other threads move the count by a few
    before = sys.getrefcount(None)
    for _ in range(calls):
        probe.setObjectName("probe")
    lost = before - sys.getrefcount(None)
    if lost < calls // 2:
        return False
    import ctypes

    for _ in range(lost):  # give back what the probe itself cost, so exiting does not abort in none_dealloc
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(None))
    return True


def check() -> None:
    """Raise :class:`BrokenBindings` (saying what to install) when this PySide6 has the bug."""
    if has_refcount_bug():
        import PySide6

        raise BrokenBindings(
            f"PySide6 {PySide6.__version__} on Python {sys.version.split()[0]} has a reference-count bug "
            "that crashes long-running programs (PYSIDE-3474). Install PySide6-Essentials<6.12 "
            "(`pip install 'PySide6-Essentials<6.12'`) or use Python 3.12+."
        )
