"""Append-only, crash-safe turn journal in the Hermes WebUI's format.

One JSONL file per session at ``<session_dir>/_turn_journal/<session_id>.jsonl``; newer WebUIs
also write per-process shards ``<session_id>~<pid>.jsonl``, which reads merge. The tray uses
this module two ways: to *read* WebUI journals (a turn whose latest event is not terminal and
whose worker is gone was interrupted) and to keep its own decision journal (see
:mod:`core.stores.decisions`). WebUI files are only ever read; only the tray's own files are compacted.

Durability and concurrency: each append takes a blocking OS lock on the journal file itself
(``flock`` — the same lock the WebUI takes, so the two serialise — or a ``msvcrt`` byte lock on
Windows), writes one line, fsyncs, and fsyncs the directory when it created the file. The fd stays open
for this process's next append (:mod:`core.stores.append_fds`; threads of one process serialise on
in-process locks, since ``flock`` cannot tell them apart). A torn last line (a writer killed mid-write) is
closed with a newline before the next event, so the fragment never swallows a good event; readers report it
as malformed and carry on.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hermes_tray_core.stores import append_fds as journal_fds
from hermes_tray_core.stores.fsutil import (
    atomic_write_bytes,
    fsync_dir,
    lock_fd,
    sweep_stale_temps,
    unlock_fd,
    write_all,
)

__all__ = ["MAX_SESSION_ID_LEN", "TERMINAL_EVENTS", "TURN_JOURNAL_DIR_NAME", "append_turn_journal_event",
    "append_turn_journal_event_for_stream", "append_turn_journal_events", "compact_turn_journal", "derive_turn_journal_states",
    "is_terminal_turn_event", "iter_turn_journal_session_ids", "journal_dir", "journal_path",
    "make_turn_id", "pending_turns", "read_journal_files", "read_turn_journal", "shard_paths",
    "turn_journal_files", "validate_journal_session_id"]

TURN_JOURNAL_DIR_NAME = "_turn_journal"
TERMINAL_EVENTS = frozenset({"completed", "interrupted"})
MAX_SESSION_ID_LEN = 200  # leaves room for "~<pid>.jsonl" inside a 255-byte file name
_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_SHARD_RE = re.compile(r"^(?P<sid>[A-Za-z0-9_.-]+)~(?P<pid>\d+)\.jsonl$")
_SUFFIX = ".jsonl"

#: One journal event: a flat JSON object as written and as read back.
Event = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# names


def validate_journal_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is safe as a journal file name, else raise ``ValueError``.

    Stricter than the WebUI on purpose (it strips whitespace first; we refuse it): an id that
    would be changed to be used is not the id the caller meant.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("invalid session_id: empty")
    if session_id != session_id.strip():
        raise ValueError("invalid session_id: surrounding whitespace")
    if len(session_id) > MAX_SESSION_ID_LEN:
        raise ValueError(f"invalid session_id: longer than {MAX_SESSION_ID_LEN} characters")
    if not _SESSION_ID_RE.match(session_id) or "\n" in session_id:
        raise ValueError("invalid session_id: only letters, digits, '_', '.' and '-' are allowed")
    if session_id.strip(".") == "":
        raise ValueError("invalid session_id: only dots")
    return session_id


def journal_dir(session_dir: Path | str) -> Path:
    return Path(session_dir) / TURN_JOURNAL_DIR_NAME


@functools.lru_cache(maxsize=512)
def _cached_path(session_id: str, session_dir: str) -> Path:
    return Path(session_dir) / TURN_JOURNAL_DIR_NAME / f"{session_id}{_SUFFIX}"


def journal_path(session_id: str, *, session_dir: Path | str) -> Path:
    """``<session_dir>/_turn_journal/<session_id>.jsonl`` for a validated id."""
    return _cached_path(validate_journal_session_id(session_id), os.fspath(session_dir))


def make_turn_id(now: float | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<12 hex>``, the WebUI's turn id shape."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{os.urandom(6).hex()}"


def is_terminal_turn_event(event: Event | None) -> bool:
    return str((event or {}).get("event") or "") in TERMINAL_EVENTS


# ---------------------------------------------------------------------------------------------
# locking: a blocking lock on the journal file itself

# The engine's one platform lock (core.stores.fsutil): ``flock`` on POSIX — the WebUI's lock, so its writers and
# ours serialise. Windows byte locks are mandatory: lock one byte far past any real data, so readers of the
# journal are never refused while an append is in progress.
_WIN_LOCK_OFFSET = 1 << 40


def _lock(fd: int) -> None:
    lock_fd(fd, offset=_WIN_LOCK_OFFSET)


def _unlock(fd: int) -> None:
    unlock_fd(fd, offset=_WIN_LOCK_OFFSET)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only

    def _read_at(fd: int, size: int, offset: int) -> bytes:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)
else:

    def _read_at(fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)


def _open_locked(path: Path) -> tuple[int, bool, int]:
    """Open ``path`` for appending (creating it 0600) and lock it. Returns ``(fd, created, size)``.

    Re-opens when the file was replaced (compacted) while we waited for the lock, so an append
    can never land in an unlinked inode. A symlink or a non-regular file is refused.
    """
    name = os.fspath(path)
    while True:
        fd, created = journal_fds.open_append(name)
        try:
            _lock(fd)
            st = os.fstat(fd)
            if st.st_nlink == 0 and os.name != "nt":
                _unlock(fd)
                os.close(fd)
                continue
        except BaseException:
            os.close(fd)
            raise
        return fd, created, st.st_size


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # reused: dumps(**kw) builds one per call
_SCALARS = (str, int, bool, type(None))
_INF = float("inf")


def _encode(payload: Event) -> bytes:
    return (_ENCODER.encode(payload) + "\n").encode("utf-8")


def _as_written(payload: Event, line: bytes) -> Event:
    """What a reader will get back for ``line``. A flat dict of JSON-native values round-trips
    unchanged, so skip re-parsing it; anything else (tuples, int keys, nesting) is re-parsed."""
    for key, value in payload.items():
        if type(key) is not str or (
                type(value) not in _SCALARS and not (type(value) is float and -_INF < value < _INF)):
            return _loads_event(line)
    return payload


def _loads_event(line: bytes) -> Event:
    """A line this process just wrote, read back (it is one JSON object)."""
    event: Event = json.loads(line)
    return event


def _append(path: Path, build: bytes | Callable[[int], bytes]) -> None:
    """Lock ``path``, write ``build`` (or ``build(fd)``, computed under the lock) as a whole line
    (after a newline if the tail is torn), fsync, unlock. The fd stays open for the next append
    from this process."""
    name = os.fspath(path)
    replaced = False
    with journal_fds.STRIPES[hash(name) % len(journal_fds.STRIPES)]:
        while True:
            h, created = journal_fds.acquire(name)
            try:
                fd = h.fd
                _lock(fd)
                try:
                    st = os.fstat(fd)
                    if st.st_nlink == 0 and os.name != "nt":
                        replaced = True  # by a compaction (or deleted) since we opened it: use the new file
                        continue
                    replaced = False
                    size = st.st_size
                    data = build if isinstance(build, bytes) else build(fd)
                    if size and not (h.ino == st.st_ino and h.end == size) and _read_at(fd, 1, size - 1) != b"\n":
                        data = b"\n" + data  # a killed writer left a torn line: never glue onto it
                    try:
                        write_all(fd, data)
                        os.fsync(fd)
                    except BaseException:
                        h.end = -1
                        raise
                    h.ino, h.end = st.st_ino, size + len(data)
                finally:
                    _unlock(fd)
                    if replaced:
                        journal_fds.drop(name, h)
            finally:
                journal_fds.release(h)
            break
    if created:
        fsync_dir(Path(os.path.dirname(name)))


_valid_ids: set[str] = set()


def _prepare(session_id: str, event: object) -> Event:
    if not isinstance(event, dict):
        raise TypeError("event must be a dict")
    if not str(event.get("event") or "").strip():
        raise ValueError("event is required")
    if type(session_id) is not str or session_id not in _valid_ids:
        validate_journal_session_id(session_id)
        if len(_valid_ids) < 4096:
            _valid_ids.add(session_id)
    payload = dict(event)
    payload.setdefault("version", 1)
    payload["session_id"] = session_id
    if not payload.get("turn_id"):
        payload["turn_id"] = make_turn_id()
    payload.setdefault("created_at", time.time())
    return payload


# ---------------------------------------------------------------------------------------------
# appends


def append_turn_journal_event(session_id: str, event: Event, *, session_dir: Path | str) -> Event:
    """Append one event and fsync it before returning; returns exactly what was written.

    Fills ``version`` (1), ``session_id``, ``turn_id`` and ``created_at`` when absent.
    ``TypeError`` for a non-dict event, ``ValueError`` for an empty ``event`` name or a bad
    session id; nothing is written for a rejected call.
    """
    return append_turn_journal_events(session_id, [event], session_dir=session_dir)[0]


def append_turn_journal_events(session_id: str, events: Sequence[Event], *, session_dir: Path | str) -> list[Event]:
    """Append several events as one write and one fsync (a crash storm is one journal write, not one per
    turn); returns them as written. All are checked before anything is written: one bad event writes none.
    They share one ``created_at`` unless an event brings its own."""
    now = time.time()
    payloads = [_prepare(session_id, {"created_at": now, **e} if isinstance(e, dict) else e) for e in events]
    lines = [_encode(p) for p in payloads]  # raises (nothing written) for a value JSON cannot hold
    if lines:
        _append(_cached_path(session_id, os.fspath(session_dir)), b"".join(lines))
    return [_as_written(p, line) for p, line in zip(payloads, lines, strict=True)]


def _latest_turn_id_for_stream(events: Iterable[Event], stream_id: str) -> str | None:
    stream = str(stream_id or "").strip()
    if not stream:
        return None
    latest: str | None = None
    for event in events:
        if isinstance(event, dict) and str(event.get("stream_id") or "") == stream:
            turn_id = str(event.get("turn_id") or "").strip()
            if turn_id:
                latest = turn_id
    return latest


def append_turn_journal_event_for_stream(
    session_id: str, stream_id: str, event: Event, *, session_dir: Path | str
) -> Event:
    """Append an event for the turn that ``stream_id`` belongs to (the latest turn that named it).

    The lookup and the append happen under one lock, so a concurrent writer cannot slip a
    different turn for the same stream in between.
    """
    if not isinstance(event, dict):
        raise TypeError("event must be a dict")
    base = dict(event)
    base["stream_id"] = str(stream_id)
    payload = _prepare(session_id, {**base, "turn_id": base.get("turn_id") or "pending"})
    path = journal_path(session_id, session_dir=session_dir)
    written: list[bytes] = []

    def build(_fd: int) -> bytes:
        if base.get("turn_id"):
            turn_id = base["turn_id"]
        else:
            events = read_turn_journal(session_id, session_dir=session_dir)["events"]
            turn_id = _latest_turn_id_for_stream(events, stream_id) or make_turn_id()
        line = _encode({**payload, "turn_id": turn_id})
        written.append(line)
        return line

    _append(path, build)
    return _loads_event(written[0])


# ---------------------------------------------------------------------------------------------
# reads


# json.loads' own C scanner (same decoder settings); typeshed does not list this attribute of JSONDecoder.
_scan_once: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parse_clean(text: str) -> list[Event] | None:
    """Every line of ``text`` as one JSON object, or None unless each line is exactly one object with no
    surrounding white space (empty lines aside) — the journal as a writer leaves it. For such a line
    ``json.loads(line)`` is ``scan_once(text, start)`` ending at the newline: the same result without
    the per-line slice and three Python frames. Anything else is left to the line-by-line reader.

    Measured (tests/bench/bench_tricks.py, one run, 2026-12-03, 41 alternated runs): reading the 1,000
    journals of a cold scan takes 41.6 ms of CPU against 59.9 ms line by line with ``json.loads``
    (1.44x), and a cold ``status`` 151.3 against 171.1 ms (+19.8 ms, 1.13x)."""
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
    """Pause the cyclic GC while parsing a big journal: JSON dicts hold no cycles, yet each
    700 new containers trigger a collection pass over them all (about half the parse time)."""
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


# O_NONBLOCK: a FIFO named like a journal must not hang the reader (a regular file ignores the flag).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """The whole file, or None if it is absent; refuses anything but a regular file without blocking on it
    (a FIFO). By descriptor, with one read of the size ``fstat`` gave (a short read of a regular file is
    its end): reading the 1,000 journals of a cold scan takes 41.6 ms of CPU against 47.6 ms with
    ``open(path, "rb").read()``, a cold ``status`` 151.3 against 163.3 ms (tests/bench/bench_tricks.py, one
    run, 2026-12-03, 41 alternated runs)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        size = st.st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        chunks = [data]  # it grew since the fstat: read on to its end
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _created_key(event: Event) -> float:
    value = event.get("created_at")
    if type(value) is float or type(value) is int:
        return value
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def shard_paths(session_id: str, *, session_dir: Path | str) -> list[Path]:
    """The per-process shards ``<session_id>~<pid>.jsonl`` of one session, sorted."""
    validate_journal_session_id(session_id)
    prefix = f"{session_id}~"
    try:
        names = os.listdir(journal_dir(session_dir))
    except OSError:
        return []
    return [
        journal_dir(session_dir) / n
        for n in sorted(names)
        if n.startswith(prefix) and (m := _SHARD_RE.match(n)) and m.group("sid") == session_id
    ]


def read_turn_journal(
    session_id: str, *, session_dir: Path | str, shards: list[Path] | None = None
) -> Event:
    """``{"session_id", "events", "malformed"}`` for one session, shards merged.

    Malformed entries are ``{"line": <1-based>, "raw": <text>}`` (plus ``"file"`` for a line in
    a shard). With shards present the merged events are ordered by ``created_at`` (stable). A
    scanner that already listed the directory can pass ``shards`` to skip a second listing.
    """
    path = journal_path(session_id, session_dir=session_dir)
    if shards is None:
        shards = shard_paths(session_id, session_dir=session_dir)
    return read_journal_files(session_id, [(None, path)] + [(shard.name, shard) for shard in shards])


def read_journal_files(session_id: str, files: Sequence[tuple[str | None, str | os.PathLike[str]]]) -> Event:
    """:func:`read_turn_journal` over files already found: ``(label, path)`` pairs, label None for the
    session's main file and the shard's file name for a shard. The caller has validated the names (a
    directory listing it made); a missing file reads as empty."""
    events: list[Event] = []
    malformed: list[Event] = []
    blobs = [(label, _read_bytes(path)) for label, path in files]
    big = sum(len(b) for _, b in blobs if b) > _GC_PAUSE_BYTES
    merged = False
    with _gc_paused() if big else contextlib.nullcontext():
        for label, data in blobs:
            if data is not None:
                _parse_lines(data, events, malformed, label)
                merged = merged or label is not None
    if merged:
        events.sort(key=_created_key)
    return {"session_id": session_id, "events": events, "malformed": malformed}


def turn_journal_files(session_dir: Path | str) -> dict[str, list[Path]]:
    """Every session's journal files (main file first, then shards), from one directory listing."""
    try:
        names = sorted(os.listdir(journal_dir(session_dir)))
    except OSError:
        return {}
    out: dict[str, list[Path]] = {}
    base = journal_dir(session_dir)
    for name in names:
        if not name.endswith(_SUFFIX):
            continue
        m = _SHARD_RE.match(name)
        sid = m.group("sid") if m else name[: -len(_SUFFIX)]
        if not _SESSION_ID_RE.match(sid) or sid.strip(".") == "" or len(sid) > MAX_SESSION_ID_LEN:
            continue
        files = out.setdefault(sid, [])
        if m:
            files.append(base / name)
        else:
            files.insert(0, base / name)
    return out


def iter_turn_journal_session_ids(session_dir: Path | str) -> list[str]:
    """Sorted ids of every journaled session (shard suffixes stripped); ``[]`` for a missing dir."""
    return sorted(turn_journal_files(session_dir))


def derive_turn_journal_states(events: Iterable[Event]) -> tuple[dict[str, Event], list[Event]]:
    """``(latest event per turn_id by created_at, terminal collisions)``.

    Ties go to the later event in the input. A collision record ``{"turn_id", "events"}`` lists
    every terminal event of a turn that has more than one, in ``created_at`` order.
    """
    states: dict[str, Event] = {}
    stamps: dict[str, float] = {}
    terminal: dict[str, list[Event]] = {}
    terminal_names = TERMINAL_EVENTS
    for event in events:
        if not isinstance(event, dict):
            continue
        turn_id = event.get("turn_id")
        if type(turn_id) is not str:
            turn_id = str(turn_id or "")
        turn_id = turn_id.strip()
        if not turn_id:
            continue
        created = event.get("created_at")
        if type(created) is not float:
            created = _created_key(event)
        name = event.get("event")
        if type(name) is str and name in terminal_names:
            terminal.setdefault(turn_id, []).append(event)
        previous = stamps.get(turn_id)
        if previous is None or created >= previous:
            states[turn_id] = event
            stamps[turn_id] = created
    collisions: list[Event] = [
        {"turn_id": tid, "events": sorted(evts, key=_created_key)}
        for tid, evts in terminal.items()
        if len(evts) > 1
    ]
    return states, collisions


def pending_turns(events: Iterable[Event]) -> list[Event]:
    """Latest event of every turn that has not reached a terminal event, oldest first.

    For a WebUI journal these are the turns still running — or, when their worker is gone,
    interrupted.
    """
    states, _ = derive_turn_journal_states(events)
    return sorted((e for e in states.values() if not is_terminal_turn_event(e)), key=_created_key)


# ---------------------------------------------------------------------------------------------
# bounding the tray's own journals


def compact_turn_journal(
    session_id: str,
    *,
    session_dir: Path | str,
    max_bytes: int,
    target_bytes: int | None = None,
    is_terminal: Callable[[Event], bool] = is_terminal_turn_event,
) -> int:
    """Shrink a journal the tray owns to about ``target_bytes`` (default half of ``max_bytes``)
    when it exceeds ``max_bytes``. Returns how many events were dropped.

    Drops whole finished turns, oldest first (by their latest event), and never an event of a
    turn that has not reached a terminal event (``is_terminal`` decides) — so the journal may
    stay above the target if unfinished turns alone fill it. Malformed lines and events without
    a turn id are dropped too. Never call this on WebUI files: they are only ever read.
    """
    path = journal_path(session_id, session_dir=session_dir)
    target = max_bytes // 2 if target_bytes is None else target_bytes
    try:
        if os.stat(path).st_size <= max_bytes:
            return 0
    except FileNotFoundError:
        return 0
    fd, _created, size = _open_locked(path)
    try:
        try:
            if size <= max_bytes:
                return 0
            chunks = []
            offset = 0
            while offset < size:
                chunk = _read_at(fd, min(1 << 20, size - offset), offset)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += len(chunk)
            data = b"".join(chunks)
            events: list[Event] = []
            _parse_lines(data, events, [], None)
            encoded = [_encode(e) for e in events]
            groups: dict[str, list[int]] = {}
            done: dict[str, bool] = {}
            last: dict[str, float] = {}
            for i, ev in enumerate(events):
                tid = str(ev.get("turn_id") or "").strip()
                if not tid:
                    continue
                groups.setdefault(tid, []).append(i)
                created = _created_key(ev)
                if tid not in last or created >= last[tid]:
                    last[tid] = created
                    done[tid] = bool(is_terminal(ev))
            keep = {i for idxs in groups.values() for i in idxs}
            total = sum(len(encoded[i]) for i in keep)
            for tid in sorted((t for t in groups if done[t]), key=lambda t: last[t]):
                if total <= target:
                    break
                for i in groups[tid]:
                    keep.discard(i)
                    total -= len(encoded[i])
            out = b"".join(encoded[i] for i in range(len(events)) if i in keep)
            if os.name == "nt":  # pragma: no cover - an open file cannot be replaced there
                os.ftruncate(fd, 0)
                write_all(fd, out)
                os.fsync(fd)
            else:
                atomic_write_bytes(path, out)  # appenders waiting on the old inode re-open
                sweep_stale_temps(path)  # temp files of compactions killed mid-write
            return len(events) - len(keep)
        finally:
            _unlock(fd)
    finally:
        os.close(fd)
