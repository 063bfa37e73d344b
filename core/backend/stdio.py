"""The stdio transport: a gateway child (``python -m tui_gateway.entry``) the tray starts for one run, reached
through a keeper (:mod:`core.backend.keeper`) so that the tray's end is never the turn's. Hermes' stderr goes
straight to a private log file, so nothing Hermes prints can block it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from hermes_tray_core.backend.install import HermesInstall, gateway_environment
from hermes_tray_core.backend.rpc import GatewayError, HermesNotFound, RpcSession, Transport
from hermes_tray_core.process.child_env import dll_directory_reset
from hermes_tray_core.process.identity import identity_of

logger = logging.getLogger(__name__)

HELLO_TIMEOUT = 30.0  # the keeper says which gateway it started within this (it starts in ~20 ms)


def popen_platform_kwargs(*, own_session: bool = False) -> dict[str, Any]:
    """No console window; ``own_session``: a Ctrl-C or hang-up in our terminal is ours to handle, not the
    keeper's nor Hermes'."""
    if os.name == "nt":  # Windows-only constants (typeshed has them on win32 only)
        return {"creationflags": getattr(subprocess, "CREATE_NO_WINDOW", 0)
                | (getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if own_session else 0)}
    return {"start_new_session": True} if own_session else {}


@cache
def keeper_argv() -> tuple[str, ...]:
    """The keeper after ``python -I -S``: its file, or its code with ``-c`` where it is no file (a zip)."""
    from importlib import resources

    keeper = resources.files("hermes_tray_core.backend").joinpath("keeper.py")
    if isinstance(keeper, Path) and keeper.is_file():
        return (str(keeper),)
    return ("-c", keeper.read_text(encoding="utf-8"))


class StdioTransport(Transport):

    kind = "stdio"

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None,
                 log_path: Path | None = None, describe: str | None = None, python: str | None = None,
                 start_timeout: float = 150.0, idle_timeout: float = 900.0) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self.describe = describe or " ".join(self.argv)
        self.python = python or self.argv[0]
        self.limits = {"start_timeout": start_timeout, "idle_timeout": idle_timeout}
        self.proc: subprocess.Popen[bytes] | None = None  # the keeper

    def _open_log(self) -> Any:
        """A log that cannot be opened is no reason not to run: stderr then goes nowhere (``log_problem``)."""
        if self.log_path is None:
            return None
        from hermes_tray_core.stores.fsutil import ensure_private_dir
        from hermes_tray_core.stores.logfiles import open_private_append

        try:
            ensure_private_dir(self.log_path.parent)
            return os.fdopen(open_private_append(self.log_path), "ab")
        except OSError as exc:
            logger.warning("cannot open the gateway log %s (%s); Hermes' stderr is discarded", self.log_path, exc)
            self.log_problem = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
            self.log_path = None
            return None

    def open(self) -> None:
        log = self._open_log()
        config = json.dumps({"argv": list(self.argv), "cwd": self.cwd, **self.limits})
        self.opened_at = time.monotonic()
        try:
            with dll_directory_reset():  # a frozen Windows tray's bundle must not be Hermes' DLL directory
                self.proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                    [self.python, "-I", "-S", *keeper_argv(), config], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log if log is not None else subprocess.DEVNULL, env=self.env,
                    cwd=self.cwd, close_fds=True, **popen_platform_kwargs(own_session=True))
        except FileNotFoundError as exc:
            raise HermesNotFound(f"cannot start Hermes: {self.python} does not exist") from exc
        except OSError as exc:
            raise GatewayError(f"cannot start Hermes ({self.describe}): {exc.strerror or exc}") from exc
        finally:
            if log is not None:
                log.close()
        said = self._hello()
        if "pid" not in said:
            self.close(0.0)
            if said.get("missing"):
                raise HermesNotFound(f"cannot start Hermes: {self.argv[0]} does not exist")
            raise GatewayError(f"cannot start Hermes ({self.describe}): {said.get('error') or 'no answer'}")
        self.pid = int(said["pid"])
        self.identity = identity_of(self.pid)

    def _hello(self) -> dict[str, Any]:
        """The keeper's first line (empty when it said nothing in time)."""
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        if os.name != "nt" and not select.select([out], [], [], HELLO_TIMEOUT)[0]:
            return {}
        try:
            said = json.loads(out.readline()).get("keeper")
        except (ValueError, AttributeError):
            return {}
        return said if isinstance(said, dict) else {}

    def lines(self) -> Iterator[bytes]:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            yield from iter(self.proc.stdout.readline, b"")
        except (OSError, ValueError):
            return

    def write_line(self, data: bytes) -> None:
        if self.proc is None or self.proc.stdin is None:
            raise GatewayError("gateway is not running")
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None  # the keeper ends with the gateway

    def returncode(self) -> int | None:
        """The gateway's exit code, as the keeper passes it on (128 + n for signal n)."""
        if self.proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=0.5)
        return None

    def _tell(self, order: str, **args: float) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(json.dumps({"keeper": order, **args}).encode() + b"\n")
            proc.stdin.flush()
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()

    def close(self, grace: float = 5.0) -> int | None:
        """The run is over: the keeper ends the gateway; its exit code. Idempotent."""
        proc = self.proc
        if proc is None:
            return None
        self._tell("end", grace=grace)
        try:
            proc.wait(timeout=3 * max(grace, 5.0) + 5)  # the keeper's own three steps, and a margin
        except subprocess.TimeoutExpired:
            logger.warning("the keeper of gateway %s did not end it; killing both", self.pid)
            self._kill_keeper(proc)
        with contextlib.suppress(OSError, ValueError):
            if proc.stdout is not None:
                proc.stdout.close()
        return proc.returncode

    def detach(self) -> None:
        """The tray goes away while the turn may run: the keeper carries it to its end. No wait."""
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()

    def kill(self) -> None:
        """SIGKILL the gateway and its process group now, by the keeper."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self._tell("kill")
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._kill_keeper(proc)

    def _kill_keeper(self, proc: subprocess.Popen[bytes]) -> None:
        """Last resort: SIGKILL the keeper (Linux then kills the gateway), else the gateway's group too."""
        if os.name != "nt" and not sys.platform.startswith("linux") and self.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)


def stdio_session(install: HermesInstall, home: Path | str, *, log_path: Path | None = None,
                  env: Mapping[str, str] | None = None, cwd: str | None = None,
                  start_timeout: float = 150.0, idle_timeout: float = 900.0) -> RpcSession:
    """A session with a gateway child of ``install`` (in Hermes' environment for ``home`` unless ``env``)."""
    return RpcSession(StdioTransport(install.argv, env=dict(env) if env is not None else gateway_environment(home),
                                     cwd=cwd, log_path=log_path, describe=install.describe(), python=install.python,
                                     start_timeout=start_timeout, idle_timeout=idle_timeout))


__all__ = ["StdioTransport", "keeper_argv", "popen_platform_kwargs", "stdio_session"]
