"""The state of one continuation and what every step of it uses: progress, the result, Hermes' events,
stoppable waits, and what the running backend says about the session (held by ``core.continuing.run``'s
``Run`` and its ``Follow``; the older Hermes' marker is its ``handover``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.backend.capabilities import Capabilities
from hermes_tray_core.backend.rpc import GatewayError, RpcSession
from hermes_tray_core.backend.sessions import RUNNING_STATUSES, session_row
from hermes_tray_core.continuing.facts import raw_entry, touched_by_other
from hermes_tray_core.continuing.handover import MarkerHandover
from hermes_tray_core.continuing.listener import Heard
from hermes_tray_core.continuing.results import ContinuationResult, GatewayOptions, Progress, stop_reason
from hermes_tray_core.keys import SessionKey
from hermes_tray_core.vocab import ContinuedBy, Finish, NotContinued, Outcome, RanIn, StopReason, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.backend.endpoint import BackendEndpoint

logger = logging.getLogger(__name__)

OPEN_IN_APP = "this session is open in your Hermes app"


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


class Stopped(Exception):
    """A stop was asked while the run waited for Hermes."""


class RunState:
    """One continuation: where it runs (``gw``; the user's backend when ``backend``), the checked marker
    (``handover``), who is told as it goes (``listener``) and what it saw so far."""

    def __init__(self, home: Path, key: SessionKey, gw: RpcSession, handover: MarkerHandover, caps: Capabilities,
                 opts: GatewayOptions, stop: threading.Event, *, listener: Heard | None = None,
                 backend: BackendEndpoint | None = None, log_path: Path | None = None, preopened: bool = False,
                 other_backends: tuple[BackendEndpoint, ...] = (), connections: dict[int, RpcSession] | None = None,
                 left_before: tuple[str, float] | None = None) -> None:
        self.home, self.key, self.gw, self.handover = home, key, gw, handover
        self.caps, self.opts, self.stop, self.backend, self.log_path = caps, opts, stop, backend, log_path
        self.listener = listener if listener is not None else Heard()  # Heard(): nobody
        self.preopened, self.left_before = preopened, left_before
        self.other_backends = tuple(b for b in other_backends if backend is None or b.pid != backend.pid)
        self.connections = connections if connections is not None else {}
        self.t0 = time.monotonic()
        self.phase = "starting"
        self.last_frame: str | None = None
        self.frames = 0
        self._last_progress = 0.0
        self.result = ContinuationResult(Outcome.CRASHED, "", log_path=str(log_path) if log_path else None,
                                         continued_by=ContinuedBy.BACKEND if caps.auto_continue else ContinuedBy.TRAY,
                                         attempt=handover.attempts + 1, where="in a separate Hermes process")
        if backend is not None:
            self.result.ran_in, self.result.backend_pid = RanIn.RUNNING_BACKEND, backend.pid
            self.result.where = f"in your running Hermes (pid {backend.pid})"
        self.sid: str | None = None  # the runtime session id Hermes' resume answered
        self.state_session: str | None = None  # the stored session the resume landed on (compression tip)
        self.own_touch = 0.0  # wall time of the tray's own latest touch of the session (resume, submit, start frame)
        self.note_after: int | None = None  # messages.id high-water before the resume (Hermes' own note comes after)
        self.expected_read: dict[str, Any] | None = None  # the checked entry as Hermes' reader reads it
        self.pushback: Any = None  # one event read ahead, handed out again by next_event
        self.dispatch_thread: threading.Thread | None = None
        self.turn_seen = False
        self.timed_out = False

    def progress(self, force: bool = False) -> None:
        if not self.listener:
            return
        now = time.monotonic()
        if not force and now - self._last_progress < self.opts.progress_interval:
            return
        self._last_progress = now
        self.listener.progress(Progress(self.phase, now - self.t0, self.last_frame, self.frames, self.result.ran_in))

    def finish(self, outcome: Outcome, message: str, status: str | None = None) -> ContinuationResult:
        if self.result.marker_left:
            message += (f" The marker could not be removed: {self.result.marker_left}. It is recorded as "
                        f"{outcome} so it is not continued again; remove it with `hermes-tray skip`.")
        self.result.outcome = outcome
        self.result.message = message
        if status is not None:
            self.result.status = status
        return self.result

    def not_started(self, before: str) -> ContinuationResult:
        """Stopped before anything reached Hermes: a Stop ends the turn, a shutdown leaves it waiting."""
        self.result.stopped_by = stop_reason(self.stop) or StopReason.USER
        if self.result.stopped_by == StopReason.SHUTDOWN:
            return self.finish(Outcome.INTERRUPTED, f"hermes-tray quit before {before}; the turn is still waiting.")
        self._retire_marker(stopped=True)  # else Hermes' own session.resume would continue it when a window opens it
        return self.finish(Outcome.INTERRUPTED, f"Stopped before {before}; it is not resumed again.")

    def detach(self) -> ContinuationResult:
        """The tray quits mid-run: the turn goes on as without the tray (docs/architecture.md, "Crash-only"),
        its end read from Hermes at the next scan, never recorded as stopped by you."""
        self.result.stopped_by = StopReason.SHUTDOWN
        self.result.finish = Finish.DETACHED
        return self.finish(Outcome.DETACHED, "hermes-tray stopped following the continuation; it goes on "
                                             f"{self.result.where or 'in your running Hermes'}.")

    def _see_log(self) -> str:
        if self.backend is not None:
            return "See your Hermes app's own logs"
        if self.gw.transport.log_problem:
            return f"Its output could not be logged ({self.gw.transport.log_problem})"
        return f"See {self.log_path}"

    def _child_died_marker_note(self) -> str:
        if self.backend is not None and self.gw.transport.identity is not None \
                and self.gw.transport.identity.liveness() != WriterState.DEAD:
            return (" Your running Hermes is still up and may still be running the turn; the tray will not continue "
                    "it while that process runs.")
        return (f" The turn stays marked as interrupted (attempt {self.handover.attempts + 1}), so it can be "
                "continued again within the retry budget.")

    def _retire_marker(self, *, stopped: bool = False) -> None:
        """The continuation concluded or was stopped: its marker must not be continued again."""
        writer = self.gw.transport.identity.pid if self.gw.transport.identity is not None else None
        left = self.handover.retire(writer, stopped=stopped)
        self.result.marker_left, self.result.marker_left_started_at = left if left else (None, None)

    def live_row(self, gw: RpcSession | None = None, timeout: float = 10.0) -> dict[str, Any] | None:
        """The session's row in ``gw``'s (else the run's) ``session.active_list``; None: not live there."""
        gw = gw or self.gw
        listed = gw.request("session.active_list", {}, timeout=min(timeout, self.opts.rpc_timeout))
        if not isinstance(listed.get("sessions"), list):
            raise GatewayError("its session.active_list answer has no session list")
        return session_row(listed, self.key)

    def _note_facts(self) -> tuple[str, str]:
        from hermes_tray_core.hermes.state_db import note_state

        mark = self.handover.mark
        if mark is not None:
            return note_state(self.home, mark.state_session, self.handover.note, mark.after_message_id)
        if self.note_after is None:
            return "unknown", "the tray could not read state.db before the resume"
        return note_state(self.home, self.state_session or self.key, self.handover.note, self.note_after)

    def _ours_alone(self, *, started: bool = True) -> str | None:
        """Before ``session.interrupt``: None when the turn running there is provably this run's (``started``;
        else the session only), in a session no other client touched; else why the tray leaves it alone."""
        if self.backend is None:
            return None  # our own gateway child: nobody else can hold its sessions
        try:
            row = self.live_row()
        except (GatewayError, TimeoutError) as exc:
            return f"your running Hermes did not say who holds the session ({exc})"
        other = "another client (a Hermes window) has used the session since the tray resumed it"
        if row is None or row.get("id") != self.sid:
            return "the session is no longer live under the tray's connection" if started else other
        if touched_by_other(row, self.own_touch):
            return other
        if not started:
            return None
        if str(row.get("status") or "") not in RUNNING_STATUSES:
            return "Hermes runs no turn in the session any more"
        state, why = self._note_facts()
        if state in ("finished", "superseded", "unknown"):
            return why
        from hermes_tray_core.markers.turn_marker import read_turn_marker

        if self.caps.auto_continue:
            entry = read_turn_marker(self.home, self.key)
            if entry is not None and entry != self.expected_read and (
                    entry.get("attempts") != self.result.attempt or entry.get("writer_pid") != self.gw.transport.pid):
                return "the marker names another turn: the turn running now is not the tray's continuation"
        elif self.handover.ours is not None and raw_entry(self.home, self.key) != self.handover.ours:
            return "the continuation's marker changed: the turn running now is not the tray's"
        return None

    def unusable(self, why: str) -> ContinuationResult:
        self.result.backend_unusable = why
        return self.finish(Outcome.ERROR, f"Not resumed in your running Hermes: {why}.")

    def not_continued(self, code: NotContinued, why: str, *, holder: int | None = None) -> ContinuationResult:
        self.result.not_continued = code
        self.result.holder_pid = holder
        if code in (NotContinued.OPEN_IN_APP, NotContinued.OPENED_DURING_CHECK, NotContinued.ANOTHER_OWNER):
            self.result.live_elsewhere = why
        return self.finish(Outcome.DECLINED, f"Not continued: {why}.")

    def next_event(self, timeout: float) -> Any:
        if self.pushback is not None:
            ev, self.pushback = self.pushback, None
            return ev
        try:
            return self.gw.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _dispatched(self) -> None:
        """Report the start; the callback runs beside the frame loop, never delaying it."""
        self.phase = "running"
        self.progress(force=True)
        if not self.listener:
            return
        self.dispatch_thread = threading.Thread(target=self.listener.dispatched, args=(self.result,),
                                                name="on-dispatched", daemon=True)
        self.dispatch_thread.start()

    def _wait(self, fn: Callable[[float], Any], timeout: float, what: str, *, stoppable: bool = True) -> Any:
        """A blocking ``fn(timeout)`` in slices, so that a stop is noticed."""
        deadline = time.monotonic() + timeout
        while True:
            if stoppable and self.stop.is_set():
                raise Stopped
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Hermes did not {what} within {timeout:g}s")
            with contextlib.suppress(TimeoutError):
                return fn(min(0.25, left))
            self.progress()
