"""The keeper: a small process between the tray and a Hermes gateway the tray starts, so that no end of a
process of ours ever reaches Hermes as the end of the turn (docs/architecture.md, "Crash-only"): it passes
lines through while the tray is there, and once the tray left without ``end`` it drops Hermes' events and
closes the gateway's stdin only when Hermes is idle.

It runs under Hermes' own interpreter (``python -I -S``), so it imports nothing but the standard library.
Lines from the tray for it: ``{"keeper": "end", "grace": s}`` (end the gateway, politely, then by force) and
``{"keeper": "kill"}``. Its first line to the tray is ``{"keeper": {"pid": <gateway pid>}}``, or
``{"keeper": {"error": …, "missing": true|false}}`` when the gateway could not be started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

QUIET_S = 1.0  # idle this long (no frame at all) before the gateway's stdin is closed
ORPHAN_GRACE_S = 60.0  # an idle Hermes whose stdin was closed is given this long to save and exit, per step
TICK_S = 0.1


class Gate:
    """What Hermes is doing, read from the lines that pass: requests unanswered, turns running, continuations
    promised whose first frame has not come yet."""

    def __init__(self, start_timeout: float, idle_timeout: float) -> None:
        self.start_timeout, self.idle_timeout = start_timeout, idle_timeout
        self.lock = threading.Lock()
        self.pending: dict[Any, str] = {}  # request id -> method
        self.running: set[str] = set()  # runtime session ids with a turn in flight
        self.promised: dict[str, float] = {}  # runtime session id -> until when its first frame is awaited
        self.last_frame = time.monotonic()

    def sent(self, line: bytes) -> None:
        msg = _parse(line)
        if msg is not None and "id" in msg and isinstance(msg.get("method"), str):
            with self.lock:
                self.pending[_key(msg["id"])] = msg["method"]

    def received(self, line: bytes) -> None:
        now = time.monotonic()
        msg = _parse(line)
        with self.lock:
            self.last_frame = now
            if msg is None:
                return
            if msg.get("method") == "event":
                self._event(msg.get("params"))
                return
            method = self.pending.pop(_key(msg.get("id")), None)
            result = msg.get("result")
            if not isinstance(result, dict):
                return
            sid = result.get("session_id")
            if (method == "session.resume" and isinstance(result.get("auto_continue"), dict)
                    or method == "prompt.submit"):
                sid = sid if isinstance(sid, str) else "?"
                if sid not in self.running:
                    self.promised[sid] = now + self.start_timeout

    def _event(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        kind, sid = params.get("type"), params.get("session_id")
        sid = sid if isinstance(sid, str) else "?"
        if kind == "message.start":
            self.running.add(sid)
            self.promised.pop(sid, None)
            self.promised.pop("?", None)
        elif kind in ("message.complete", "error"):
            self.running.discard(sid)
            self.promised.pop(sid, None)

    def idle(self) -> bool:
        """Nothing in flight, and quiet for a moment: closing Hermes' stdin now costs nothing."""
        now = time.monotonic()
        with self.lock:
            self.promised = {s: t for s, t in self.promised.items() if t > now}
            return (not self.pending and not self.running and not self.promised
                    and now - self.last_frame >= QUIET_S)

    def stalled(self) -> bool:
        """A turn runs but Hermes has sent nothing for the tray's idle limit: the tray would stop it too."""
        with self.lock:
            return bool(self.running) and time.monotonic() - self.last_frame >= self.idle_timeout


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return msg if isinstance(msg, dict) else None


def _key(rid: Any) -> Any:
    return rid if isinstance(rid, (int, str)) else repr(rid)


def _pdeathsig() -> Any:
    """Linux: a ``preexec_fn`` that has the kernel SIGKILL the child when this process dies."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return arm


def guard(proc: subprocess.Popen[bytes], kernel32: Any = None) -> Any:
    """Windows: tie ``proc`` to the keeper by a job object that kills every process in it when its last handle
    (ours) closes; its handle, or None (Linux does it at spawn)."""
    if os.name != "nt" and kernel32 is None:
        return None
    import ctypes

    dword, size = ctypes.c_uint32, ctypes.c_size_t

    class Basic(ctypes.Structure):
        _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                    ("LimitFlags", dword), ("MinimumWorkingSetSize", size), ("MaximumWorkingSetSize", size),
                    ("ActiveProcessLimit", dword), ("Affinity", size), ("PriorityClass", dword),
                    ("SchedulingClass", dword)]

    class Io(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in ("ReadOperationCount", "WriteOperationCount",
                                                    "OtherOperationCount", "ReadTransferCount",
                                                    "WriteTransferCount", "OtherTransferCount")]

    class Extended(ctypes.Structure):
        _fields_ = [("BasicLimitInformation", Basic), ("IoInfo", Io), ("ProcessMemoryLimit", size),
                    ("JobMemoryLimit", size), ("PeakProcessMemoryUsed", size), ("PeakJobMemoryUsed", size)]

    try:
        if kernel32 is None:
            kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        job = kernel32.CreateJobObjectW(None, None)
        if not job:
            raise OSError("CreateJobObjectW failed")
        info = Extended()
        info.BasicLimitInformation.LimitFlags = 0x2000  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not kernel32.SetInformationJobObject(job, 9, ctypes.byref(info), ctypes.sizeof(info)):  # extended
            raise OSError("SetInformationJobObject failed")
        # Popen's process handle on Windows
        if not kernel32.AssignProcessToJobObject(job, int(proc._handle)):  # type: ignore[attr-defined]
            raise OSError("AssignProcessToJobObject failed")
        return job
    except (OSError, AttributeError, ValueError) as exc:
        log(f"the gateway is not tied to the keeper ({exc})")
        return None


def log(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"[hermes-tray keeper] {text}\n")
        sys.stderr.flush()


class Keeper:
    def __init__(self, proc: subprocess.Popen[bytes], gate: Gate, up: BinaryIO, down: BinaryIO) -> None:
        self.proc, self.gate, self.up, self.down = proc, gate, up, down
        self.tray_gone = threading.Event()  # the tray left without ``end``: carry the turn to its end
        self.end = threading.Event()  # the tray said the run is over
        self.write_lock = threading.Lock()
        self.grace = 5.0  # each step of ending the gateway when the tray says ``end``

    def from_tray(self) -> None:
        """Lines from the tray to Hermes (only complete lines: a tray killed mid-write leaves half of one)."""
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            for line in iter(self.up.readline, b""):
                if not line.endswith(b"\n"):
                    break
                if line.startswith(b'{"keeper"'):
                    order = _parse(line) or {}
                    if order.get("keeper") == "kill":
                        signal_group(self.proc, kill=True)
                    elif order.get("keeper") == "end":
                        grace = order.get("grace")
                        self.grace = float(grace) if isinstance(grace, (int, float)) and grace >= 0 else 5.0
                        self.end.set()
                    continue
                self.gate.sent(line)
                try:
                    stdin.write(line)
                    stdin.flush()
                except (OSError, ValueError):
                    return  # Hermes is gone; its stdout ends too
        except (OSError, ValueError):
            pass
        finally:
            if not self.end.is_set():
                self.tray_gone.set()

    def to_tray(self) -> None:
        """Hermes' lines to the tray; dropped once it is gone (Hermes never blocks on a full pipe)."""
        stdout = self.proc.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            self.gate.received(line)
            if self.tray_gone.is_set():
                continue
            try:
                with self.write_lock:
                    self.down.write(line)
                    self.down.flush()
            except (OSError, ValueError):
                self.tray_gone.set()

    def run(self) -> int:
        threading.Thread(target=self.from_tray, name="from-tray", daemon=True).start()
        reader = threading.Thread(target=self.to_tray, name="to-tray", daemon=True)
        reader.start()
        closed = False
        while self.proc.poll() is None:
            if self.end.is_set():
                end(self.proc, grace=self.grace)
                break
            if self.tray_gone.is_set() and not closed and (self.gate.idle() or self.gate.stalled()):
                log("the tray is gone and Hermes is " + ("idle" if self.gate.idle() else "silent")
                    + ": ending the gateway")
                closed = True
                threading.Thread(target=end, args=(self.proc,), kwargs={"grace": ORPHAN_GRACE_S}, daemon=True).start()
            time.sleep(TICK_S)
        code = self.proc.wait()
        reader.join(2.0)
        return code


def end(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Close Hermes' stdin (it exits, as at the end of any run), then SIGTERM, then SIGKILL its process group."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
    for step in ("wait", "term", "kill"):
        if step != "wait":
            signal_group(proc, kill=step == "kill")
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            log(f"the gateway did not exit after {step}")


def signal_group(proc: subprocess.Popen[bytes], *, kill: bool) -> None:
    """The gateway and its process group (its tools); only while not reaped, so the group is no one else's."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        if os.name == "nt":
            proc.kill() if kill else proc.terminate()
        else:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)


def hello(down: BinaryIO, payload: dict[str, Any]) -> None:
    down.write(json.dumps({"keeper": payload}).encode() + b"\n")
    down.flush()


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    for name in ("SIGINT", "SIGHUP", "SIGPIPE", "SIGTERM"):  # SIGTERM: the tray going away (session logout)
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    up, down = sys.stdin.buffer, sys.stdout.buffer
    # Windows: CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP; else its own group (its tools are signalled too)
    kwargs: dict[str, Any] = ({"creationflags": 0x08000000 | 0x00000200} if os.name == "nt"
                              else {"start_new_session": True, "preexec_fn": _pdeathsig()})
    try:
        proc = subprocess.Popen(config["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # noqa: S603
                                cwd=config.get("cwd"), close_fds=True, **kwargs)
    except OSError as exc:
        hello(down, {"error": exc.strerror or str(exc), "missing": isinstance(exc, FileNotFoundError)})
        return 127
    job = guard(proc)
    hello(down, {"pid": proc.pid})
    gate = Gate(float(config.get("start_timeout", 150.0)), float(config.get("idle_timeout", 900.0)))
    code = Keeper(proc, gate, up, down).run()
    del job
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
