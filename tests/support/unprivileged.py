"""Meet file permissions as an ordinary user does, even when the tests run as root (as CI does).

Root reads and enters any directory whatever its mode, so a "home the user cannot enter" needs a child that
is not allowed to: :func:`no_file_privileges` is a ``preexec_fn`` that, for root, drops the three
capabilities that let root ignore file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER)
from the bounding set, so the child it starts — still uid 0, so it can run the interpreter under /root —
gets "permission denied" from a directory another user owns with mode 0700 (:func:`locked_dir`). For any
other user nothing needs dropping and :func:`locked_dir` is simply mode 000.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

_PR_CAPBSET_DROP = 24
_FILE_CAPS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
_NOBODY = 65534


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _drop() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _FILE_CAPS:
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot drop a file capability")


def no_file_privileges() -> Callable[[], None] | None:
    """The ``preexec_fn`` for a child that must be refused what an ordinary user is refused (None: nothing
    to drop, this user is one)."""
    return _drop if _is_root() else None


def locked_dir(path: Path, *, content: dict[str, str] | None = None) -> Path:
    """A directory the child of :func:`no_file_privileges` cannot enter or list (``content``: files put in it
    first, so a scan that says "nothing there" would be lying)."""
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in (content or {}).items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    if _is_root():
        for p in [path, *path.rglob("*")]:
            os.chown(p, _NOBODY, _NOBODY)
        path.chmod(0o700)
    else:
        path.chmod(0)
    return path


def unlock(path: Path) -> None:
    """Let the test's own clean-up remove it again."""
    if path.exists():
        path.chmod(0o700)
        if _is_root():
            for p in [path, *path.rglob("*")]:
                os.chown(p, 0, 0)
