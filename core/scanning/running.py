"""What runs now, as one scan sees it: the Hermes processes, the running Hermes apps and the sessions they
have open, the active-session registry — each looked at once per scan, and only when a verdict depends on it (a
process-table look costs more than the rest of a scan)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hermes_tray_core.hermes import paths as hermes_paths
from hermes_tray_core.hermes.homes import Home
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import ProcessKind

if TYPE_CHECKING:
    from hermes_tray_core.hermes.processes import HermesProcesses
    from hermes_tray_core.hermes.state_db import OwnerView

__all__ = ["RunningNow"]

logger = get_logger(__name__)


class RunningNow:
    """One scan's look at what runs."""

    def __init__(self, process_finder: Callable[[], HermesProcesses] | None = None) -> None:
        self._process_finder = process_finder
        self._procs: HermesProcesses | Exception | None = None
        self._apps: HermesProcesses | Exception | None = None  # the running Hermes apps alone
        self._open: dict[str, dict[str, int]] = {}  # home -> {session key: pid}
        self._registry: dict[str, bool] = {}  # home -> may its active-session registry exist?

    def writer_turn(self, home: Home, turn: Turn) -> Any:
        """A live writer that is a running backend of ``home`` and says it runs no turn for the session: its
        answer; else None (the live writer stands)."""
        pid = turn.marker.writer_pid
        procs = self.processes()
        if isinstance(procs, Exception) or pid is None or not any(
                p.pid == pid and p.kind == ProcessKind.DASHBOARD for p in procs.serving(home.path)):
            return None
        from hermes_tray_core.backend.sessions import ask_writer

        answer = ask_writer(home.path, turn.key, pid, turn.marker.writer_start, processes=procs)
        if answer.state != "none":
            return None
        # a claim held: one of ours is between handing that backend the marker and its submit (or unsure)
        from hermes_tray_core.continuing import claim as exactly_once

        return None if exactly_once.is_held(turn.home, turn.key) else answer

    def owner(self, home: Home, key: str) -> OwnerView | None:
        """The active-session registry's view of ``key`` (None: no registry file, nobody claims any session)."""
        where = str(home.path)
        if where not in self._registry:
            # a registry that provably does not exist claims no session: skip 32 failed opens per home
            try:
                os.lstat(hermes_paths.active_sessions_file(home.path))
                self._registry[where] = True
            except FileNotFoundError:
                self._registry[where] = False
            except OSError:
                self._registry[where] = True
        if not self._registry[where]:
            return None
        from hermes_tray_core.hermes.state_db import active_session_owner

        return active_session_owner(home.path, key)

    def open_sessions(self, home: Home) -> dict[str, int]:
        """The sessions the running Hermes of ``home`` has open (``core.backend.sessions``), once per scan."""
        key = str(home.path)
        if key not in self._open:
            from hermes_tray_core.backend import sessions as backend_sessions
            from hermes_tray_core.hermes.processes import HermesProcesses
            from hermes_tray_core.process.identity import process_errors

            if self._procs is None and self._apps is None:  # the apps alone: cheaper than :meth:`processes`
                try:  # no app runs (a few ms to tell): no process-table look, for any home of this scan
                    self._apps = HermesProcesses([]) if backend_sessions.none_running() else HermesProcesses.now(
                        kinds=(ProcessKind.DASHBOARD,))
                except process_errors() as exc:
                    self._apps = exc
            procs = self._procs if self._procs is not None else self._apps
            found: dict[str, int] = {}
            if not isinstance(procs, Exception):
                try:
                    found = backend_sessions.open_in_backends(home.path, procs)
                except Exception as exc:  # boundary: a nicety: the resume path asks again
                    logger.info("cannot ask the running Hermes of %s: %s", home.path, exc)
            self._open[key] = found
        return self._open[key]

    def processes(self) -> HermesProcesses | Exception:
        """One look at the process table per scan (only when a verdict depends on it)."""
        if self._procs is None:
            from hermes_tray_core.hermes.processes import HermesProcesses

            try:
                self._procs = self._process_finder() if self._process_finder else HermesProcesses.now()
            except Exception as exc:  # boundary: a caller's process finder (or the table), kept as the answer
                self._procs = exc
        return self._procs

    def backend(self, home: Home) -> tuple[str, str]:
        """(``live`` / ``none`` / ``unknown``, which process) — does a live Hermes backend serve ``home``?"""
        procs = self.processes()
        if isinstance(procs, Exception):
            return "unknown", f"cannot list processes: {procs}"
        return procs.backend_state(home.path)

    def holder(self, home: Home) -> tuple[int, float | None] | None:
        """(pid, start time) of the live Hermes process serving ``home`` (watched: its exit changes verdicts)."""
        procs = self.processes()
        serving = [] if isinstance(procs, Exception) else procs.serving(home.path)
        return (serving[0].pid, serving[0].start_time) if serving else None

    def webui_server(self, home: Home) -> tuple[str, str]:
        procs = self.processes()
        if isinstance(procs, Exception):
            return "unknown", f"cannot list processes: {procs}"
        servers = procs.webui_servers(home.webui_session_dir.parent)
        return ("live", f"pid {servers[0].pid}") if servers else ("none", "")
