"""Turn journals in the Hermes WebUI's format, read (the tray never writes them): ``<session_id>.jsonl``, and
the per-process shards ``<session_id>~<pid>.jsonl`` of newer WebUIs, merged. A line that is not one JSON
object (torn, garbage, nested too deep) is reported as malformed and the reader carries on. An earlier
release's decision journal is in this format too (:mod:`core.stores.migrate`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from hermes_tray_core.stores.fsutil import read_regular

__all__ = ["MAX_SESSION_ID_LEN", "TERMINAL_EVENTS", "derive_turn_journal_states", "pending_turns",
    "read_journal_files", "validate_journal_session_id"]

TERMINAL_EVENTS = frozenset({"completed", "interrupted"})
MAX_SESSION_ID_LEN = 200  # leaves room for "~<pid>.jsonl" inside a 255-byte file name
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9_.-]+")

#: One journal event: a flat JSON object as written and as read back.
Event = dict[str, Any]


def validate_journal_session_id(session_id: object) -> str:
    """``session_id`` if it is safe as a journal file name, else ``ValueError``. Stricter than the WebUI
    (which strips whitespace): an id that would be changed to be used is not the id the caller meant."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("invalid session_id: empty")
    if session_id != session_id.strip():
        raise ValueError("invalid session_id: surrounding whitespace")
    if len(session_id) > MAX_SESSION_ID_LEN:
        raise ValueError(f"invalid session_id: longer than {MAX_SESSION_ID_LEN} characters")
    if not _SESSION_ID_RE.fullmatch(session_id):
        raise ValueError("invalid session_id: only letters, digits, '_', '.' and '-' are allowed")
    if session_id.strip(".") == "":
        raise ValueError("invalid session_id: only dots")
    return session_id


# json.loads' own C scanner (same decoder settings); typeshed does not list this attribute of JSONDecoder.
_scan_once: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parse_clean(text: str) -> list[Event] | None:
    """Every line of ``text`` as one JSON object, or None unless each line is exactly one object with no white
    space around it (the journal as a writer leaves it): then ``scan_once`` ending at the newline is
    ``json.loads(line)`` without the slice and three Python frames. The 1,000 journals of a cold scan: 41.6 ms
    of CPU against 59.9 ms line by line; a cold ``status`` 151.3 against 171.1 ms
    (tests/bench/bench_tricks.py, 41 alternated runs)."""
    out: list[Event] = []
    append = out.append
    find = text.find
    scan = _scan_once
    pos, n = 0, len(text)
    try:
        while pos < n:
            nl = find("\n", pos)
            if nl < 0:
                nl = n
            if nl == pos:
                pos += 1
                continue
            event, end = scan(text, pos)
            if end != nl or type(event) is not dict:
                return None
            append(event)
            pos = nl + 1
    except (StopIteration, ValueError, RecursionError):
        return None
    return out


def _parse_lines(data: bytes, events: list[Event], malformed: list[Event], file_label: str | None) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        clean = _parse_clean(text)
        if clean is not None:
            events.extend(clean)
            return
    lines: Sequence[str | bytes] = text.split("\n") if text is not None else data.split(b"\n")
    loads = json.loads
    append = events.append
    for line_no, raw in enumerate(lines, start=1):
        try:
            event = loads(raw)
        except (ValueError, RecursionError):
            event = None  # an empty line lands here too, and is skipped below
        if type(event) is dict:
            append(event)
            continue
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        if not raw.strip():
            continue
        bad = {"line": line_no, "raw": raw}
        if file_label:
            bad["file"] = file_label
        malformed.append(bad)


_GC_PAUSE_BYTES = 256 * 1024
_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while parsing a big journal: JSON dicts hold no cycles, yet each 700 new containers
    trigger a collection (about half the parse time)."""
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


def _read_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """The whole file, or None if absent; a FIFO is refused without blocking. One read of the size ``fstat``
    gave: the 1,000 journals of a cold scan take 41.6 ms of CPU against 47.6 ms with ``open().read()``, a cold
    ``status`` 151.3 against 163.3 ms (tests/bench/bench_tricks.py)."""
    try:
        return read_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _created_key(event: Event) -> float:
    value = event.get("created_at")
    if type(value) is float or type(value) is int:
        return value
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def read_journal_files(session_id: str, files: Sequence[tuple[str | None, str | os.PathLike[str]]]) -> Event:
    """``{"session_id", "events", "malformed"}`` of one session's ``(label, path)`` files (label: None for the
    main file, the shard's name for a shard; a missing file is empty). Malformed: ``{"line", "raw"}`` (+
    ``"file"``); shards' events merged by ``created_at``."""
    events: list[Event] = []
    malformed: list[Event] = []
    blobs = [(label, data) for label, path in files if (data := _read_bytes(path)) is not None]
    with _gc_paused() if sum(len(b) for _, b in blobs) > _GC_PAUSE_BYTES else contextlib.nullcontext():
        for label, data in blobs:
            _parse_lines(data, events, malformed, label)
    if any(label is not None for label, _ in blobs):  # shards: merged by time
        events.sort(key=_created_key)
    return {"session_id": session_id, "events": events, "malformed": malformed}


def derive_turn_journal_states(events: Iterable[Event]) -> dict[str, Event]:
    """The latest event of each turn (``turn_id``), by ``created_at``; ties go to the later event in the input."""
    states: dict[str, Event] = {}
    stamps: dict[str, float] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        turn_id = event.get("turn_id")
        if type(turn_id) is not str:
            turn_id = str(turn_id or "")
        turn_id = turn_id.strip()
        if not turn_id:
            continue
        created = _created_key(event)
        previous = stamps.get(turn_id)
        if previous is None or created >= previous:
            states[turn_id] = event
            stamps[turn_id] = created
    return states


def pending_turns(events: Iterable[Event]) -> list[Event]:
    """Latest event of every unfinished turn, oldest first: running, or interrupted if its worker is gone."""
    return sorted((e for e in derive_turn_journal_states(events).values()
                   if str(e.get("event") or "") not in TERMINAL_EVENTS), key=_created_key)
