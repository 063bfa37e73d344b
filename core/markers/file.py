"""Hermes' marker file as bytes: where it is, one safe read, and its JSON exactly as Hermes writes it
(``json.dumps(entries, indent=None, ensure_ascii=False)``; object entries only).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from hermes_tray_core.errors import TrayError
from hermes_tray_core.stores import fsutil

__all__ = ["ABSENT", "MARKER_DIR", "MARKER_FILE", "MARK_KEYS", "MAX_FILE_BYTES", "TOO_LARGE_WORDS", "Corrupt",
           "Entries", "TooLarge", "decode", "encode", "marker_path", "read_file", "same_entry", "same_json", "wait_for_hermes_writes"]

MARKER_DIR = "desktop"
MARKER_FILE = "interrupted_turns.json"
# Largest legitimate file: 32 entries x 64,000 chars, each up to 6 bytes escaped. Anything bigger is junk.
MAX_FILE_BYTES = 16 * 1024 * 1024

#: "No entry under this key" where an entry would go (a value no JSON can hold).
ABSENT: Any = object()


def marker_path(home: Path | str) -> Path:
    return Path(home) / MARKER_DIR / MARKER_FILE


Entries = dict[str, dict[str, Any]]

#: The keys a tray continuation adds to its marker (Hermes ignores them): how ``state.db`` shows it answered
#: (:mod:`core.continuing.completion`), here so that readers need not import that.
MARK_KEYS = ("tray_state_session", "tray_after_message_id", "tray_note_sha256", "tray_submitted_at")


class Corrupt(TrayError, ValueError):
    """The bytes are not a JSON object (the message says why, in words)."""


_JSON_KIND = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false",
              type(None): "null"}


class TooLarge(Corrupt):
    """Over :data:`MAX_FILE_BYTES`, not read: a size limit, never said to be corrupt; writers set it aside."""


#: What :func:`read_file` hands back for a file over the limit (never a whole file's bytes).
_TOO_LARGE = b"\0too-large"
TOO_LARGE_WORDS = fsutil.too_large_words(MAX_FILE_BYTES)


def same_entry(a: object, b: object) -> bool:
    """Same stored value (:data:`ABSENT`: no entry): equal dicts that serialize alike."""
    if a is ABSENT or b is ABSENT:
        return a is b
    return isinstance(a, dict) and isinstance(b, dict) and same_json(a, b)


def same_json(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """``a`` and ``b`` serialize alike: equal, and the same key order and scalar types (1 == 1.0 == True, -0.0
    == 0.0); a container value ([1] == [1.0]) is not worth a deep check."""
    if a is b:
        return True
    if a != b:
        return False
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
    """Hermes' bytes; a lone surrogate (UTF-8 cannot carry it) makes the whole file ASCII-escaped."""
    try:
        return json.dumps(entries, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(entries, ensure_ascii=True).encode("ascii")


def decode(data: bytes) -> Entries:
    """Entries of a marker file, object entries only (as Hermes); :class:`Corrupt`, or :class:`TooLarge` for
    :func:`read_file`'s stand-in."""
    if data == _TOO_LARGE:
        raise TooLarge(TOO_LARGE_WORDS)
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Corrupt("it is not UTF-8 text") from None
    except RecursionError:
        raise Corrupt("it is nested too deeply") from None
    except ValueError:
        raise Corrupt("it is not valid JSON") from None
    if not isinstance(doc, dict):
        raise Corrupt(f"it holds {_JSON_KIND.get(type(doc), 'a value')}, not an object")
    return {k: v for k, v in doc.items() if isinstance(v, dict)}


def read_file(path: str | Path) -> tuple[bytes | None, tuple[int, int, int] | None]:
    """(bytes, signature) of the marker file as one consistent read, or (None, None) if it is absent."""
    try:
        fd = fsutil.open_regular(path, os.O_RDONLY | fsutil.NONBLOCK | fsutil.BINARY)
    except FileNotFoundError:
        return None, None
    try:
        st = os.fstat(fd)
        if st.st_size > MAX_FILE_BYTES:
            return _TOO_LARGE, (st.st_ino, st.st_size, st.st_mtime_ns)
        want = st.st_size + 1  # one read normally: a short read means EOF
        chunks = []
        while True:
            chunk = os.read(fd, want)
            chunks.append(chunk)
            if len(chunk) < want:
                break
    finally:
        os.close(fd)
    return b"".join(chunks), (st.st_ino, st.st_size, st.st_mtime_ns)


# Hermes' own temp files (``utils.atomic_json_write``: ``mkstemp(prefix=".interrupted_turns_",
# suffix=".tmp")``) live until its rename returns, and ext4 can hold that rename for milliseconds while it
# flushes (a ``stat`` still shows the old file). Waiting for them before our exchange leaves a merge only for
# a write inside our last step.
_HERMES_TEMP_PREFIX = f".{MARKER_FILE.rsplit('.', 1)[0]}_"
HERMES_WRITE_WAIT_SECS = 0.2  # longest wait for one Hermes write in flight (its read->rename: max 96 ms measured)
_STALE_TEMPS: dict[str, float] = {}  # Hermes temp name -> when first seen (a killed Hermes leaves one forever)


def wait_for_hermes_writes(directory: str) -> bool:
    """Wait (bounded) until no Hermes write is in flight in ``directory``. True if one was seen."""
    seen = False
    deadline = time.monotonic() + HERMES_WRITE_WAIT_SECS
    while True:
        try:
            names = [n for n in os.listdir(directory) if n.startswith(_HERMES_TEMP_PREFIX) and n.endswith(".tmp")]
        except OSError:
            return seen
        now = time.monotonic()
        live = []
        for n in names:
            first = _STALE_TEMPS.setdefault(os.path.join(directory, n), now)
            if now - first < 2 * HERMES_WRITE_WAIT_SECS:
                live.append(n)
        if len(_STALE_TEMPS) > 256:
            _STALE_TEMPS.clear()
        if not live or now >= deadline:
            return seen
        seen = True
        time.sleep(0.0005)
