"""Process identity and liveness: a recycled pid never passes as the original, and a wall-clock step never
turns a live process dead (docs/reliability.md, "Clock steps"). The tray's own records compare a start mark;
identities Hermes wrote are judged by Hermes' own rule, read through a clock step where the tray can tell: the
tray may be safer than Hermes, never less.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import NamedTuple, TypeGuard

from hermes_tray_core.numbers import json_int, strict_finite
from hermes_tray_core.vocab import WriterState

__all__ = ["STEP_WINDOW_S", "HermesJudgement", "ProcessIdentity", "START_TIME_TOLERANCE", "hermes_liveness",
    "identity_of", "judge_hermes_identity", "own_identity", "own_pidns", "process_liveness", "process_start_time"]

Liveness = WriterState  # alive / dead / unknown (string enum members: they compare equal to the strings)
_ALIVE, _DEAD, _UNKNOWN = WriterState.ALIVE, WriterState.DEAD, WriterState.UNKNOWN

# psutil reports create time with ~10 ms resolution on Linux; Hermes compares with this tolerance.
START_TIME_TOLERANCE = 0.001

#: How far a Hermes-written start time may lie from the live Hermes process's create time and still name it:
#: an NTP or VM-host step, or an RTC in local time corrected by up to 14 h. A day covers them; wider costs
#: little (a dead writer read alive only leaves a turn alone), narrower starts a second turn over a live one.
STEP_WINDOW_S = 24 * 3600.0


class ProcessIdentity(NamedTuple):
    """(pid, psutil create time as Hermes' formats carry it, start mark: what :meth:`liveness` compares). A
    NamedTuple, so that importing this module (every ``status`` run does) does not pull in ``dataclasses``."""

    pid: int
    start_time: float | None = None
    mark: str | None = None

    def liveness(self) -> Liveness:
        return process_liveness(self.pid, self.start_time, mark=self.mark)


def _psutil() -> ModuleType:
    """``psutil`` on first use: ~15 ms to import, and a scan whose writers are gone never needs it."""
    import psutil

    return psutil


def process_errors() -> tuple[type[Exception], ...]:
    """What looking at another process can raise (psutil's, the OS's, a pid out of range, no psutil): anything
    else is a bug to see, not a process to pass over."""
    try:
        err: type[Exception] = _psutil().Error
    except ImportError:
        err = ImportError
    return (ImportError, err, OSError, ValueError, OverflowError, RuntimeError)


def _no_such_pid(pid: int) -> bool:
    """True only when ``kill(pid, 0)`` says ESRCH (psutil's ``NoSuchProcess``); all else is left to psutil."""
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError, ValueError):
        return False
    return False


def process_start_time(pid: int) -> float | None:
    """psutil create time of ``pid``, or None when it cannot be read."""
    try:
        psutil = _psutil()
        return float(psutil.Process(pid).create_time())
    except process_errors():
        return None


def own_identity() -> ProcessIdentity:
    """This process's identity, read once per pid as Hermes caches its own: what it writes as
    ``writer_start_time`` stays the same whatever the clock does afterwards."""
    return _identity_once(os.getpid())


def identity_of(pid: int) -> ProcessIdentity:
    from hermes_tray_core.process.start_mark import start_mark

    return ProcessIdentity(pid, process_start_time(pid), start_mark(pid))


_identity_once = cache(identity_of)


def _valid_pid(pid: object) -> TypeGuard[int]:
    return (number := json_int(pid)) is not None and number > 0


def process_liveness(pid: object, start_time: object = None, *, mark: object = None) -> Liveness:
    """``alive`` iff the pid exists, is not a zombie and is the recorded process: by ``mark`` when given, else
    by ``start_time`` within 1 ms. Any error that leaves the answer open is ``unknown`` ("leave it alone")."""
    if not _valid_pid(pid):
        return _UNKNOWN
    if mark is not None:
        return _liveness_by_mark(pid, start_time, mark)
    expected = strict_finite(start_time)
    if start_time is not None and expected is None:
        return _UNKNOWN  # junk (a string, NaN, inf) proves nothing either way
    if _no_such_pid(pid):
        return _DEAD
    psutil = _psutil()
    try:
        proc = psutil.Process(pid)
        status = proc.status()
        if status in (psutil.STATUS_ZOMBIE, getattr(psutil, "STATUS_DEAD", "dead")):
            return _DEAD
        if expected is None:
            return _ALIVE
        created = proc.create_time()
    except psutil.NoSuchProcess:  # ZombieProcess too: it is a NoSuchProcess
        return _DEAD
    except psutil.AccessDenied:
        return _ALIVE if expected is None else _UNKNOWN
    except Exception:  # boundary: liveness never raises (its readers are bookkeeping): any other error is unknown
        return _UNKNOWN
    return _ALIVE if abs(float(created) - expected) < START_TIME_TOLERANCE else _DEAD


def _liveness_by_mark(pid: int, start_time: object, mark: object) -> Liveness:
    from hermes_tray_core.process.start_mark import same_process

    if _no_such_pid(pid):
        return _DEAD
    same = same_process(mark, pid)
    if same is False:
        return _DEAD
    alive = process_liveness(pid)  # exists, not a zombie
    if alive != _ALIVE or same:
        return alive
    # a mark not judged here (another platform's): the create time may say alive, never dead (a clock step)
    return _ALIVE if start_time is not None and process_liveness(pid, start_time) == _ALIVE else _UNKNOWN


def _hermes_optional_float(value: object) -> float | None:
    """Hermes' ``_optional_float`` (OverflowError propagates, as in Hermes)."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    try:
        return float(value)  # type: ignore[arg-type]  # Hermes calls float() on whatever it read
    except (TypeError, ValueError):
        return None


def _current_start(pid: int) -> float | None:
    """The create time Hermes compares with: its own cached one for itself, else psutil's now."""
    return own_identity().start_time if pid == os.getpid() else process_start_time(pid)


def hermes_liveness(pid: int, start_time: object = None) -> Liveness:
    """Hermes' own verdict on a (pid, start time) it wrote: ``hermes_cli.active_sessions._pid_liveness``, with
    its coercions (an overflow, which its callers read as unknown, is ``unknown``)."""
    if pid != os.getpid() and process_liveness(pid) == _DEAD:  # Hermes' _pid_exists: exists, not a zombie
        return _DEAD
    try:
        expected = _hermes_optional_float(start_time)
    except OverflowError:
        return _UNKNOWN
    if expected is None:
        return _ALIVE
    current = _current_start(pid)
    if current is None:
        return _UNKNOWN
    return _ALIVE if abs(current - expected) < START_TIME_TOLERANCE else _DEAD


class HermesJudgement(NamedTuple):
    """The tray's verdict on a Hermes-written identity (``state``, what it acts on), Hermes' own, and the
    clock step (``shift``) the tray read where they differ."""

    state: Liveness
    hermes: Liveness
    shift: float = 0.0

    @property
    def note(self) -> str:
        """A short clause for a reason line when the two verdicts differ, else ``""``."""
        if self.state == self.hermes:
            return ""
        return (f"its recorded start time is {_seconds(self.shift)} off its current one, as after a wall-clock "
                "step; Hermes' own check would call it gone")


def _seconds(shift: float) -> str:
    s = abs(shift)
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def judge_hermes_identity(pid: int, start_time: object, *,
                          serves_home: Callable[[int], bool] | None = None) -> HermesJudgement:
    """Hermes' verdict, read through a wall-clock step: *dead* only by a start time within
    :data:`STEP_WINDOW_S` is *alive* iff ``serves_home(pid)`` (a live Hermes process of that home)."""
    hermes = hermes_liveness(pid, start_time)
    as_hermes = HermesJudgement(hermes, hermes)
    if hermes != _DEAD or serves_home is None:
        return as_hermes
    try:
        recorded = _hermes_optional_float(start_time)
    except OverflowError:
        return as_hermes
    if recorded is None or not math.isfinite(recorded) or process_liveness(pid) == _DEAD \
            or (current := _current_start(pid)) is None or abs(current - recorded) > STEP_WINDOW_S:
        return as_hermes
    try:
        same_home = bool(serves_home(pid))
    except Exception:  # boundary: a caller's callback; an error there proves nothing about the process
        same_home = False
    return HermesJudgement(_ALIVE, hermes, current - recorded) if same_home else as_hermes


def own_pidns() -> int | None:
    """Inode of our pid namespace (Linux), or None where the platform has no such thing."""
    return _pidns_once(os.getpid())


@cache
def _pidns_once(_pid: int) -> int | None:  # per pid: a forked child reads its own
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
