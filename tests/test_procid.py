"""hermes_tray_core.process.identity: (pid, create time) identity and alive / dead / unknown, against real processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from hermes_tray_core.process.identity import (
    ProcessIdentity,
    hermes_liveness,
    identity_of,
    own_identity,
    process_liveness,
)


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def test_own_identity_is_pid_and_psutil_create_time(clock_step) -> None:
    me = own_identity()
    clock_step.step()  # NTP steps the clock after this process recorded who it is
    assert me.pid == os.getpid()
    assert own_identity() == me  # read once, as Hermes reads its own: what this process writes never moves
    assert me.mark == identity_of(me.pid).mark  # what the tray compares: the step does not move it
    assert me.liveness() == "alive"
    assert hermes_liveness(me.pid, me.start_time) == "alive"  # and Hermes' own rule for itself agrees
    if sys.platform.startswith("linux"):
        # psutil's create time as read once: off the current one by whole seconds only (the boot time
        # psutil adds is whole seconds; a step moves it), never by a fraction (another process).
        off = me.start_time - psutil.Process().create_time()
        assert abs(off - round(off)) < 0.001


def _report_identity(q) -> None:
    q.put(own_identity())


def test_a_forked_child_gets_its_own_identity_not_the_cached_parent_one() -> None:
    parent = own_identity()  # populate the cache before forking
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_report_identity, args=(q,))
    p.start()
    child = q.get(timeout=20)
    p.join()
    assert child.pid == p.pid != parent.pid
    assert child.start_time is not None and child.start_time >= parent.start_time


def test_alive_with_and_without_start_time(sleeper) -> None:
    ident = identity_of(sleeper.pid)
    assert ident.start_time is not None
    assert process_liveness(sleeper.pid, ident.start_time) == "alive"
    assert process_liveness(sleeper.pid) == "alive"  # pid-only identity: the pid exists


def test_start_time_tolerance_is_one_millisecond(sleeper) -> None:
    start = identity_of(sleeper.pid).start_time
    assert process_liveness(sleeper.pid, start + 0.0005) == "alive"
    assert process_liveness(sleeper.pid, start - 0.0005) == "alive"
    assert process_liveness(sleeper.pid, start + 0.002) == "dead"


def test_recycled_pid_reads_dead() -> None:
    me = own_identity()
    assert process_liveness(me.pid, me.start_time - 3600) == "dead"
    assert process_liveness(me.pid, me.start_time + 1) == "dead"


def test_exited_and_reaped_child_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = identity_of(child.pid).start_time
    child.wait()
    assert process_liveness(child.pid) == "dead"
    assert process_liveness(child.pid, start) == "dead"


def test_zombie_is_dead(sleeper) -> None:
    start = identity_of(sleeper.pid).start_time
    os.kill(sleeper.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.Process(sleeper.pid).status() != psutil.STATUS_ZOMBIE:  # killed, not yet reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert process_liveness(sleeper.pid) == "dead"
    assert process_liveness(sleeper.pid, start) == "dead"


def test_pid_that_never_existed_is_dead() -> None:
    assert process_liveness(2**31 + 7) == "dead"


@pytest.mark.parametrize("pid", [None, 0, -1, "123", 1.0, True, [1]])
def test_junk_pid_is_unknown(pid) -> None:
    assert process_liveness(pid) == "unknown"


@pytest.mark.parametrize("start", ["noon", True, float("nan"), float("inf"), [1.0]])
def test_junk_start_time_is_unknown(start) -> None:
    assert process_liveness(os.getpid(), start) == "unknown"


def _raising(exc: Exception):
    class Proc:
        def __init__(self, pid: int) -> None:
            raise exc

    return Proc


def test_access_denied_is_unknown_unless_pid_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psutil, "Process", _raising(psutil.AccessDenied(1)))
    assert process_liveness(1, 123.0) == "unknown"
    assert process_liveness(1) == "alive"  # the pid exists; someone else's process


def test_any_other_error_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psutil, "Process", _raising(RuntimeError("boom")))
    assert process_liveness(os.getpid()) == "unknown"
    assert process_liveness(os.getpid(), 1.0) == "unknown"


def test_identity_of_a_gone_pid_has_no_start_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    ident = identity_of(child.pid)
    assert ident == ProcessIdentity(child.pid, None)
    assert ident.liveness() == "dead"
