"""Hermes' interrupted-turn marker file (``<home>/desktop/interrupted_turns.json``), written safely across
processes (:class:`MarkerStore`); Hermes' own never-raising calls are :mod:`core.markers.turn_marker`.

* Every read-modify-write holds a blocking OS lock on ``interrupted_turns.json.lock``, so our own writers
  lose and resurrect nothing (Hermes' in-process lock loses a third or more of the markers with four backends
  on one home).
* Against Hermes, which does not lock, a write goes in by atomic exchange (:mod:`core.stores.exchange`): the
  file is checked (inode, size, mtime) and Hermes' in-flight temp files waited out right before it, and the
  file it displaced is handed back. If that is not the one we read, Hermes' version goes straight back (ours
  was visible for two syscalls) and the write is redone on it; a Hermes write that copied our brief version
  is put right for a settle window (:class:`core.markers.settle.Leaks`), as is a stale Hermes write that
  brings a skipped entry back. Without an exchange, compare-and-replace
  (:func:`core.markers.turn_marker.exchange_support` says so).
* An empty map is written as ``{}``, never unlinked; a killed writer's temp file is swept by the next; a
  corrupt file is set aside, never overwritten; a symlinked marker or lock path is refused; prompt text is
  never logged.

Writes are rare (a user's decision), so contended throughput is no goal (``tests/bench/bench_markers.py``
prints it). Public methods check the session key where it enters and raise :class:`MarkerStoreError` (an
``OSError``) naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from hermes_tray_core.errors import TrayError
from hermes_tray_core.hermes.locks import MARKER_LOCK, hermes_lock
from hermes_tray_core.keys import SessionKey
from hermes_tray_core.keys import session_key as checked_key
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.markers import file as marker_file
from hermes_tray_core.markers.entries import build_entry, normalize_marker, with_record
from hermes_tray_core.markers.file import Entries
from hermes_tray_core.process.identity import ProcessIdentity
from hermes_tray_core.stores import exchange as atomic_exchange
from hermes_tray_core.stores import fsutil

logger = get_logger(__name__)

# Without an exchange: rounds of re-read and re-apply when Hermes changed the file under us, then the latest
# merge unchecked, which is what loses Hermes' entries: at ~100 Hermes writes/s, 5 rounds lost 19 per 500
# skips, 50 none.
FOREIGN_RETRIES = 50

# With an exchange: attempts before an unverified write (merged by content); only a writer renaming without
# pause could force it.
VERIFIED_RETRIES = 200


class MarkerStoreError(TrayError, OSError):
    """The marker file could not be read or written: ``cause: file`` in words (errno in ``errno``)."""

    def __str__(self) -> str:
        return f"{self.strerror}: {self.filename}" if self.filename else str(self.strerror or "")


class MarkerCorruptError(MarkerStoreError):
    """Not a JSON object: reads refuse it, the next write sets it aside."""

    reason = ""  # why, in words: "it is not valid JSON"


class MarkerTooLargeError(MarkerStoreError):
    """Over the size limit, not read: reads refuse it, the next write sets it aside."""


class _ForeignChange(Exception):
    """The file changed since we read it."""


def _without(entries: Entries, key: str) -> Entries:
    return {k: v for k, v in entries.items() if k != key}


Mutate = Callable[[Entries], "tuple[Entries | None, Any]"]
"""A write's meaning: the entries read → (the new entries, or None when nothing changes; the caller's result)."""


# Directory -> False once an exchange there answered "unsupported" (then compare-and-replace is used).
_EXCHANGE: dict[str, bool] = {}
# Exchange rounds per write when a non-locking writer keeps renaming in between.
MERGE_ROUNDS = 8


class MarkerStore:
    """The marker file of one Hermes home."""

    def __init__(self, home: Path | str) -> None:
        self.home = Path(home)
        self.path = marker_file.marker_path(self.home)
        self._p = os.fspath(self.path)
        self._dir = os.fspath(self.path.parent)
        self._lock = self._p + ".lock"

    # reads (no lock: writers replace atomically, so a reader sees a whole old or a whole new file)

    def list(self) -> Entries:
        """Every entry as stored (raw dicts, variant fields kept); {} when there is no file."""
        with self._errors("read"):
            data, _sig = marker_file.read_file(self._p)
            if data is None:
                return {}
            try:
                return marker_file.decode(data)
            except marker_file.TooLarge as exc:
                raise MarkerTooLargeError(errno.EFBIG, f"the file is {exc}", str(self.path)) from None
            except marker_file.Corrupt as exc:
                err = MarkerCorruptError(errno.EINVAL, f"the file is corrupt: {exc}", str(self.path))
                err.reason = str(exc)
                raise err from None

    def read(self, session_key: str) -> dict[str, Any] | None:
        """Hermes' ``read_turn_marker`` shape for ``session_key``, or None."""
        return normalize_marker(self.list().get(checked_key(session_key)))

    # writes

    def record(self, session_key: str, prompt: str, *, attempts: int = 0, auto_continue: bool = True,
               notification_category: str | None = None, writer: ProcessIdentity | None = None) -> dict[str, Any]:
        """Write the marker for a turn about to run; the entry as stored. ``writer``: the process it is
        recorded for (a gateway the tray started), whose liveness it then follows."""
        key = checked_key(session_key)
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt must be a non-empty string")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            raise ValueError(f"attempts must be an int >= 0, not {attempts!r}")
        if writer is not None and (isinstance(writer.pid, bool) or not isinstance(writer.pid, int) or writer.pid <= 0):
            raise ValueError(f"writer pid must be a positive int, not {writer.pid!r}")
        return self._record(key, build_entry(prompt, attempts=attempts, auto_continue=auto_continue,
                                             notification_category=notification_category, writer=writer))

    def clear(self, session_key: str) -> bool:
        """Remove the marker of a concluded turn. True if there was one."""
        return self._clear(checked_key(session_key))

    def remove_if_unchanged(self, session_key: str, expected: dict[str, Any], *, settle: bool = True) -> bool:
        """Remove ``session_key`` only if its raw entry still equals ``expected``: the user decided about what
        they were shown, never about something newer. ``settle``: a stale Hermes write that brings it back
        within the settle window is undone (:mod:`core.markers.settle`)."""
        key = checked_key(session_key)
        if not isinstance(expected, dict):
            raise TypeError("expected must be the entry dict list() returned")
        return self._swap(key, expected, marker_file.ABSENT, settle, "remove")

    def replace_if_unchanged(self, session_key: str, expected: dict[str, Any], replacement: dict[str, Any], *,
                             settle: bool = True) -> bool:
        """Store ``replacement`` only if the entry still equals ``expected``: the tray's own continuation
        takes the marker over this way, so it never continues a turn skipped or changed after it was
        checked."""
        key = checked_key(session_key)
        if not isinstance(expected, dict) or not isinstance(replacement, dict):
            raise TypeError("expected and replacement must be entry dicts")
        entry = dict(replacement)
        done = self._swap(key, expected, entry, settle, "replace")
        if done:
            logger.debug("turn marker for session %s replaced (writer pid %s)", session_key, entry.get("writer_pid"))
        return done

    def _swap(self, key: SessionKey, expected: dict[str, Any], new: Any, settle: bool, what: str) -> bool:
        if not os.path.lexists(self._p):
            return False
        now = time.time()

        def swap(entries: Entries) -> tuple[Entries | None, bool]:
            if entries.get(key) != expected:
                return None, False
            return (_without(entries, key) if new is marker_file.ABSENT else with_record(entries, key, new, now)), True

        done = bool(self._modify(swap, what))
        if done and settle:
            from hermes_tray_core.markers import settle as marker_settle

            marker_settle.guard(self, key, expected, new)
        return done

    # internals (no validation: the Hermes-compatible calls accept any non-empty key, as Hermes does)

    def _record(self, key: str, entry: dict[str, Any]) -> dict[str, Any]:
        logger.debug("turn marker recorded for session %s by writer pid %s", key, entry["writer_pid"])
        self._modify(lambda entries: (with_record(entries, key, entry, entry["started_at"]), None), "record")
        return dict(entry)

    def _clear(self, key: str) -> bool:
        if not os.path.lexists(self._p):
            return False  # nothing to clear: do not create desktop/ or a lock file for it

        return bool(self._modify(lambda entries: (_without(entries, key), True) if key in entries else (None, False),
                                 "clear"))

    def _modify(self, mutate: Mutate, what: str) -> Any:
        """Locked read → ``mutate`` → durable write, re-applied if Hermes got in between; ``mutate``'s result
        for what stands. The directory fsync and the sweep of dead writers' temp files come after the lock."""
        atomic_exchange.mechanism()  # load the OS primitive (ctypes, once per process) before the lock, not in it
        with self._errors(what):
            # fsutil.locked makes desktop/ on a home's first write; Hermes' own lock is taken where it has one
            with fsutil.locked(self._lock), hermes_lock(self.path.parent / MARKER_LOCK, create=False):
                wrote, result = self._locked_update(mutate, what)
            if wrote:
                fsutil.fsync_dir(self._dir)
            swept = fsutil.sweep_stale_temps(self.path)  # psutil is asked only of another process's temp file
            if swept:
                logger.info("removed %d temp file(s) of dead marker writers in %s", swept, self.path.parent)
            return result

    def _locked_update(self, mutate: Mutate, what: str) -> tuple[bool, Any]:
        """(needs a directory fsync, ``mutate``'s result); without an exchange the last try is unchecked."""
        retries = VERIFIED_RETRIES if _EXCHANGE.get(self._dir, True) else FOREIGN_RETRIES
        for attempt in range(retries + 1):
            check = attempt < retries
            try:
                read, entries, sig = self._load_for_write(check)
                new, result = mutate(entries)
                if new is None:
                    return False, result
                return True, self._store(new, read, sig if check else False, mutate, result)
            except _ForeignChange:
                logger.info("turn-marker file %s changed under a %s by another writer; re-applying", self.path, what)
        raise AssertionError("unreachable: the last attempt does not check")  # pragma: no cover

    def _load_for_write(self, check: bool) -> tuple[bytes | None, Entries, tuple[int, int, int] | None]:
        data, sig = marker_file.read_file(self._p)
        if data is None:
            return None, {}, None
        try:
            return data, marker_file.decode(data), sig
        except marker_file.Corrupt as exc:
            if check and fsutil.file_signature(self._p) != sig:
                raise _ForeignChange() from None  # replaced since we read it: judge the new one instead
            large = isinstance(exc, marker_file.TooLarge)
            what = str(exc) if large else f"corrupt ({exc})"
            dest = fsutil.set_aside(self.path, "too-large" if large else "corrupt")
            if dest is None:
                raise MarkerStoreError(errno.EIO, f"the file is {what} and could not be moved aside",
                                       str(self.path)) from None
            logger.warning("turn-marker file %s was %s; kept as %s, starting fresh", self.path, what, dest.name)
            return None, {}, None

    def _store(self, entries: Entries, read: bytes | None, sig: atomic_exchange.Sig | None | Literal[False],
               mutate: Mutate, result: Any) -> Any:
        """Put ``entries`` in place of the file read (``sig`` False: no foreign-change check); ``mutate``'s
        result for what stands. ``{}`` rather than an unlink: an absent file would let Hermes create it from a
        stale copy without us seeing the displaced one. A Hermes version that came back is merged
        (:meth:`_merge_displaced`)."""
        data = marker_file.encode(entries)
        tmp = fsutil.write_temp(self._p, data)
        ours: atomic_exchange.Sig | None = None  # our temp file's signature, once the exchange may run
        settled = False  # the exchange (if it ran) finished: what is left at tmp is older than what stands
        progress: atomic_exchange.Progress | None = None  # a verified exchange's steps, kept across an exception
        try:
            marker_file.wait_for_hermes_writes(self._dir)
            if sig is not False and fsutil.file_signature(self._p) != sig:
                raise _ForeignChange()
            if read is None:
                try:
                    self._publish_new(tmp)
                    return result
                except _ForeignChange:
                    if sig is not False:
                        raise
                    read = b""  # the last attempt: merge into whatever a writer created meanwhile
            if not _EXCHANGE.get(self._dir, True):
                os.replace(tmp, self._p)
                return result
            ours = fsutil.file_signature(tmp)
            try:
                if sig is not False and sig is not None and ours is not None:
                    progress = atomic_exchange.Progress(tmp, ours)
                    tmp, was_read = atomic_exchange.swap_in_verified(tmp, self._p, sig, ours, progress)
                else:
                    tmp, was_read = atomic_exchange.swap_in(tmp, self._p), False
            except FileNotFoundError:
                if sig is not False:
                    raise _ForeignChange() from None  # removed since we read it: judge that instead
                self._publish_new(tmp)
            except atomic_exchange.PutBackIncomplete as exc:
                logger.warning("Hermes' version could not go back into %s (%s); it is kept beside the file "
                               "and this write starts again", self.path, exc.strerror)
                raise _ForeignChange() from None
            except atomic_exchange.ExchangeUnsupported as exc:
                _EXCHANGE[self._dir] = False
                logger.warning("no atomic exchange for %s (%s): falling back to compare-and-replace, which "
                               "can lose a concurrent Hermes write (hermes-tray doctor reports it)", self.path, exc)
                os.replace(tmp, self._p)
            else:
                if sig is not False and not was_read:
                    # A Hermes rename landed after our last check (ext4 holds one while it flushes) and went
                    # straight back: start again from it, and watch for a Hermes write that copied ours.
                    self._watch_transient(entries, mutate)
                    raise _ForeignChange()
                if not was_read:  # the last attempt (unverified): judge what came back by its content
                    result = self._merge_displaced(tmp, read, data, entries, mutate, result)
                    settled = True
        finally:
            if progress is not None:
                tmp = progress.path  # where the exchange left the file it handed back, even after an exception
            # Unsettled only if an exchange may have run and not finished (ours is None: none ran).
            done = ours is None or (progress.settled if progress is not None else settled)
            _drop_temp(self.path, tmp, None if done else (ours, sig))
        return result

    def _watch_transient(self, transient: Entries, mutate: Mutate) -> None:
        """Watch what our briefly visible ``transient`` got wrong against the version put back."""
        try:
            data, _sig = marker_file.read_file(self._p)
            theirs = marker_file.decode(data) if data is not None else {}
        except (OSError, marker_file.Corrupt):
            return
        new, _result = mutate(theirs)
        ours = set() if new is None else {k for k in new.keys() | theirs.keys()
                                          if not marker_file.same_entry(new.get(k, marker_file.ABSENT), theirs.get(k, marker_file.ABSENT))}
        from hermes_tray_core.markers.settle import Leaks  # threading and dataclasses: only after a merge

        leaks = Leaks(transient)
        leaks.note(transient, theirs, exclude=ours)
        leaks.register(self)

    def _publish_new(self, tmp: str) -> None:
        """Create the file from ``tmp`` only if it still does not exist (a hard link never replaces)."""
        try:
            os.link(tmp, self._p)
        except FileExistsError:
            raise _ForeignChange() from None  # a non-locking writer created it since we looked
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if os.path.lexists(self._p):  # no hard links on this filesystem: check, then rename
                raise _ForeignChange() from None
            os.replace(tmp, self._p)

    def _merge_displaced(self, displaced: str, read: bytes, placed: bytes, placed_entries: Entries,
                         mutate: Mutate, result: Any) -> Any:
        """The file our exchange displaced should be the one we read; while it is another version, re-apply
        ``mutate`` to *that* and exchange again. A Hermes write that copied our momentary first version's
        stale view of another entry is corrected here and for a settle window
        (:class:`~core.markers.settle.Leaks`)."""
        from hermes_tray_core.markers.settle import Leaks

        expected = read
        leaks = Leaks(placed_entries)
        for _round in range(MERGE_ROUNDS):
            got = marker_file.read_file(displaced)[0]
            if got == expected:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(displaced)
                if leaks.stale:
                    leaks.register(self)
                return result
            try:
                theirs = marker_file.decode(got) if got is not None else {}
            except marker_file.Corrupt:
                dest = fsutil.set_aside(Path(displaced), "corrupt")
                logger.warning("a writer put a corrupt %s in place; ours replaced it (theirs kept as %s)",
                               self.path, dest.name if dest else "nothing: it could not be moved")
                return result
            logger.info("turn-marker file %s was rewritten by a non-locking writer during our write; merging",
                        self.path)
            theirs = leaks.correct(theirs, in_merge=True)
            new, result = mutate(theirs)
            merged = theirs if new is None else new
            leaks.note(placed_entries, merged)
            merged_bytes = marker_file.encode(merged)
            # Ours is visible until this exchange: the merge goes in before its fsync (microseconds, not ms).
            fresh = merged_bytes != got
            candidate = fsutil.write_temp(self._p, merged_bytes, sync=False) if fresh else displaced
            if fresh:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(displaced)
            try:
                displaced = atomic_exchange.swap_in(candidate, self._p)
            except FileNotFoundError:  # the writer removed the file meanwhile: ours (merged) is the newest view
                self._publish_new(candidate)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(candidate)
                fsutil.fsync_path(self._p)
                return result
            if fresh:
                fsutil.fsync_path(self._p)
            expected, placed, placed_entries = placed, merged_bytes, merged
        logger.warning("turn-marker file %s kept changing during %d merges; left the last merge in place",
                       self.path, MERGE_ROUNDS)
        leaks.register(self)
        if _keep_unmerged(self.path, displaced) is None:
            raise OSError(errno.EIO, "a Hermes version that was not merged could not be set aside", displaced)
        return result

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except MarkerStoreError:
            raise
        except OSError as exc:
            raise MarkerStoreError(exc.errno or errno.EIO, f"cannot {what} turn markers: {exc.strerror or exc}",
                                   exc.filename or str(self.path)) from exc


def _keep_unmerged(marker: Path, path: str) -> str | None:
    """Keep a Hermes version that came out unmerged (it may be the newest): its name, or None."""
    dest = fsutil.set_aside(Path(path), "unmerged")
    if dest is None:
        logger.error("a Hermes version of %s could not be set aside; it stays at %s", marker, path)
        return None
    logger.warning("a Hermes version of %s that was not merged is kept as %s", marker, dest.name)
    return dest.name


def _drop_temp(marker: Path, path: str, unsettled: tuple[atomic_exchange.Sig | None, Any] | None) -> None:
    """Remove our temp file. ``unsettled`` (our signature, the read file's): an exchange did not finish, so
    the file there may be a newer Hermes version: only ours or the one read is removed, anything else kept."""
    if unsettled is not None:
        here = fsutil.file_signature(path)
        if here is None:
            return
        if here not in unsettled:
            _keep_unmerged(marker, path)
            return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def list_turn_markers(home: Path | str) -> Entries:
    return MarkerStore(home).list()


def remove_marker_if_unchanged(home: Path | str, session_key: str, expected: dict[str, Any], *,
                               settle: bool = True) -> bool:
    return MarkerStore(home).remove_if_unchanged(session_key, expected, settle=settle)


__all__ = ["MarkerCorruptError", "MarkerStore", "MarkerStoreError", "MarkerTooLargeError", "list_turn_markers", "remove_marker_if_unchanged"]
