"""Start marks: what identifies a process in the tray's own records, unmoved by wall-clock steps.

psutil's ``create_time()`` is the boot time (the wall clock minus the time since boot, ``btime`` of
``/proc/stat`` on Linux) plus the process's start in ticks since boot, so every wall-clock step (NTP after a
laptop resumes, a VM host stepping its guest) moves the create time of every live process by the step. An
identity recorded before the step then stops matching and a live process reads as dead. The tray's own
records of a process (its lease holders and claims, the identities it keeps of its gateways and of the
backends it found) therefore carry a *start mark* beside the create time. One interface, one
implementation per OS:

* Linux: ``linux:<boot id>:<pid>:<start ticks>`` — the boot id (``/proc/sys/kernel/random/boot_id``, new
  at every boot) and the start in clock ticks since boot (field 22 of ``/proc/<pid>/stat``). Neither moves
  when the wall clock steps; a reboot changes the boot id, so a pid reused after a reboot never matches.
* elsewhere: ``psutil:<pid>:<create time>:<boot time>`` — psutil's create time together with the boot time
  psutil reported at the same moment. Where the OS derives create time from boot time (as Linux does),
  a step moves both by the same amount and the boot-relative start stays; where the OS keeps the creation
  instant itself (Windows' process creation time, macOS' ``p_starttime``) the create time stays. Either
  agreeing within 1 ms is the same process. Not met there: a pid reused in a *later boot* by a process that
  started at the same boot-relative instant (within 1 ms) would pass; leases also expire, which bounds it.

A mark names its pid, so a mark left beside another pid (a row updated by an older tray that does not
know marks) is never taken for that pid's.
"""

from __future__ import annotations

import os
import sys

from hermes_tray_core.process.identity import process_errors

__all__ = ["PROC", "mark_pid", "same_process", "start_mark"]

#: The procfs this module reads (the real one; psutil's ``PROCFS_PATH`` is psutil's business).
PROC = "/proc"
_TOLERANCE = 0.001
_boot_id: str | None = None


class _LinuxMarks:
    """Boot id + start ticks: immune to wall-clock steps by construction."""

    kind = "linux"

    @staticmethod
    def boot_id() -> str | None:
        global _boot_id
        if _boot_id is None:
            try:
                with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as fh:
                    _boot_id = fh.read().strip() or None
            except (OSError, ValueError):
                return None
        return _boot_id

    def read(self, pid: int) -> str | None:
        boot = self.boot_id()
        if boot is None:
            return None
        try:
            with open(f"{PROC}/{int(pid)}/stat", "rb") as fh:
                data = fh.read()
            # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")".
            fields = data[data.rindex(b")") + 2:].split()
            ticks = int(fields[19])  # field 22 of stat(5); fields[0] is field 3 (state)
        except (OSError, ValueError, IndexError):
            return None
        return f"{self.kind}:{boot}:{int(pid)}:{ticks}"

    @staticmethod
    def match(a: list[str], b: list[str]) -> bool:
        return a == b


class _PsutilMarks:
    """psutil create time + the boot time it was computed from (see the module doc for what this misses)."""

    kind = "psutil"

    def read(self, pid: int) -> str | None:
        try:
            import psutil

            created = float(psutil.Process(int(pid)).create_time())
            booted = float(psutil.boot_time())
        except process_errors():  # gone, not ours to read, or a platform that answers oddly: no mark
            return None
        return f"{self.kind}:{int(pid)}:{created!r}:{booted!r}"

    @staticmethod
    def match(a: list[str], b: list[str]) -> bool:
        try:
            ca, ba, cb, bb = float(a[1]), float(a[2]), float(b[1]), float(b[2])
        except (ValueError, IndexError):
            return False
        return abs(ca - cb) < _TOLERANCE or abs((ca - ba) - (cb - bb)) < _TOLERANCE


def _choose() -> _LinuxMarks | _PsutilMarks:
    if sys.platform.startswith("linux") and os.path.exists(f"{PROC}/self/stat") and _LinuxMarks.boot_id():
        return _LinuxMarks()
    return _PsutilMarks()


_MARKS = _choose()


def start_mark(pid: int) -> str | None:
    """The start mark of the live process ``pid`` (None when it cannot be read: gone, or hidden from us)."""
    return _MARKS.read(pid)


def _fields(mark: str) -> tuple[str, int, list[str]] | None:
    """(kind, pid, the fields after the kind's prefix) of a mark, or None when it is not one."""
    if not isinstance(mark, str):
        return None
    kind, _, rest = mark.partition(":")
    if kind == "linux":
        boot, _, tail = rest.partition(":")
        pid, _, ticks = tail.partition(":")
        parts = [boot, pid, ticks]
    else:
        parts = rest.split(":")
    try:
        return kind, int(parts[1] if kind == "linux" else parts[0]), parts
    except (ValueError, IndexError):
        return None


def mark_pid(mark: object) -> int | None:
    """The pid a mark was taken of, or None when ``mark`` is not a mark."""
    fields = _fields(mark) if isinstance(mark, str) else None
    return fields[1] if fields is not None else None


def same_process(mark: object, pid: int) -> bool | None:
    """Is ``pid`` now the process ``mark`` was taken of? True / False, or None when that cannot be told
    (not a mark of this platform, or the process's mark cannot be read — it may be gone: ask the caller's
    liveness check). A mark of another pid is False."""
    if not isinstance(mark, str):
        return None
    recorded = _fields(mark)
    if recorded is None or recorded[0] != _MARKS.kind:
        return None
    if recorded[1] != pid:
        return False
    now = start_mark(pid)
    current = _fields(now) if now is not None else None
    if current is None:
        return None
    return _MARKS.match(recorded[2], current[2])
