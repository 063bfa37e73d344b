"""The marker file's JSON codec: Hermes' exact bytes, fast under contention.

Hermes writes ``json.dumps(entries, indent=None, ensure_ascii=False)``; :func:`encode` produces the same
bytes member by member, reusing the text of entries that did not change, and :func:`decode_known` parses
a file laid out that way reusing known member texts, so a write that changes one entry of 32 neither
parses nor encodes the other 31. :func:`decode` is the plain, strict reader (object entries only, as
Hermes). Split from :mod:`core.markers`, which owns the file, its lock and its writes.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MARK_KEYS", "Corrupt", "Entries", "Frags", "Snapshot", "decode", "decode_known", "encode", "same_json"]

Entries = dict[str, dict[str, Any]]

#: The extra keys a tray continuation adds to its marker (Hermes ignores them): how its completion is
#: recognised in ``state.db`` (:mod:`core.completion`). A format fact, so readers can test for them
#: without importing the completion engine.
MARK_KEYS = ("tray_state_session", "tray_after_message_id", "tray_note_sha256", "tray_submitted_at")


class Corrupt(ValueError):
    """The bytes are not a JSON object (the message says why)."""


_encode_key = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses for keys

Frags = dict[str, tuple[dict, str]]  # key -> (entry, its member text)


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


def encode(entries: Entries, known: Frags | None = None) -> tuple[bytes, Frags]:
    """Hermes' bytes: ``json.dumps(indent=None, ensure_ascii=False)`` in UTF-8, ASCII escapes for lone surrogates.

    Built member by member so that an entry whose text is ``known`` (from the last file this process wrote)
    is not encoded again: under contention each write changes one entry of up to 32, and re-encoding the
    rest would double the time spent holding the lock. Returns the bytes and the member texts for next time.
    Same bytes as one ``json.dumps`` of the whole map.
    """
    frags: Frags = {}
    for key, entry in entries.items():
        hit = known.get(key) if known else None
        if hit is None or (hit[0] is not entry and not same_json(hit[0], entry)):
            hit = (entry, f"{_encode_key(key)}: {json.dumps(entry, ensure_ascii=False)}")
        frags[key] = hit
    text = "{" + ", ".join([m for _, m in frags.values()]) + "}"
    try:
        return text.encode("utf-8"), frags
    except UnicodeEncodeError:
        return json.dumps(entries, ensure_ascii=True).encode("ascii"), {}


class Snapshot:
    """The last marker file this process wrote or read for a write at one path, parsed, with its entries'
    JSON texts.

    Only a cache of CPU work: the file is still read under the lock on every write; the parse is skipped
    only when those bytes are identical to the snapshot's, a member is taken from it only when its text is
    byte-identical (:func:`decode_known`), and an entry's text is reused only when the entry serializes
    identically (:func:`same_json`).
    """

    __slots__ = ("data", "entries", "frags")

    def __init__(self, data: bytes, entries: Entries, frags: dict[str, tuple[dict, str]]) -> None:
        self.data, self.entries, self.frags = data, entries, frags




def decode(data: bytes) -> Entries:
    """Entries of a marker file; object entries only (as Hermes). Raises :class:`Corrupt` if not a JSON object."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Corrupt(type(exc).__name__) from None
    if not isinstance(doc, dict):
        raise Corrupt(f"top level is a JSON {type(doc).__name__}, not an object")
    return {k: v for k, v in doc.items() if isinstance(v, dict)}


_scanstring = json.decoder.scanstring  # what json.loads uses for strings (strict: no raw control characters)
_scan_value = json.decoder.JSONDecoder().raw_decode  # json.loads' decoder, one value at an index


def decode_known(data: bytes, known: Frags | None) -> tuple[Entries, Frags] | None:
    """:func:`decode` for a file in exactly the layout Hermes and we write, reusing ``known`` member texts.

    A member whose text is, byte for byte, a known member text (``"key": {...}`` as :func:`encode` made
    it) is that known entry: JSON text determines its value, so it is neither parsed nor encoded again.
    Other members are parsed as :func:`json.loads` would. Returns (entries, the known texts found) — the
    same entries as :func:`decode` — or None when the file is laid out any other way (whitespace, other
    separators, junk, not UTF-8 …): then :func:`decode` judges it. Under contention another writer
    changes one or two entries of up to 32 between our writes; this skips parsing the rest.
    """
    try:
        text = data.decode("utf-8")
        last = len(text) - 1
        if last < 1 or text[0] != "{" or text[last] != "}":
            return None
        doc: dict[str, Any] = {}
        frags: Frags = {}
        if last == 1:
            return doc, frags
        pos = 1
        while True:
            if text[pos] != '"':
                return None
            key, end = _scanstring(text, pos + 1)
            if text[end:end + 2] != ": ":
                return None
            hit = known.get(key) if known else None
            if hit is not None and text.startswith(hit[1], pos):
                value, stop = hit[0], pos + len(hit[1])
                frags[key] = hit
            else:
                value, stop = _scan_value(text, end + 2)
                frags.pop(key, None)  # a repeated key: the last value wins, as in json.loads
            doc[key] = value
            if stop == last:
                if text[stop] != "}":
                    return None
                break
            if text[stop:stop + 2] != ", ":
                return None
            pos = stop + 2
    except (ValueError, RecursionError, IndexError):  # JSONDecodeError is a ValueError
        return None
    if len(frags) != len(doc):
        doc = {k: v for k, v in doc.items() if isinstance(v, dict)}  # object entries only, as decode
    return doc, frags
