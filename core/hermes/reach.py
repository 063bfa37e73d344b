"""Can a home be read at all? One look at each home, bounded in time, before anything reads inside it.

A home the user cannot enter, whose path is too long, that loops through symlinks, or that sits on a disk
or network drive that fails (EIO, ESTALE) must become that home's problem line, never an exception that
hides every other home. A home on a network drive that no longer answers is worse: every file operation
under it hangs, and nothing but a separate thread can give up on it. So :func:`look` stats every home (and
lists the profiles of a root) in one worker thread, in order, and waits at most :data:`TIMEOUT` seconds for
each; a home that overruns is reported as not answering and the others are looked at by a fresh worker.
The thread stuck on it is left to finish on its own: while it has not, later looks at that home answer
"did not answer" at once instead of starting another thread (so a dead drive costs one thread, not
one per scan). One thread per look, started with the interpreter's own ``_thread`` (``status`` does not
otherwise import :mod:`threading`; tests/bench/bench_status.py measures the cost).

Only the look is bounded: a drive that dies between the look and the reads that follow it can still hang
that scan.
"""

from __future__ import annotations

import _thread
import errno
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from hermes_tray_core.hermes.paths import PROFILE_RE
from hermes_tray_core.keys import home_path
from hermes_tray_core.stores.fsutil import os_error_text
from hermes_tray_core.vocab import StrEnum

__all__ = ["TIMEOUT", "Access", "Reach", "look", "look_one"]

#: Seconds one home may take to answer its look (a local disk answers in microseconds; a network drive
#: that has gone away never does).
TIMEOUT = 10.0


class Access(StrEnum):
    """What one look at a home found."""

    OK = "ok"  # a directory this user can enter and list
    MISSING = "missing"  # nothing at that path
    NOT_DIR = "not-a-directory"  # a file (or a path through a file)
    UNREADABLE = "unreadable"  # there, but it cannot be read (permissions, a too-long name, a disk error…)
    NO_ANSWER = "not-answering"  # the look did not come back in time: a drive that hangs


class Reach(NamedTuple):
    """One look at one path. ``problem``: a sentence about the path in the user's words ("" when OK).
    ``canonical``: its :func:`~hermes_tray_core.keys.home_path` when it answered, else the absolute path.
    ``profiles``: a look at each ``profiles/<name>/`` directory under it, when asked for."""

    path: Path
    access: Access
    problem: str
    canonical: str
    exists: bool
    profiles: tuple[Reach, ...] = ()

    @property
    def ok(self) -> bool:
        return self.access is Access.OK


def _profiles(root: Path) -> tuple[Reach, ...]:
    """A look at each ``profiles/<name>/`` directory under ``root`` (sorted by name); nothing on any error."""
    try:
        entries = sorted(os.scandir(root / "profiles"), key=lambda e: e.name)
    except (OSError, ValueError):
        return ()
    out = []
    for entry in entries:
        try:
            if PROFILE_RE.match(entry.name) and entry.is_dir():
                out.append(look_one(Path(entry.path)))
        except (OSError, ValueError):
            continue
    return tuple(out)


def look_one(path: Path, *, find_profiles: bool = False) -> Reach:
    """One unbounded look at ``path`` (the worker's job; call :func:`look` to bound it). Never raises."""
    plain = os.path.normcase(os.path.abspath(path))
    try:
        return _look_one(path, plain, find_profiles)
    except Exception:  # boundary: the worker's top (never raise from it: the caller would wait for nothing)
        return Reach(path, Access.UNREADABLE, f"{path} cannot be read", plain, True)


def _look_one(path: Path, plain: str, find_profiles: bool) -> Reach:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Reach(path, Access.MISSING, f"{path} does not exist", plain, False)
    except NotADirectoryError:
        return Reach(path, Access.NOT_DIR, f"{path} is not a directory ({os_error_text(OSError(errno.ENOTDIR, 'Not a directory'))})", plain, False)
    except (OSError, ValueError) as exc:
        gone = isinstance(exc, ValueError) or getattr(exc, "errno", None) == errno.ENAMETOOLONG
        return Reach(path, Access.UNREADABLE, f"{path} cannot be read: {os_error_text(exc)}", plain, not gone)
    if not stat.S_ISDIR(st.st_mode):
        return Reach(path, Access.NOT_DIR, f"{path} is not a directory", plain, True)
    try:
        if not os.access(path, os.R_OK | os.X_OK):
            return Reach(path, Access.UNREADABLE, f"{path} cannot be read: {os_error_text(OSError(errno.EACCES, 'Permission denied'))}", plain, True)
        return Reach(path, Access.OK, "", home_path(path), True, _profiles(path) if find_profiles else ())
    except (OSError, ValueError) as exc:
        return Reach(path, Access.UNREADABLE, f"{path} cannot be read: {os_error_text(exc)}", plain, True)


class _Batch:
    """A worker thread looking at ``paths`` in order; the caller waits for it, giving each path its own time."""

    def __init__(self, paths: Sequence[Path], find_profiles: bool) -> None:
        self.paths = list(paths)
        self.find_profiles = find_profiles
        self.results: list[Reach] = []
        self.abandoned = False
        self.done = False
        self._lock = _thread.allocate_lock()  # guards results / abandoned / done
        self._finished = _thread.allocate_lock()  # released once, by the worker, when it is done
        self._finished.acquire()

    def run(self) -> None:
        try:
            for path in self.paths:
                reach = look_one(path, find_profiles=self.find_profiles)
                with self._lock:
                    if self.abandoned:
                        return
                    self.results.append(reach)
        finally:
            with self._lock:
                self.done = True
            self._finished.release()

    def wait(self, timeout: float) -> int | None:
        """Wait until every path answered (None), or until one path took ``timeout`` seconds without the worker
        moving on: its index (the worker is then abandoned). The common case costs one wake-up: the caller
        sleeps until the worker is done and looks at the progress only when ``timeout`` passes first (so a path
        is given up on after between ``timeout`` and twice that)."""
        seen = 0
        while not self._finished.acquire(True, timeout):
            with self._lock:
                n = len(self.results)
                if n == seen:  # no path answered in a whole ``timeout``: the current one hangs
                    self.abandoned = True
                    return n
            seen = n
        self._finished.release()  # done: leave it released for anyone else who asks
        return None if len(self.results) == len(self.paths) else len(self.results)


#: str(path) -> the worker still stuck on it
_stuck: dict[str, _Batch] = {}
#: str(path) -> (time.monotonic(), a look that found it readable): a scan right after discovery (the CLI, the
#: tray's detector) reuses discovery's look instead of starting a second thread. Only "readable" is reused, and
#: only for :data:`FRESH` seconds: a home that appears or breaks is seen by the very next look.
_readable: dict[str, tuple[float, Reach]] = {}
FRESH = 1.0


def look(paths: Sequence[Path], *, find_profiles: bool = False, timeout: float = TIMEOUT) -> list[Reach]:
    """A :class:`Reach` for each of ``paths`` (same order), each look bounded by ``timeout`` seconds."""
    found: dict[int, Reach] = {}
    todo: list[int] = []
    now = time.monotonic()
    for i, path in enumerate(paths):
        key = str(path)
        stuck = _stuck.get(key)
        recent = None if find_profiles else _readable.get(key)
        if stuck is not None and not stuck.done:
            found[i] = _no_answer(path, timeout)
        elif recent is not None and now - recent[0] < FRESH:
            found[i] = recent[1]
        else:
            _stuck.pop(key, None)
            todo.append(i)
    while todo:
        batch = _Batch([paths[i] for i in todo], find_profiles)
        try:
            _thread.start_new_thread(batch.run, ())
        except RuntimeError:  # no thread to be had: look without a bound rather than not at all
            batch.run()
        overran = batch.wait(timeout)
        if len(_readable) > 1024:
            _readable.clear()
        for j, reach in enumerate(batch.results):
            found[todo[j]] = reach
            for seen in (reach, *reach.profiles):
                if seen.ok:
                    _readable[str(seen.path)] = (time.monotonic(), seen)
        if overran is None:
            break
        stuck_at = todo[overran]
        _stuck[str(paths[stuck_at])] = batch
        found[stuck_at] = _no_answer(paths[stuck_at], timeout)
        todo = todo[overran + 1:]
    return [found[i] for i in range(len(paths))]


def _no_answer(path: Path, timeout: float) -> Reach:
    """The same words at every look while it hangs (the tray's problem list does not flicker)."""
    plain = os.path.normcase(os.path.abspath(path))
    return Reach(path, Access.NO_ANSWER, f"{path} did not answer within {timeout:g} s (a network drive that is "
                 "not responding?); its turns cannot be seen until it answers", plain, True)
