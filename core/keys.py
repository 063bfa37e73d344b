"""A turn's identity, checked once where it enters the engine: its session key and its home.

A key from outside ends up in lease names, journal records and argv: :func:`session_key` checks it once and
returns a ``SessionKey`` that nothing checks again (mypy holds the line). :func:`home_path` gives a home its
one canonical spelling, a :class:`HomePath`, by which everything compares homes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NewType

from hermes_tray_core.errors import TrayError

__all__ = ["HomePath", "InvalidIdError", "MAX_ID_LEN", "SessionKey", "home_path", "session_key",
           "validate_session_id"]

#: A session key that passed :func:`session_key` (Hermes' stored session id, ``state.db`` ``sessions.id``).
SessionKey = NewType("SessionKey", str)

MAX_ID_LEN = 256
# Hermes session ids are like 20260101_120000_abcdef; WebUI ids are [A-Za-z0-9_.-]. Allow both, nothing else.
_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


class InvalidIdError(TrayError, ValueError):
    """A session key or id that is unsafe to use (path separators, '..', control chars, too long)."""


def validate_session_id(value: object, *, what: str = "session id") -> str:
    """Return ``value`` if it is a safe id, else raise :class:`InvalidIdError` saying why."""
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidIdError(f"{what} is empty")
    if len(value) > MAX_ID_LEN:
        raise InvalidIdError(f"{what} is {len(value)} characters long (at most {MAX_ID_LEN})")
    if value != value.strip():
        raise InvalidIdError(f"{what} has leading or trailing whitespace")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidIdError(f"{what} contains control characters")
    if "/" in value or "\\" in value:
        raise InvalidIdError(f"{what} contains a path separator")
    if ".." in value or set(value) == {"."}:
        raise InvalidIdError(f"{what} contains '..'")
    if not _ID_RE.match(value):
        raise InvalidIdError(f"{what} may only contain letters, digits, '_', '.', ':' and '-'")
    return value


def session_key(value: object, *, what: str = "session key") -> SessionKey:
    """``value`` as a :class:`SessionKey`, or :class:`InvalidIdError` saying why it is not one."""
    return SessionKey(validate_session_id(value, what=what))


class HomePath(str):
    """A home in its canonical spelling (:func:`home_path`); a plain ``str`` otherwise (JSON, dict keys, paths)."""

    __slots__ = ()


def home_path(home: Path | str) -> HomePath:
    """``~`` expanded, symlinks and ``..`` resolved (else the absolute path), case folded where the OS folds
    it; a :class:`HomePath` is returned as it is."""
    if isinstance(home, HomePath):
        return home
    path = Path(os.path.expanduser(os.fspath(home)))
    try:
        text = str(path.resolve(strict=False))
    except (OSError, RuntimeError, ValueError):  # a symlink loop (RuntimeError before Python 3.13), a NUL byte
        text = str(path.absolute())
    return HomePath(os.path.normcase(text))
