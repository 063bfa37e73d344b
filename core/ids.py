"""Validation of session keys / ids that end up in file names, lease names and argv."""

from __future__ import annotations

import re

__all__ = ["InvalidIdError", "MAX_ID_LEN", "is_valid_session_id", "validate_session_id"]

MAX_ID_LEN = 256
# Hermes session ids are like 20260101_120000_abcdef; WebUI ids are [A-Za-z0-9_.-]. Allow both, nothing else.
_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


class InvalidIdError(ValueError):
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


def is_valid_session_id(value: object) -> bool:
    try:
        validate_session_id(value)
    except InvalidIdError:
        return False
    return True
