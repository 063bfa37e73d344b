"""The stdio transport: a gateway child (``python -m tui_gateway.entry``) the tray spawns for one run.

Its stderr goes straight to a private log file, so nothing Hermes prints can block it; it runs in a
process group of its own, so stopping it stops the tool subprocesses Hermes started too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_tray_core.backend.install import HermesInstall, gateway_environment
from hermes_tray_core.backend.rpc import GatewayError, HermesNotFound, RpcSession, Transport
from hermes_tray_core.process.child_env import dll_directory_reset
from hermes_tray_core.process.identity import identity_of

logger = logging.getLogger(__name__)


def popen_platform_kwargs() -> dict[str, Any]:
    if os.name == "nt":
        return {"creationflags": getattr(subprocess, "CREATE_NO_WINDOW", 0)}
    return {}


class StdioTransport(Transport):
    """One spawned gateway child; lines over its stdin/stdout."""

    kind = "stdio"

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None,
                 log_path: Path | None = None, describe: str | None = None) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self.describe = describe or " ".join(self.argv)
        self.proc: subprocess.Popen[bytes] | None = None

    def open(self) -> None:
        """Spawn the gateway. Its stderr goes to ``log_path``; a log that cannot be opened (disk full, no
        permission, a symlink planted there) is no reason not to run: stderr then goes nowhere, and
        ``log_problem`` says why (``log_path`` becomes None)."""
        log = None
        if self.log_path is not None:
            from hermes_tray_core.stores.fsutil import ensure_private_dir
            from hermes_tray_core.stores.logfiles import open_private_append

            try:
                ensure_private_dir(self.log_path.parent)
                log = os.fdopen(open_private_append(self.log_path), "ab")
            except OSError as exc:
                logger.warning("cannot open the gateway log %s (%s); Hermes' stderr is discarded", self.log_path, exc)
                self.log_problem = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
                self.log_path = None
        kwargs = popen_platform_kwargs()
        if os.name == "nt":  # Windows-only constant: read like CREATE_NO_WINDOW above (typeshed has it on win32 only)
            kwargs["creationflags"] = kwargs.get("creationflags", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        else:
            kwargs["start_new_session"] = True  # a Ctrl-C in our terminal is ours to handle, not Hermes'
        self.opened_at = time.monotonic()
        try:
            with dll_directory_reset():  # a frozen Windows tray's bundle must not be Hermes' DLL directory
                self.proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                    list(self.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=log if log is not None else subprocess.DEVNULL, env=self.env, cwd=self.cwd,
                    close_fds=True, **kwargs,
                )
        except FileNotFoundError as exc:
            raise HermesNotFound(f"cannot start Hermes: {self.argv[0]} does not exist") from exc
        except OSError as exc:
            raise GatewayError(f"cannot start Hermes ({self.describe}): {exc.strerror or exc}") from exc
        finally:
            if log is not None:
                log.close()
        self.pid = self.proc.pid
        self.identity = identity_of(self.proc.pid)

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
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        if self.proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=0.5)
        return None

    def _signal(self, *, kill: bool) -> None:
        """SIGTERM (``kill`` False) or SIGKILL the gateway and, on POSIX, its whole process group.

        The gateway starts in a session of its own (``start_new_session``), so its process group id is its
        pid and holds the subprocesses Hermes started for tools: signalling the group stops them too
        instead of orphaning them. Only called while the gateway has not been reaped, so the group id
        cannot belong to anyone else. Windows: the gateway process alone (terminate/kill)."""
        proc = self.proc
        if proc is None:
            return
        if os.name == "nt":
            with contextlib.suppress(OSError):
                if kill:
                    proc.kill()
                else:
                    proc.terminate()
            return
        sig = signal.SIGKILL if kill else signal.SIGTERM
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass  # the group is gone already
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, sig)

    def close(self, grace: float = 5.0) -> int | None:
        """Close stdin → wait → terminate → wait → kill (terminate and kill go to the gateway's process
        group, its tool subprocesses included). Returns the exit code; idempotent."""
        proc = self.proc
        if proc is None:
            return None
        if proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()
        for step in ("wait", "terminate", "kill"):
            if step == "terminate":
                self._signal(kill=False)
            elif step == "kill":
                self._signal(kill=True)
            try:
                proc.wait(timeout=grace if step != "kill" else 10)
                break
            except subprocess.TimeoutExpired:
                logger.warning("gateway %s did not exit after %s; escalating", proc.pid, step)
        with contextlib.suppress(OSError, ValueError):
            if proc.stdout is not None:
                proc.stdout.close()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the gateway and its process group (its tool subprocesses)."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal(kill=True)


class GatewayProcess(RpcSession):
    """A spawned stdio gateway and a JSON-RPC session over it."""

    def __init__(self, install: HermesInstall, home: Path | str, *, log_path: Path | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | None = None) -> None:
        self.stdio = StdioTransport(install.argv, env=dict(env) if env is not None else gateway_environment(home),
                                    cwd=cwd, log_path=log_path, describe=install.describe())
        super().__init__(self.stdio)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.stdio.proc

    @property
    def log_path(self) -> Path | None:
        return self.stdio.log_path


__all__ = ["GatewayProcess", "StdioTransport", "popen_platform_kwargs"]
