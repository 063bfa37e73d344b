"""Process identity and liveness: (pid, create time), so a recycled pid never passes as the original."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from hermes_tray_core.numbers import strict_finite
from hermes_tray_core.vocab import WriterState

__all__ = ["ProcessIdentity", "START_TIME_TOLERANCE", "identity_of", "own_identity", "process_liveness",
    "process_start_time"]

Liveness = WriterState  # alive / dead / unknown (string enum members: they compare equal to the strings)
_ALIVE, _DEAD, _UNKNOWN = WriterState.ALIVE, WriterState.DEAD, WriterState.UNKNOWN

# psutil reports create time with ~10 ms resolution on Linux; Hermes compares with this tolerance.
START_TIME_TOLERANCE = 0.001


class ProcessIdentity(NamedTuple):
    """(pid, psutil create time). An immutable record; a NamedTuple rather than a frozen dataclass
    so that importing this module (every ``status`` run does) does not pull in ``dataclasses``."""

    pid: int
    start_time: float | None = None

    def liveness(self) -> Liveness:
        return process_liveness(self.pid, self.start_time)


def __getattr__(name: str) -> Any:
    """``core.procid.psutil`` on first use: psutil costs ~15 ms to import, and ``hermes-tray status``
    must start fast; a scan whose writers are all gone never needs it (see :func:`_no_such_pid`)."""
    if name == "psutil":
        return _psutil()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _psutil():
    import psutil

    globals()["psutil"] = psutil
    return psutil


def _no_such_pid(pid: int) -> bool:
    """True only when the kernel says no process has this pid (POSIX ``kill(pid, 0)`` → ESRCH).

    Exactly the case psutil reports as ``NoSuchProcess``; anything else (EPERM: it exists; zombies;
    Windows, where ``os.kill`` would terminate) is left to psutil.
    """
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except Exception:
        return False
    return False


def process_start_time(pid: int) -> float | None:
    """psutil create time of ``pid``, or None when it cannot be read."""
    try:
        psutil = _psutil()
        return float(psutil.Process(pid).create_time())
    except Exception:
        return None


_OWN: ProcessIdentity | None = None


def own_identity() -> ProcessIdentity:
    """This process's identity (cached per pid, so a fork gets its own)."""
    global _OWN
    pid = os.getpid()
    if _OWN is None or _OWN.pid != pid:
        _OWN = ProcessIdentity(pid, process_start_time(pid))
    return _OWN


def identity_of(pid: int) -> ProcessIdentity:
    return ProcessIdentity(pid, process_start_time(pid))


def _valid_pid(pid: object) -> bool:
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0


def process_liveness(pid: object, start_time: object = None) -> Liveness:
    """``alive`` iff the pid exists, is not a zombie and (when given) its create time matches within 1 ms.

    A pid-only identity whose pid exists reads alive. Any error that leaves the answer open is
    ``unknown``: callers treat unknown as "leave it alone".
    """
    if not _valid_pid(pid):
        return _UNKNOWN
    if start_time is not None and strict_finite(start_time) is None:
        return _UNKNOWN  # junk (a string, NaN, inf) proves nothing either way
    if _no_such_pid(pid):  # type: ignore[arg-type]
        return _DEAD
    psutil = _psutil()
    try:
        proc = psutil.Process(pid)  # type: ignore[arg-type]
        status = proc.status()
        if status in (psutil.STATUS_ZOMBIE, getattr(psutil, "STATUS_DEAD", "dead")):
            return _DEAD
        if start_time is None:
            return _ALIVE
        created = proc.create_time()
    except psutil.NoSuchProcess:
        return _DEAD
    except psutil.ZombieProcess:
        return _DEAD
    except psutil.AccessDenied:
        # The pid exists but belongs to someone we cannot inspect: alive for pid-only, else unknown.
        return _ALIVE if start_time is None else _UNKNOWN
    except Exception:
        return _UNKNOWN
    return _ALIVE if abs(float(created) - float(start_time)) < START_TIME_TOLERANCE else _DEAD
