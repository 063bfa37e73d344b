"""Group commit for contended marker writes: several writers' changes in one durable write.

Every marker write is a locked read → change → temp file + fsync → exchange, and the fsync inside the
lock bounds how many writes per second any number of processes can make: measured, the barest such
writer reaches 0.5–0.8x one process's durable-write rate (``tests/bench/bench_markers.py``, its "bare
locked" line), and the acceptance asks 0.8x. So a writer
that finds the lock busy leaves its change here as a *request* and waits for the lock; whoever holds
the lock next applies every live request together with its own change in one write and leaves each
waiter its result. A waiter that gets the lock and finds no result withdraws its request and writes
its own change as before. What a change *means* stays in :mod:`core.markers` (``apply_change``); this
module only moves requests and results, and decides after a kill whether a batch went in.

Exactly once across kills, with no mark in Hermes' file:

* A request becomes visible complete and locked (written, ``flock``-ed, then renamed into place); its
  waiter holds that lock until it has its result. A request whose lock can be taken has no waiter any
  more: it is dropped, never applied.
* Waiters add requests at any time; everything else in the queue directory (records, results,
  removals) happens only under the marker lock, so any *batch record* found there belongs to a holder
  that is gone (killed, or failed and released the lock). Before installing,
  a holder writes a record naming its temp file's inode and each request's result; the temp file then
  decides: still that inode at its name → the exchange never ran (the requests stay pending);
  otherwise the exchange ran → the batch went in, and the record's results are handed out.
* Batch temp files end in ``.btmp``: the outside-the-lock sweep of dead writers' ``.tmp`` files never
  sees them, and :func:`sweep_batch_temps` removes one only when its writer is dead and no record
  names it.
* A record that cannot be settled (a result path taken by a directory, a full disk) stops nobody: the
  holder writes alone, and a waiter reads the records without changing them (:func:`result_in_records`)
  — answered if one names it and went in, else it writes its own change. Only a record that cannot be
  read at all leaves its waiter unsure; that write fails saying its change may already be in.
* Queue files are not fsynced: after a power cut every waiter is gone, so are their requests.

POSIX only (``flock`` on the request files); on Windows every writer writes its own change.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hermes_tray_core import fsutil
from hermes_tray_core.atomic_exchange import Sig
from hermes_tray_core.lazy_log import get_logger

__all__ = ["AVAILABLE", "MAX_BATCH", "Batch", "Request", "batch_temp_id", "batch_temp_path", "collect", "queue_dir",
           "recover", "result_in_records", "submit", "sweep_batch_temps"]

logger = get_logger(__name__)

AVAILABLE = os.name != "nt"
if AVAILABLE:
    import fcntl

MAX_BATCH = 32  # requests per write: the file holds 32 entries, more changes than that in one write is a storm
_MAX_QUEUE_FILE = 1 << 20  # a request holds one entry (<= 64,000 chars, escaped); anything bigger is junk
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_REQ_RE = re.compile(r"^(\d{1,20})\.(\d{1,10})\.([0-9a-f]{8})\.req$")
_BATCH_RE = re.compile(r"^(\d{1,10})\.([0-9a-f]{8})\.batch$")
_DONE = ".done"
# A result file's first byte: the batch is on disk, or its holder is still flushing (and holds the file's lock).
_DURABLE, _PENDING = b"1", b"0"
# queue dir -> (inode, mtime_ns) when this process last found it empty: an unchanged directory is still empty.
_EMPTY: dict[str, tuple[int, int]] = {}
_CHECKED: set[str] = set()  # queue dirs this process found to be real directories (not symlinks)

Change = dict[str, Any]  # a JSON-able change, read by core.markers.apply_change


def queue_dir(marker_path: str) -> str:
    directory, name = os.path.split(marker_path)
    return os.path.join(directory, f".{name}.queue")


def batch_temp_path(marker_path: str, batch_id: str) -> str:
    """The temp file of batch ``<pid>.<nonce>``, beside the marker file (an exchange needs one directory)."""
    directory, name = os.path.split(marker_path)
    return os.path.join(directory, f".{name}.{batch_id}.btmp")


def batch_temp_id(marker_path: str, name: str) -> tuple[int, str] | None:
    """(writer pid, batch id) of a batch temp file's ``name`` in the marker's directory, else None."""
    prefix = f".{os.path.basename(marker_path)}."
    if not (name.startswith(prefix) and name.endswith(".btmp")):
        return None
    batch_id = name[len(prefix):-len(".btmp")]
    pid, _, nonce = batch_id.partition(".")
    if not pid.isdigit() or not re.fullmatch(r"[0-9a-f]{8}", nonce):
        return None
    return int(pid), batch_id


def _new_batch_id() -> str:
    return f"{os.getpid()}.{os.urandom(4).hex()}"


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)  # a FIFO: ENXIO


def _write_all(fd: int, data: bytes) -> None:
    if os.write(fd, data) != len(data):  # a short write (a full disk): never leave half a record or result
        raise OSError(errno.ENOSPC, "short write in the marker queue")


def _write_small(path: str, data: bytes, *, exclusive: bool) -> None:
    fd = os.open(path, _WRITE_FLAGS | (os.O_EXCL if exclusive else os.O_TRUNC), fsutil.FILE_MODE)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _read_small(path: str, fd: int | None = None) -> bytes | None:
    try:
        own = fd is None
        if own:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_QUEUE_FILE:
                return None
            return os.pread(fd, st.st_size + 1, 0)
        finally:
            if own:
                os.close(fd)
    except FileNotFoundError:
        return None


def _loads(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # junk, or nested deep enough to exhaust the parser
        return None


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# ── the waiter's side ─────────────────────────────────────────────────────


class Request:
    """A waiter's pending change: its file stays locked by ``fd`` until :meth:`finish`."""

    __slots__ = ("_done_fd", "durable", "fd", "name", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path, self.fd, self.name = path, fd, os.path.basename(path)
        self.durable = False
        self._done_fd: int | None = None  # the result file, kept open to wait for the holder's fsync

    def result(self, *, final: bool = False) -> tuple[bool, Any]:
        """(True, result) when a holder applied the change, else (False, None). Under the marker lock.

        A result found is final (one is written only after its batch went in); then, before returning it,
        :meth:`wait_durable`. Not finding one is only final after :func:`recover`: then ``final=True``, and
        a result file that is there but cannot be read raises — the change may be in, so applying it again
        could make it twice; say so instead.
        """
        done = self.path + _DONE
        try:
            try:
                fd = os.open(done, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
            except FileNotFoundError:
                return False, None
            try:
                data = _read_small(done, fd)
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            if not final:
                return False, None
            raise OSError(exc.errno or errno.EIO, f"cannot read the result of a queued marker change: {exc}",
                          done) from None
        doc = _loads(data[1:]) if data is not None and data[:1] in (_DURABLE, _PENDING) else None
        if isinstance(doc, dict) and "result" in doc:
            self.durable = data[:1] == _DURABLE  # type: ignore[index]
            if self.durable:
                os.close(fd)
            else:
                self._done_fd = fd
            return True, doc["result"]
        os.close(fd)
        if final:
            raise OSError(errno.EIO, "the result of a queued marker change is unreadable", done)
        return False, None

    def wait_durable(self, directory: str) -> None:
        """Return once the answered change is on disk: the holder's directory fsync (wait for its lock on
        our result file), or, if it failed or the holder died first, our own."""
        fd, self._done_fd = self._done_fd, None
        if self.durable:
            return
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)  # the holder keeps it locked until its fsync is done
                if os.pread(fd, 1, 0) == _DURABLE:
                    return
        finally:
            if fd is not None:
                os.close(fd)
        fsutil.fsync_dir(directory)  # type: ignore[arg-type]

    def finish(self) -> None:
        """Remove the request (and its result) and let go of it. Withdrawing (no result) must happen under
        the marker lock, before writing the change oneself: a holder must never take a request its waiter
        writes too. With a result it need not: the request goes first, and a result without its request is
        litter to the next holder, never a pending change. A second call does nothing."""
        if self.fd < 0:
            return
        try:  # the request first: a result without its request is never mistaken for a pending change
            _unlink(self.path)
            _unlink(self.path + _DONE)
        except OSError:
            pass  # a request whose lock is free is dropped by the next holder
        finally:
            os.close(self.fd)
            self.fd = -1
            if self._done_fd is not None:
                os.close(self._done_fd)
                self._done_fd = None


def submit(marker_path: str, change: Change) -> Request | None:
    """Leave ``change`` for the lock's next holder; None if it cannot be queued (then write it yourself)."""
    if not AVAILABLE:
        return None
    qdir = queue_dir(marker_path)
    data = json.dumps(change, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    # CLOCK_MONOTONIC is one clock for every process (no NTP steps): names sort in submission order.
    name = f"{time.monotonic_ns():020d}.{os.getpid()}.{os.urandom(4).hex()}.req"
    tmp = os.path.join(qdir, f"{name}.part")
    try:
        if qdir not in _CHECKED:
            with contextlib.suppress(FileNotFoundError):
                if not stat.S_ISDIR(os.lstat(qdir).st_mode):
                    raise fsutil.UnsafePathError(errno.ENOTDIR, "not a directory (a symlink is never followed)", qdir)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, fsutil.FILE_MODE)
        except FileNotFoundError:
            fsutil.ensure_private_dir(qdir)  # type: ignore[arg-type]
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, fsutil.FILE_MODE)
    except OSError as exc:
        logger.debug("cannot queue a marker change in %s (%s); writing it directly", qdir, exc)
        return None
    try:
        _write_all(fd, data)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: nobody else can hold it
        path = os.path.join(qdir, name)
        os.rename(tmp, path)
        if len(_CHECKED) > 64:
            _CHECKED.clear()
        _CHECKED.add(qdir)
    except OSError as exc:
        _unlink(tmp)
        os.close(fd)
        logger.debug("cannot queue a marker change in %s (%s); writing it directly", qdir, exc)
        return None
    return Request(path, fd)


# ── the holder's side (all under the marker lock) ──────────────────────────


def _names(qdir: str) -> list[str] | None:
    try:
        return os.listdir(qdir)
    except FileNotFoundError:
        return None


def recover(marker_path: str, names: list[str] | None = None) -> list[str] | None:
    """Settle the batch records of holders that are gone (see the module doc); the queue's names after it.

    Under the marker lock only. A record whose temp file still holds its inode never went in: it is
    removed with its temp file, and its requests stay pending. Any other record went in: its results
    are handed out first.
    """
    qdir = queue_dir(marker_path)
    if names is None:
        names = _names(qdir)
        if names is None:
            return None
    records = [n for n in names if n.endswith(".batch")]
    if not records:
        return names
    for rec in records:
        path = os.path.join(qdir, rec)
        doc = _record(path)
        if doc is None:
            # Not one of ours, or torn by a power cut (queue files are not fsynced): its waiters are gone
            # too, so its requests will be dropped as dead. Its temp file, if any, is swept as a dead
            # writer's once this record is gone.
            logger.warning("removed an unreadable marker batch record %s", path)
            _unlink(path)
            continue
        tmp, went_in, foreign = _went_in(marker_path, rec, doc)
        if went_in:
            fsutil.fsync_dir(os.path.dirname(marker_path))  # type: ignore[arg-type]  # its holder may not have
            _hand_out(qdir, doc["results"], durable=True)
            logger.info("a marker writer died after its batch went in; handed out %d result(s)", len(doc["results"]))
        else:
            logger.info("a marker writer died before its batch went in; %d request(s) stay queued",
                        len(doc["results"]))
        if foreign:  # kept under a second name first: then the record, then the temp name, can go
            kept = fsutil.set_aside(Path(tmp), "unmerged", link=True)
            if kept is None:
                logger.error("a marker writer died while putting Hermes' version back; that version could not "
                             "be kept and stays at %s with its batch record", tmp)
                continue
            logger.warning("a marker writer died while putting Hermes' version back; that version is kept as %s",
                           kept.name)
        # The record before the temp file: a record left without its temp file would read "went in".
        _unlink(path)
        _unlink(tmp)
    return _names(qdir)


def _record(path: str) -> dict[str, Any] | None:
    """A batch record's content, or None when it is not one (junk, torn, not ours). Raises OSError when
    it cannot be read at all."""
    try:
        data = _read_small(path)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        data = None  # a symlink (never followed): never one of ours
    doc = _loads(data)
    if _BATCH_RE.match(os.path.basename(path)) is None or not isinstance(doc, dict) \
            or not isinstance(doc.get("ino"), int) or not isinstance(doc.get("results"), dict):
        return None
    return doc


def _went_in(marker_path: str, rec: str, doc: dict[str, Any]) -> tuple[str, bool, bool]:
    """(the record's temp file, whether its batch went in, whether that file is a foreign version to keep).

    What is at the temp file's name decides: our file still there → the exchange never ran, or ours was
    put back; nothing, or the file the holder read → the exchange ran cleanly (the read version was
    handed back); any other file → the holder died inside a put-back, after a Hermes rename caught its
    exchange: the batch is in only if ours still stands at the marker path (as the live holder decides),
    and that other file may be Hermes' newest version, so it is kept, never removed."""
    m = _BATCH_RE.match(rec)
    tmp = batch_temp_path(marker_path, f"{m.group(1)}.{m.group(2)}")  # type: ignore[union-attr]
    here = fsutil.file_signature(tmp)  # type: ignore[arg-type]
    if here is None:
        return tmp, True, False
    ours = _sig(doc.get("sig"))
    if here[0] == doc["ino"] and (ours is None or here == ours):
        return tmp, False, False
    read = _sig(doc.get("read"))
    if read is None or here == read:  # a record without "read" comes from an older version: as it decided
        return tmp, True, False
    at_marker = fsutil.file_signature(marker_path)  # type: ignore[arg-type]
    return tmp, at_marker is not None and at_marker == ours, True


def _sig(value: Any) -> Sig | None:
    if type(value) is list and len(value) == 3 and all(type(v) is int for v in value):
        return (value[0], value[1], value[2])
    return None


def result_in_records(marker_path: str, request: str, why: BaseException) -> tuple[bool, Any]:
    """When :func:`recover` failed (``why``): read, without changing anything, whether a dead holder's
    record names ``request`` and went in. (True, result), or (False, None) when no record holds it, so
    its waiter may write it itself. Raises OSError when a record cannot be read: the change may then be
    in already, and writing it again could make it twice."""
    qdir = queue_dir(marker_path)
    names = _names(qdir) or []
    for rec in (n for n in names if n.endswith(".batch")):
        try:
            doc = _record(os.path.join(qdir, rec))
            if doc is not None and request in doc["results"] and _went_in(marker_path, rec, doc)[1]:
                return True, doc["results"][request]
        except OSError as exc:
            raise OSError(exc.errno or errno.EIO, f"a dead writer's batch record could not be settled ({why}) "
                          f"nor read ({exc.strerror or exc}); this change may already be in the marker file, "
                          "so it was not written again: look before repeating it", os.path.join(qdir, rec)) from None
    return False, None


def _hand_out(qdir: str, results: dict[str, Any], *, durable: bool) -> list[int]:
    """Leave each waiter its result. ``durable``: the batch is already on disk. Otherwise each result file
    is returned open and locked, to be marked durable by :meth:`Batch.made_durable` once the holder's
    directory fsync is done: its waiter waits for that lock rather than flush the disk again itself."""
    held: list[int] = []
    try:
        for req, value in results.items():
            if not isinstance(req, str) or not _REQ_RE.match(req):
                continue
            # Written in place: one short write(), read only under the marker lock. A file a killed holder
            # left empty reads as "no result yet", and its record (still there) is settled and rewrites it.
            fd = os.open(os.path.join(qdir, req + _DONE), _WRITE_FLAGS | os.O_TRUNC, fsutil.FILE_MODE)
            try:
                if not durable:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file only its waiter opens, after us
                _write_all(fd, (_DURABLE if durable else _PENDING) + json.dumps({"result": value}).encode())
            except BaseException:
                os.close(fd)
                raise
            if durable:
                os.close(fd)
            else:
                held.append(fd)
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return held


class Batch:
    """The requests one holder applies with its own change, and how it records and hands them out."""

    def __init__(self, marker_path: str, requests: list[tuple[str, Change]]) -> None:
        self._marker = marker_path
        self._qdir = queue_dir(marker_path)
        self.id = _new_batch_id()
        self.requests = requests
        self.results: dict[str, Any] = {}  # request name -> result, for the requests the last apply took
        self._record: str | None = None
        self._held: list[int] = []  # result files handed out, locked until made_durable

    def new_temp_path(self) -> str:
        """A fresh batch id (record and temp file names) for each write attempt; its temp file's path."""
        self.id = _new_batch_id()
        return batch_temp_path(self._marker, self.id)

    def apply(self, entries: Any, apply_change: Callable[[Any, Change], tuple[Any, Any]]) -> tuple[Any, bool]:
        """Apply every request on top of ``entries``; (the entries after them, whether any changed).

        A request that fails to apply is left out (and stays queued): its waiter applies it itself and
        sees the error there. It never breaks this write."""
        self.results = {}
        changed = False
        for name, change in self.requests:
            try:
                new, result = apply_change(entries, change)
            except Exception:
                logger.warning("a queued marker change could not be applied; its writer will apply it", exc_info=True)
                continue
            if new is not None:
                entries, changed = new, True
            self.results[name] = result
        return entries, changed

    def before_install(self, ours: Sig, read: Sig) -> None:
        """Write the batch record (under the lock, right before the exchange): our temp file's signature,
        the signature of the file read, and every result. Raises OSError if it cannot."""
        name = f"{self.id}.batch"
        # In place, not renamed in: a record torn by a kill was torn before the exchange (which comes after
        # it), so "unreadable" and "never went in" agree (see recover).
        self._record = os.path.join(self._qdir, name)
        doc = {"ino": ours[0], "sig": list(ours), "read": list(read), "results": self.results}
        _write_small(self._record, json.dumps(doc).encode(), exclusive=True)

    def not_installed(self) -> bool:
        """The exchange did not run (or was put back): drop the record. False if it could not be removed —
        then the temp file must stay, so that whoever finds the record sees the batch never went in."""
        if self._record is None:
            return True
        try:
            _unlink(self._record)
        except OSError:
            return False
        self._record = None
        return True

    def hand_out(self, *, durable: bool = False) -> None:
        """After the batch went in (or changed nothing, ``durable``): leave each waiter its result, then drop
        the record. A failure here leaves the record for :func:`recover`; it never fails the holder's own
        write. Unless ``durable``, :meth:`made_durable` must follow (it also lets go of the result files)."""
        try:
            self._held.extend(_hand_out(self._qdir, self.results, durable=durable))
            if self._record is not None:
                _unlink(self._record)
                self._record = None
        except OSError as exc:
            logger.warning("could not hand out queued marker results in %s (%s); the next writer will", self._qdir, exc)

    def made_durable(self, ok: bool) -> None:
        """The holder's directory fsync after the batch returned (``ok``) or failed: tell the waiters. After a
        failure they flush themselves, and see the error there."""
        held, self._held = self._held, []
        for fd in held:
            try:
                if ok:
                    os.pwrite(fd, _DURABLE, 0)
            except OSError:
                pass
            finally:
                os.close(fd)


def _live_request(path: str, *, answered: bool = False) -> Change | None:
    """The change of a request whose waiter is still waiting; a request nobody waits for is removed.

    ``answered``: it has its result already; only whether its waiter is gone matters (then the request
    and its result are litter). Returns None for those."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            if answered:
                return None  # its waiter picks it up
            doc = _loads(_read_small(path, fd))
            if isinstance(doc, dict):
                return doc
            logger.warning("removed an unreadable queued marker change %s", path)
        # Its waiter is gone (killed while waiting, or after its answer): nothing more will happen to it.
        _unlink(path)
        _unlink(path + _DONE)
        return None
    finally:
        os.close(fd)


def collect(marker_path: str, *, limit: int = MAX_BATCH) -> Batch | None:
    """The live requests to apply with the holder's own change (after :func:`recover`), or None.

    Under the marker lock only. An unchanged directory this process last found empty is not listed
    again (one ``stat``): the uncontended write pays nothing more.
    """
    if not AVAILABLE:
        return None
    qdir = queue_dir(marker_path)
    try:
        st = os.lstat(qdir)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        logger.warning("ignoring %s: not a directory (a symlink is never followed)", qdir)
        return None
    sig = (st.st_ino, st.st_mtime_ns)
    if _EMPTY.get(qdir) == sig:
        return None
    try:
        names = recover(marker_path, _names(qdir))
    except Exception as exc:  # its requests stay queued, and are not taken: this write goes in on its own
        logger.warning("could not settle a dead marker writer's batch in %s (%s)", qdir, exc)
        return None
    if not names:
        if names is not None:
            if len(_EMPTY) > 64:
                _EMPTY.clear()
            with contextlib.suppress(OSError):
                st = os.lstat(qdir)
                _EMPTY[qdir] = (st.st_ino, st.st_mtime_ns)
        return None
    present = set(names)
    requests: list[tuple[str, Change]] = []
    for name in sorted(n for n in names if _REQ_RE.match(n)):
        change = _live_request(os.path.join(qdir, name), answered=name + _DONE in present)
        if change is not None:
            requests.append((name, change))
            if len(requests) >= limit:
                break
    _sweep_leftovers(qdir, names)
    return Batch(marker_path, requests) if requests else None


def _sweep_leftovers(qdir: str, names: Iterable[str]) -> None:
    """Litter of killed writers: half-written requests (``.part``, never renamed into place) and results
    whose request is gone. A request's ``.part`` is locked by its waiter from just after it is created."""
    present = set(names)
    for name in present:
        path = os.path.join(qdir, name)
        if name.endswith(_DONE):
            if name[: -len(_DONE)] not in present:
                _unlink(path)
            continue
        if not name.endswith(".part"):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            continue  # a request being submitted right now
        finally:
            os.close(fd)
        # Not locked: a killed waiter's (only requests are written as .part, then renamed in). A waiter
        # between its open and its lock loses its file here and simply writes its change itself.
        _unlink(path)


def sweep_batch_temps(marker_path: str, names: Iterable[str]) -> int:
    """Remove the batch temp files among ``names`` (the marker directory's) whose writer is gone and that
    no batch record names: a record's temp file is what :func:`recover` judges the record by."""
    directory, qdir, removed = os.path.dirname(marker_path), queue_dir(marker_path), 0
    for name in names:
        parsed = batch_temp_id(marker_path, name)
        if parsed is None:
            continue
        pid, batch_id = parsed
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if os.path.lexists(os.path.join(qdir, f"{batch_id}.batch")) or not fsutil.writer_gone(pid, st):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed += 1
    return removed
