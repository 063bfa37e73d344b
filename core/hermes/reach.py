"""Can a home be read at all? One look at each home, bounded in time, before anything reads inside it.

A home the user cannot enter, or on a failing disk (EIO, ESTALE), must become that home's problem line, never
an exception that hides every other home. A network drive that no longer answers is worse: every operation
under it hangs in the kernel, and the process cannot end while a thread is stuck there (``status | jq`` never
ended). So :func:`look` stats each home in a child process and waits at most :data:`TIMEOUT` for each answer;
a home that overruns is "not answering", the child is left behind holding nothing of ours (it ends once the
drive answers) and a fresh one looks at the rest; until it ends, later looks answer at once (a dead drive
costs one process, not one a scan). tests/test_odd_homes.py holds this to a FUSE drive that stops answering.
Only the look is bounded: a drive that dies right after it can still hang that scan.
"""

from __future__ import annotations

import _thread
import errno
import marshal
import os
import select
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.hermes.paths import PROFILE_RE
from hermes_tray_core.keys import HomePath, home_path
from hermes_tray_core.stores.fsutil import os_error_text
from hermes_tray_core.vocab import StrEnum

__all__ = ["TIMEOUT", "Access", "Reach", "look", "look_one"]

#: Seconds one home may take to answer its look.
TIMEOUT = 10.0


class Access(StrEnum):
    """What one look at a home found."""

    OK = "ok"  # a directory this user can enter and list
    MISSING = "missing"  # nothing at that path
    NOT_DIR = "not-a-directory"  # a file (or a path through a file)
    UNREADABLE = "unreadable"  # there, but it cannot be read (permissions, a too-long name, a disk error…)
    NO_ANSWER = "not-answering"  # the look did not come back in time: a drive that hangs


class Reach(NamedTuple):
    """One look at one path. ``problem``: in the user's words ("" when OK); ``canonical``: its
    :func:`~hermes_tray_core.keys.home_path` when it answered, else the absolute path."""

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
    """One unbounded look at ``path`` (the worker's job). Never raises: the caller would wait for nothing."""
    plain = os.path.normcase(os.path.abspath(path))
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return Reach(path, Access.NOT_DIR, f"{path} is not a directory", plain, True)
        if not os.access(path, os.R_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "Permission denied")
        return Reach(path, Access.OK, "", home_path(path), True, _profiles(path) if find_profiles else ())
    except FileNotFoundError:
        return Reach(path, Access.MISSING, f"{path} does not exist", plain, False)
    except NotADirectoryError as exc:  # a path through a file
        return Reach(path, Access.NOT_DIR, f"{path} is not a directory ({os_error_text(exc)})", plain, False)
    except (OSError, ValueError) as exc:
        gone = isinstance(exc, ValueError) or getattr(exc, "errno", None) == errno.ENAMETOOLONG
        return Reach(path, Access.UNREADABLE, f"{path} cannot be read: {os_error_text(exc)}", plain, not gone)
    except Exception:  # boundary: the worker's top
        return Reach(path, Access.UNREADABLE, f"{path} cannot be read", plain, True)


def _pack(reach: Reach) -> tuple[Any, ...]:
    return (str(reach.path), reach.access.value, reach.problem, str(reach.canonical), reach.exists,
            tuple(_pack(p) for p in reach.profiles))


def _unpack(t: tuple[Any, ...]) -> Reach:
    access = Access(t[1])
    canonical = HomePath(t[3]) if access is Access.OK else t[3]
    return Reach(Path(t[0]), access, t[2], canonical, t[4], tuple(_unpack(p) for p in t[5]))


class _Child:
    """Looks at ``paths`` in order in a forked child, where a look stuck in the kernel cannot hold this
    process. It closes every inherited file first (left behind, it holds nothing of ours; it ends at its next
    write into the pipe closed here) and, forked from a process with threads, touches no lock (no logging, no
    buffered stream)."""

    def __init__(self, paths: Sequence[Path], find_profiles: bool) -> None:
        self.paths = list(paths)
        self.results: list[Reach] = []
        self.done = False  # the child has ended (reaped): whatever was stuck let go
        r, w = os.pipe()
        last_fd = min(max(256, os.sysconf("SC_OPEN_MAX")), 1 << 16)  # one close_range on Linux; a loop elsewhere
        try:
            self.pid = os.fork()
        except OSError:  # no process to be had (a limit reached): the caller looks in a thread instead
            os.close(r)
            os.close(w)
            raise
        if self.pid == 0:  # pragma: no cover - the child (the parent's tests see what it wrote)
            try:
                os.closerange(0, w)  # stdout, stderr, lock files, sockets: nothing of ours held if it sticks
                os.closerange(w + 1, last_fd)
                for path in self.paths:
                    data = marshal.dumps(_pack(look_one(path, find_profiles=find_profiles)))
                    view = memoryview(len(data).to_bytes(4, "big") + data)
                    while view:
                        view = view[os.write(w, view):]
            finally:
                os._exit(0)
        os.close(w)
        self._fd = r

    def wait(self, timeout: float) -> int | None:
        """None when every path answered, else the index of the first that took ``timeout``."""
        poll, buf, deadline = select.poll(), b"", time.monotonic() + timeout
        poll.register(self._fd, select.POLLIN)
        try:
            while True:
                if not poll.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    if time.monotonic() >= deadline:
                        return len(self.results)
                    continue
                chunk = os.read(self._fd, 65536)
                if not chunk:  # it said everything and ended (or is about to)
                    self._reap(0)
                    return None if len(self.results) == len(self.paths) else len(self.results)
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + (n := int.from_bytes(buf[:4], "big")):
                    self.results.append(_unpack(marshal.loads(buf[4:4 + n])))
                    buf, deadline = buf[4 + n:], time.monotonic() + timeout
        finally:
            os.close(self._fd)

    def _reap(self, flags: int) -> None:
        try:
            self.done = os.waitpid(self.pid, flags)[0] != 0
        except ChildProcessError:
            self.done = True

    @property
    def stuck(self) -> bool:
        if not self.done:
            self._reap(os.WNOHANG)
        return not self.done


class _Batch:
    """Where there is no ``fork`` (Windows, which has no FUSE): a worker thread looking at ``paths`` in order."""

    def __init__(self, paths: Sequence[Path], find_profiles: bool) -> None:
        self.paths = list(paths)
        self.find_profiles = find_profiles
        self.results: list[Reach] = []
        self.abandoned = False
        self.done = False
        self._lock = _thread.allocate_lock()  # guards results / abandoned / done
        self._finished = _thread.allocate_lock()  # released once, by the worker, when it is done
        self._finished.acquire()
        try:
            _thread.start_new_thread(self.run, ())
        except RuntimeError:  # no thread to be had: look without a bound rather than not at all
            self.run()

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
        """As :meth:`_Child.wait`; a path is given up on after between ``timeout`` and twice that."""
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

    @property
    def stuck(self) -> bool:
        return not self.done


_Looker = _Child if hasattr(os, "fork") else _Batch


_stuck: dict[str, _Child | _Batch] = {}  # path -> the looker still stuck on it
#: path -> (when, a look that found it readable): a scan right after discovery reuses discovery's look, for
#: :data:`FRESH` seconds only (a home that breaks is seen by the next look).
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
        if stuck is not None and stuck.stuck:
            found[i] = _no_answer(path, timeout)
        elif recent is not None and now - recent[0] < FRESH:
            found[i] = recent[1]
        else:
            _stuck.pop(key, None)
            todo.append(i)
    while todo:
        try:
            batch: _Child | _Batch = _Looker([paths[i] for i in todo], find_profiles)
        except OSError:
            batch = _Batch([paths[i] for i in todo], find_profiles)
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
    # the same words at every look while it hangs: the tray's problem list does not flicker
    plain = os.path.normcase(os.path.abspath(path))
    return Reach(path, Access.NO_ANSWER, f"{path} did not answer within {timeout:g} s (a network drive that is "
                 "not responding?); its turns cannot be seen until it answers", plain, True)
