"""The detached worker that carries one continuation to its end (``hermes-tray resume`` without --wait), in its own
session, so closing the terminal does not cut it short. Protocol with its parent:

* stdin: one JSON object ``{"home", "session_key", "expected"}`` (the marker the user was shown: it carries the
  prompt, so it travels over a pipe, never argv or a file);
* stdout: JSON lines, ``{"event": "dispatched", …}`` once the continuation started, or ``{"event": "result", …}``
  if it ended before that; then the parent goes away and stdout points at the worker's log.

SIGINT (the command's Ctrl-C, passed on) is the user's Stop, for good. SIGTERM (logout, ``kill``, an update) is
not (``StopReason.SHUTDOWN``): the continuation goes on in the user's running Hermes, or, in a Hermes process the
worker started, is left interrupted and offered again. After a SIGKILL the next scan settles the run from
Hermes' facts (``core.continuing.orphans``). The worker's log holds identity and outcome only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

LOG_NAME = "resume-worker.log"


def _log_file() -> Path:
    from hermes_tray_core import ensure_private_dir, log_dir

    d = ensure_private_dir(log_dir())
    return d / LOG_NAME


def _open_log() -> tuple[Path | None, int | None]:
    """The worker's log, opened privately (0600, no symlink); (None, None) when it cannot be used."""
    from hermes_tray_core import open_private_append

    try:
        path = _log_file()
        return path, open_private_append(path)
    except OSError as exc:
        print(f"resume worker: cannot open its log ({exc}); logging to stderr", file=sys.stderr)
        return None, None


def worker_argv() -> list[str]:
    """How to start the worker: ``python -m`` from source, a hidden command in a frozen app."""
    if getattr(sys, "frozen", False):
        from hermes_tray.cli.exits import RESUME_WORKER

        return [sys.executable, RESUME_WORKER]
    return [sys.executable, "-m", "hermes_tray.cli.resume_worker"]


def run_worker(stdin: Any = None, stdout: Any = None) -> int:
    """Read the request, resume, report over stdout until dispatched, then detach from it."""
    stdin = stdin if stdin is not None else sys.stdin
    out_lock = threading.Lock()
    out: dict[str, Any] = {"stream": stdout if stdout is not None else sys.stdout, "open": True}
    log_path, fd = _open_log()
    stream = os.fdopen(fd, "a", encoding="utf-8", buffering=1) if fd is not None else sys.stderr
    logging.basicConfig(stream=stream, level=logging.INFO,
                        format=f"%(asctime)s resume-worker[{os.getpid()}] %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("hermes_tray.resume_worker")

    def emit(obj: dict[str, Any], *, detach: bool = False) -> None:
        with out_lock:
            if not out["open"]:
                return
            with contextlib.suppress(OSError, ValueError):
                out["stream"].write(json.dumps(obj) + "\n")
                out["stream"].flush()
            if detach:
                out["open"] = False
                if stdout is None:
                    # Point fd 1 at the log (or nowhere): the parent has gone, and a late print must not
                    # SIGPIPE us.
                    with contextlib.suppress(OSError):
                        from hermes_tray_core import open_private_append

                        try:
                            lfd = open_private_append(log_path) if log_path is not None else -1
                        except OSError:
                            lfd = -1
                        if lfd < 0:
                            lfd = os.open(os.devnull, os.O_WRONLY)
                        os.dup2(lfd, 1)
                        os.close(lfd)

    from hermes_tray_core import Turn

    try:
        req = json.loads(stdin.readline() or "null")
        if not isinstance(req, dict) or not isinstance(req.get("home"), str) or not req["home"]:
            raise ValueError("no home")
        expected = req.get("expected") if isinstance(req.get("expected"), dict) else None
        turn = Turn.of(req["home"], req["session_key"], expected)  # the door: the key is checked here
    except (ValueError, KeyError):  # not a request this command sends (InvalidIdError: an unsafe session key)
        emit({"event": "result", "outcome": "refused", "message": "resume worker: bad request", "exit_code": 1})
        return 1
    with contextlib.suppress(OSError, ValueError):
        stdin.close()

    from hermes_tray_core import StopReason, StopRequest

    stop = StopRequest()
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, lambda *_: stop.request(StopReason.SHUTDOWN))
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, lambda *_: stop.request(StopReason.USER))
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if hasattr(signal, "SIGTSTP"):  # detached from any terminal; a stray Ctrl-Z must not stall the bookkeeping
        signal.signal(signal.SIGTSTP, signal.SIG_IGN)

    from hermes_tray_core import Callbacks, resume_turn

    key = turn.key
    log.info("resuming %s in %s", key, turn.home)

    def dispatched(res: Any) -> None:
        emit({"event": "dispatched", "pid": os.getpid(), "attempt": res.attempt, "continued_by": res.continued_by,
              "gateway_pid": res.gateway_pid, "ran_in": res.ran_in, "backend_pid": res.backend_pid,
              "where": res.where}, detach=True)

    result = resume_turn(turn, listener=Callbacks(on_dispatched=dispatched), stop=stop, via=str(req.get("via") or "cli"))
    log.info("%s: %s (exit %s) %s", key, result.outcome, result.exit_code,
             result.continuation.log_path if result.continuation else "")
    emit({"event": "result", **result.to_dict()})
    return result.exit_code


def main() -> int:
    return run_worker()


if __name__ == "__main__":
    sys.exit(main())
