"""What one continuation reports: its progress, its result, and the knobs it runs with."""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hermes_tray_core.backend.rpc import DEFAULT_RPC_TIMEOUT
from hermes_tray_core.vocab import ContinuedBy, Finish, NotContinued, Outcome, RanIn, StopReason

__all__ = ["ANSWER_CHARS", "ContinuationResult", "GatewayOptions", "Progress", "StopRequest", "gateway_log_path",
           "stop_reason"]

ANSWER_CHARS = 4000  # how much of Hermes' final reply a result keeps for the UI


class StopRequest(threading.Event):
    """A stop that says why: the user's Stop interrupts the continuation for good, a shutdown only stops following
    it. A plain ``set()`` is the user's Stop."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = StopReason.USER

    def request(self, reason: StopReason) -> None:
        """The first request wins (a Stop on its way stays a Stop when the tray then quits)."""
        if not self.is_set():
            self.reason = reason
        self.set()


def stop_reason(stop: threading.Event) -> StopReason | None:
    """Why ``stop`` was set (None: it was not)."""
    if not stop.is_set():
        return None
    reason = getattr(stop, "reason", StopReason.USER)
    return reason if isinstance(reason, StopReason) else StopReason.USER


@dataclass
class Progress:
    """What a continuation is doing, for a progress line: phase, seconds since start, last frame, and where it runs."""

    phase: str  # waiting-for-backend | starting | waiting-for-release | resuming | running | stopping | finishing
    elapsed: float
    last_frame: str | None = None
    frames: int = 0
    ran_in: RanIn | None = None  # None: not known yet (the backend is still being looked for)


@dataclass
class ContinuationResult:
    """How a continuation ended, plus what a user or the journal needs to know about it."""

    outcome: Outcome
    message: str
    continued_by: ContinuedBy | None = None
    attempt: int | None = None
    gateway_pid: int | None = None
    gateway_exit: int | None = None
    log_path: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    status: str | None = None  # message.complete status as Hermes reported it
    dispatched: bool = False  # a continuation turn was started (note submitted / backend continued)
    # Legacy backend, ``declined``, nothing submitted: the checked entry changed (a skip won) when the tray came
    # to take it over; or Hermes was found on the session (or could not be told not to be) right before (why).
    marker_changed: bool = False
    live_elsewhere: str | None = None
    # Legacy backend: the tray's own marker for the run could not be removed (why); the leftover's ``started_at``
    # names it (the outcome is journalled under it too, so it is not offered or continued again).
    marker_left: str | None = None
    marker_left_started_at: float | None = None
    # Hermes' final text for the turn (message.complete), for the UI only: never journalled or logged.
    answer: str | None = None
    # The gateway's stderr log could not be opened (why): Hermes ran without one (``log_path`` None).
    log_problem: str | None = None
    # Where it ran (pid ``backend_pid`` or ``gateway_pid``); ``where`` says it for a user.
    ran_in: RanIn = RanIn.SEPARATE_PROCESS
    backend_pid: int | None = None
    where: str | None = None
    # Why the running backend could not be used (nothing was sent there): the caller falls back to a gateway.
    backend_unusable: str | None = None
    # ``interrupted`` (or ``detached``) because the caller asked (StopReason.USER: Stop, Ctrl-C; SHUTDOWN: the
    # tray quit), not Hermes on its own.
    stopped_by: StopReason | None = None
    # Where state.db will show this continuation's note answered: (stored session, messages.id before it). With the
    # note's digest it is journalled at dispatch, so the turn's end can be read from Hermes after our process died.
    note_mark: tuple[str, int] | None = None
    # The runtime session the tray resumed in the user's running Hermes and left there (Hermes lets it go once idle
    # with no client): journalled, so a later resume knows that live session for the tray's own leftover.
    left_session: str | None = None
    # Why Hermes did not continue the turn in this run (``declined``): a reason code read from Hermes' facts.
    not_continued: NotContinued | None = None
    # Another Hermes process that continues it or holds the session (the losing side of a race), when known.
    holder_pid: int | None = None
    # How the tray learnt the end (its own stream, Hermes' state.db, or not at all: it left the session alone).
    finish: Finish | None = None
    # Why the tray sent no ``session.interrupt`` (the running turn was not provably its own, alone): one line.
    left_alone: str | None = None

@dataclass
class GatewayOptions:
    """Timeouts and knobs for a continuation (seconds)."""

    ready_timeout: float = 90.0  # a cold first start of Hermes compiles and imports a lot
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT
    idle_timeout: float = 600.0  # stop after this long without a frame from Hermes (its own limit); no total cap
    decline_grace: float = 2.0  # how long a continuation-capable backend may take to show its frames
    stop_grace: float = 15.0
    shutdown_grace: float = 5.0
    progress_interval: float = 1.0
    start_timeout: float = 150.0  # for the first frame once Hermes said it continues (it builds its agent: ≤120 s)
    facts_interval: float = 2.0  # while Hermes sends nothing, how often its facts (state.db, marker) are read
    backend_start_wait: float = 10.0  # a running Hermes of the home that is still starting is waited for this long
    release_wait: float = 30.0  # for Hermes to let go of a session the tray itself left there (its grace is 20 s)


def gateway_log_path(session_key: str) -> Path:
    """Per-continuation stderr log of the gateway (0600), its name safe everywhere (``:`` is not, on Windows)."""
    from hermes_tray_core.stores.logfiles import safe_file_part
    from hermes_tray_core.stores.paths import log_dir

    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    # milliseconds and a count: two continuations within a second each keep their own log
    return log_dir() / "gateway" / f"{stamp}-{safe_file_part(session_key)}-{os.getpid()}-{next(_LOG_SEQ)}.log"


_LOG_SEQ = itertools.count(1)
