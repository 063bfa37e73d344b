"""core.fork_split: a forked child's share of a burst of work, its answer, and every way it can go wrong.

Each case runs in a fresh interpreter: forking is (rightly) refused while another Python thread runs, and
earlier tests in this process may have left one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from hermes_tray_core import fork_split

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forking is used on Linux only")

PRELUDE = textwrap.dedent("""
    import os, sys, threading, time
    from hermes_tray_core import fork_split

    def children():
        me = str(os.getpid())
        out = set()
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/stat") as fh:
                        if fh.read().rsplit(")", 1)[1].split()[1] == me:
                            out.add(int(pid))
                except OSError:
                    continue
        return out

    assert fork_split.fork_available(), "a fresh single-threaded process on 2+ CPUs must be able to fork"
""")


def run_case(body: str) -> None:
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body) + "\nprint('ok')\n"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_the_child_works_in_another_process_while_this_one_works_too():
    run_case("""
        ran_here = []
        answer = fork_split.run_split(lambda: {"pid": os.getpid(), "big": "x" * 300_000},
                                      lambda: ran_here.append(os.getpid()), timeout=10)
        assert ran_here == [os.getpid()]
        assert answer["pid"] != os.getpid(), answer["pid"]
        assert len(answer["big"]) == 300_000  # more than a pipe holds: read while the child writes
        assert children() == set()  # reaped
    """)


def test_a_child_that_overruns_is_killed_and_answers_nothing():
    run_case("""
        t0 = time.monotonic()
        assert fork_split.run_split(lambda: time.sleep(30) or {"late": True}, lambda: None, timeout=0.5) is None
        assert time.monotonic() - t0 < 5
        assert children() == set()
    """)


def test_a_child_that_fails_answers_nothing_and_prints_nothing():
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        print("buffered, printed once", end="")
        def boom():
            raise RuntimeError("child failed")
        assert fork_split.run_split(boom, lambda: None, timeout=10) is None
        assert fork_split.run_split(lambda: {"not json": object()}, lambda: None, timeout=10) is None
        assert children() == set()
    """)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "buffered, printed once"  # the children never flushed the inherited buffer
    assert proc.stderr == ""  # no traceback from a child


def test_a_failure_here_propagates_and_the_child_is_still_reaped():
    run_case("""
        def here():
            raise ValueError("parent failed")
        try:
            fork_split.run_split(lambda: time.sleep(30), here, timeout=10)
        except ValueError as exc:
            assert str(exc) == "parent failed"
        else:
            raise AssertionError("the parent's exception was swallowed")
        assert children() == set()
    """)


def test_no_fork_while_another_thread_runs():
    run_case("""
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        try:
            assert not fork_split.fork_available()
            ran = []
            assert fork_split.run_split(lambda: {"x": 1}, lambda: ran.append(1), timeout=10) is None
            assert ran == [1]  # this process still does its part
            assert children() == set()  # and no child was made
        finally:
            stop.set()
            t.join()
        assert fork_split.fork_available()
    """)


def test_available_only_on_linux_with_two_cpus(monkeypatch):
    monkeypatch.setattr(fork_split.os, "sched_getaffinity", lambda _pid: {0})
    assert not fork_split.fork_available()
    monkeypatch.setattr(fork_split.sys, "platform", "darwin")
    assert not fork_split.fork_available()
