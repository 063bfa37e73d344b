"""The marker file's JSON codec: exactly Hermes' bytes. Split from :mod:`core.markers`, which owns the file,
its lock and its writes.

Hermes writes ``json.dumps(entries, indent=None, ensure_ascii=False)``; :func:`encode` produces the same
bytes, :func:`decode` is the strict reader (object entries only, as Hermes).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MARK_KEYS", "Corrupt", "Entries", "decode", "encode", "same_json"]

Entries = dict[str, dict[str, Any]]

#: The extra keys a tray continuation adds to its marker (Hermes ignores them): how its completion is
#: recognised in ``state.db`` (:mod:`core.completion`). A format fact, so readers can test for them
#: without importing the completion engine.
MARK_KEYS = ("tray_state_session", "tray_after_message_id", "tray_note_sha256", "tray_submitted_at")


class Corrupt(ValueError):
    """The bytes are not a JSON object (the message says why)."""


def same_json(a: dict, b: dict) -> bool:
    """True when ``a`` and ``b`` serialize to the same JSON text (equal, same key order, same scalar types)."""
    if a is b:
        return True
    if a != b:
        return False
    # Equal dicts: same keys and ``==`` values. Same text also needs the same order and the same types
    # (1 == 1.0 == True), and -0.0 == 0.0. Containers ([1] == [1.0]) are not worth a deep check: re-encode.
    for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
        kind = type(va)
        if ka != kb or kind is not type(vb):
            return False
        if kind is float:
            if va == 0 and repr(va) != repr(vb):
                return False
        elif kind is not str and kind is not int and kind is not bool and va is not None:
            return False
    return True


def encode(entries: Entries) -> bytes:
    """Hermes' bytes: ``json.dumps(indent=None, ensure_ascii=False)`` in UTF-8. A lone surrogate (which UTF-8
    cannot carry) makes the whole file ASCII-escaped, which any JSON reader parses."""
    try:
        return json.dumps(entries, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(entries, ensure_ascii=True).encode("ascii")


def decode(data: bytes) -> Entries:
    """Entries of a marker file; object entries only (as Hermes). Raises :class:`Corrupt` if not a JSON object."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Corrupt(type(exc).__name__) from None
    if not isinstance(doc, dict):
        raise Corrupt(f"top level is a JSON {type(doc).__name__}, not an object")
    return {k: v for k, v in doc.items() if isinstance(v, dict)}
