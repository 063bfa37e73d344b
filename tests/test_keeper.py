"""The keeper between the tray and a Hermes gateway it starts: no end of a process of ours is the turn's.

Real processes: a stand-in gateway that does what Hermes' stdio gateway does at the two moments that matter
(end-of-file on its stdin while a turn runs ends the turn as interrupted; a turn left alone runs to its end), a
"tray" process that starts it through :class:`StdioTransport` and is SIGKILLed mid-turn, and the kernel's own
guard (``PR_SET_PDEATHSIG``) when the keeper itself is killed.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hermes_tray_core.backend import keeper
from hermes_tray_core.backend.stdio import StdioTransport
from tests.support.sim_homes import pid_running

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")

# What Hermes' gateway does, reduced to what the keeper must get right. ``DIR`` holds ``log`` (what happened)
# and ``release`` (the model's answer may come); the turn runs from session.resume until released.
GATEWAY = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    d = sys.argv[1]
    def log(what):
        with open(os.path.join(d, "log"), "a") as f:
            f.write(what + "\\n")
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
    def ev(t, sid="rt1", **p):
        send({"jsonrpc": "2.0", "method": "event", "params": {"type": t, "session_id": sid, "payload": p}})
    running = threading.Event()
    def turn():
        time.sleep(float(os.environ.get("GW_START_DELAY", "0")))
        running.set(); ev("message.start"); log("started")
        while not os.path.exists(os.path.join(d, "release")):
            ev("message.delta", text="."); time.sleep(0.2)
        ev("message.complete", status="complete"); running.clear(); log("finished")
    if os.environ.get("GW_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    log("pid %d" % os.getpid())
    ev("gateway.ready", sid=None)
    for raw in iter(sys.stdin.readline, ""):
        req = json.loads(raw)
        log("got " + req["method"])
        if req["method"] == "session.resume":
            time.sleep(float(os.environ.get("GW_ANSWER_DELAY", "0")))
            send({"jsonrpc": "2.0", "id": req["id"], "result": {"session_id": "rt1", "auto_continue": {"attempt": 1}}})
            threading.Thread(target=turn, daemon=True).start()
        else:
            send({"jsonrpc": "2.0", "id": req["id"], "result": {}})
    log("eof while running" if running.is_set() else "eof")  # Hermes: the turn ends as interrupted here
    if os.environ.get("GW_IGNORE_EOF"):
        time.sleep(120)
    time.sleep(0.05)
    log("exit")
""")

# The tray: starts the gateway through the keeper, resumes, says when the turn started, then waits to be killed.
TRAY = textwrap.dedent("""
    import json, sys, time
    from hermes_tray_core.backend.stdio import StdioTransport
    t = StdioTransport([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=dict(__import__("os").environ),
                       python=sys.executable, idle_timeout=float(sys.argv[3]))
    t.open()
    print(json.dumps({"gateway": t.pid}), flush=True)
    lines = t.lines()
    next(lines)  # gateway.ready
    if sys.argv[4] in ("resume", "send"):
        t.write_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.resume",
                                 "params": {"session_id": "s1"}}).encode() + b"\\n")
        for line in lines if sys.argv[4] == "resume" else ():
            if b"message.start" in line:
                print("started", flush=True)
                break
    time.sleep(300)
""")


def log_of(d: Path) -> list[str]:
    try:
        return (d / "log").read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_for(cond, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_tray(d: Path, *, then: str = "resume", idle_timeout: float = 900.0,
               env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    p = subprocess.Popen([sys.executable, "-c", TRAY, GATEWAY, str(d), str(idle_timeout), then],
                         stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    assert p.stdout is not None
    gw = json.loads(p.stdout.readline())["gateway"]
    if then == "resume":
        assert p.stdout.readline().strip() == "started"
    return p, gw


def kill(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()


def test_a_tray_killed_mid_turn_leaves_the_turn_to_run_to_its_end_then_the_gateway_ends(tmp_path):
    tray, gw = start_tray(tmp_path)
    kill(tray)  # SIGKILL: the OOM killer, a crash, a logout that does not wait
    time.sleep(1.5)
    assert pid_running(gw) and "eof while running" not in log_of(tmp_path)  # Hermes never heard of it
    (tmp_path / "release").touch()  # the model answers
    wait_for(lambda: "exit" in log_of(tmp_path), "the gateway to end once the turn was over")
    assert log_of(tmp_path)[-4:] == ["started", "finished", "eof", "exit"]
    wait_for(lambda: not pid_running(gw), "the gateway to be gone")


def test_a_tray_killed_before_hermes_answered_still_lets_the_turn_start_and_finish(tmp_path):
    """Gone while ``session.resume`` is unanswered: the keeper waits for the answer, the promised start, the turn."""
    tray, gw = start_tray(tmp_path, then="send", env={"GW_ANSWER_DELAY": "1.5", "GW_START_DELAY": "1.5"})
    wait_for(lambda: "got session.resume" in log_of(tmp_path), "the resume to reach Hermes")
    kill(tray)
    wait_for(lambda: "started" in log_of(tmp_path), "the promised continuation to start", 10)
    (tmp_path / "release").touch()
    wait_for(lambda: "exit" in log_of(tmp_path), "the gateway to end once the turn was over")
    assert log_of(tmp_path)[-4:] == ["started", "finished", "eof", "exit"]
    wait_for(lambda: not pid_running(gw), "the gateway to be gone")


def test_a_tray_gone_while_hermes_is_idle_ends_it_at_once(tmp_path):
    tray, gw = start_tray(tmp_path, then="none")
    kill(tray)
    wait_for(lambda: not pid_running(gw), "an idle gateway to end", 10)
    assert log_of(tmp_path)[-2:] == ["eof", "exit"]


def test_a_turn_silent_past_the_idle_limit_is_ended_without_the_tray_as_with_it(tmp_path):
    tray, gw = start_tray(tmp_path, idle_timeout=1.0, env={"GW_IGNORE_TERM": ""})
    os.kill(gw, signal.SIGSTOP)  # Hermes hangs: no frame comes
    kill(tray)
    time.sleep(1.5)
    os.kill(gw, signal.SIGCONT)
    wait_for(lambda: "eof while running" in log_of(tmp_path), "the keeper to end a silent turn", 10)


def test_end_closes_hermes_stdin_and_kill_ends_one_that_does_not_listen(tmp_path):
    t = StdioTransport([sys.executable, "-c", GATEWAY, str(tmp_path)], env=dict(os.environ), python=sys.executable)
    t.open()
    gw = t.pid
    assert gw is not None and t.identity is not None and t.identity.pid == gw
    assert next(iter(t.lines())).startswith(b'{"jsonrpc"')  # lines pass through unchanged
    assert t.close(1.0) == 0 and log_of(tmp_path)[-2:] == ["eof", "exit"]
    d = tmp_path / "deaf"
    d.mkdir()
    t = StdioTransport([sys.executable, "-c", GATEWAY, str(d)], env={**os.environ, "GW_IGNORE_EOF": "1",
                                                                      "GW_IGNORE_TERM": "1"}, python=sys.executable)
    t.open()
    started = time.monotonic()
    assert t.close(0.5) == 128 + signal.SIGKILL  # stdin closed, SIGTERM ignored: SIGKILL, to its group
    assert time.monotonic() - started < 5 and not pid_running(t.pid)


def test_a_gateway_that_cannot_start_is_said_plainly(tmp_path):
    from hermes_tray_core.backend.rpc import HermesNotFound

    t = StdioTransport([str(tmp_path / "no-such-python"), "-m", "tui_gateway.entry"], env=dict(os.environ),
                       python=sys.executable)
    with pytest.raises(HermesNotFound, match="does not exist"):
        t.open()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_keeper_takes_the_gateway_with_it_so_hermes_never_reads_the_end(tmp_path):
    """The kernel SIGKILLs the gateway with its keeper: Hermes' marker stays (a crash it recovers from), instead of
    Hermes reading end-of-file and ending the turn as interrupted. Waited for as our own child (subreaper)."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1) == 0  # PR_SET_CHILD_SUBREAPER: the orphaned gateway becomes this test's child
    try:
        t = StdioTransport([sys.executable, "-c", GATEWAY, str(tmp_path)], env=dict(os.environ),
                           python=sys.executable)
        t.open()
        assert t.proc is not None and t.pid is not None
        t.write_line(b'{"jsonrpc": "2.0", "id": 1, "method": "session.resume", "params": {}}\n')
        wait_for(lambda: "started" in log_of(tmp_path), "the turn to start")
        os.kill(t.proc.pid, signal.SIGKILL)
        t.proc.wait()
        _pid, status = os.waitpid(t.pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        assert "eof while running" not in log_of(tmp_path) and "exit" not in log_of(tmp_path)
    finally:
        libc.prctl(36, 0)


def test_the_keeper_runs_under_an_isolated_interpreter_with_nothing_but_the_standard_library():
    """It runs as ``python -I -S -c`` under Hermes' interpreter: nothing of ours, nothing of the user's site."""
    src = keeper.__file__
    code = Path(src).read_text()
    imports = {line.split()[1].split(".")[0] for line in code.splitlines()
               if line.startswith(("import ", "from ")) and "__future__" not in line}
    assert imports <= set(sys.stdlib_module_names), imports - set(sys.stdlib_module_names)


class FakeKernel32:
    """Windows' calls, recorded: the job must kill its processes when the keeper's handle closes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def CreateJobObjectW(self, attrs, name):  # noqa: N802 - Windows' own names
        self.calls.append(("create", name))
        return 7

    def SetInformationJobObject(self, handle, cls, info, size):  # noqa: N802
        flags = info._obj.BasicLimitInformation.LimitFlags
        self.calls.append(("limit", (handle, cls, flags, size)))
        return 1

    def AssignProcessToJobObject(self, handle, process):  # noqa: N802
        self.calls.append(("assign", (handle, process)))
        return 1


def test_on_windows_the_gateway_goes_into_a_job_that_dies_with_the_keeper():
    class Proc:
        _handle = 1234

    k = FakeKernel32()
    job = keeper.guard(Proc(), kernel32=k)  # type: ignore[arg-type]
    assert job is not None
    (_, (handle, cls, flags, size)), assign = k.calls[1], k.calls[2]
    assert handle == 7
    assert cls == 9 and flags == 0x2000  # JobObjectExtendedLimitInformation, KILL_ON_JOB_CLOSE
    assert size == (144 if ctypes.sizeof(ctypes.c_void_p) == 8 else 112)  # JOBOBJECT_EXTENDED_LIMIT_INFORMATION
    assert assign == ("assign", (7, 1234))


def test_on_windows_a_job_that_cannot_be_made_is_said_in_the_log_and_the_run_goes_on(capsys):
    class Refusing(FakeKernel32):
        def CreateJobObjectW(self, attrs, name):  # noqa: N802
            return 0

    class Proc:
        _handle = 1

    assert keeper.guard(Proc(), kernel32=Refusing()) is None  # type: ignore[arg-type]
    assert "not tied to the keeper" in capsys.readouterr().err
