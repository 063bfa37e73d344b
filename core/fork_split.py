"""Split one short burst of read-only work over two processes: a forked child does part, this process the rest.

A cold ``hermes-tray status`` parses every WebUI journal and imports PyYAML to read each ``config.yaml``:
CPU-bound work in one thread, while the machine has a second core idle. A forked child (no interpreter
start-up: it has every module already) takes a share and sends back a JSON answer; anything it does not
answer in time is simply done here (tests/bench/bench_status.py measures the gain).

Only where forking is safe and pays: Linux (macOS forbids many system libraries after ``fork()``, Windows
has none), at least two CPUs usable, and no other Python thread running (a thread could hold a lock the
child would then wait on for ever). The child never writes a file, never runs ``atexit`` handlers or
flushes inherited buffers (``os._exit``), and is killed if it overruns.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["fork_available", "run_split", "single_threaded"]


def single_threaded() -> bool:
    """True while no other Python thread runs (``threading`` never imported: none was ever started)."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def fork_available() -> bool:
    """True where :func:`run_split` would really use a second process."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        if len(os.sched_getaffinity(0)) < 2:
            return False  # one CPU: the child would only take turns with us
    except OSError:
        return False
    return single_threaded()


def run_split(child_work: Callable[[], Any], here: Callable[[], None], *, timeout: float) -> Any | None:
    """Run ``child_work`` in a forked child while ``here`` runs in this process; the child's answer (decoded
    from JSON), or None if it failed, overran ``timeout`` seconds (it is then killed), or forking is not
    available (``here`` still runs). Exceptions of ``here`` propagate, after the child is reaped."""
    if not fork_available():
        here()
        return None
    try:
        rfd, wfd = os.pipe()
    except OSError:
        here()
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        here()
        return None
    if pid == 0:  # pragma: no cover - the child (its effect is asserted by the parent's tests)
        status = 1
        try:
            os.close(rfd)
            data = json.dumps(child_work(), separators=(",", ":")).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(wfd, view):]
            status = 0
        except BaseException:  # noqa: BLE001 - nothing may escape a forked child
            pass
        finally:
            os._exit(status)
    os.close(wfd)
    try:
        deadline = time.monotonic() + timeout
        here()
        return _read_answer(rfd, deadline)
    finally:
        os.close(rfd)
        _reap(pid)


def _read_answer(fd: int, deadline: float) -> Any | None:
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        return None  # the child died mid-answer


def _reap(pid: int) -> None:
    """Wait for the child; kill it first unless it has already exited."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
