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
    """A stop that says why: the user's Stop interrupts the continuation for good, a shutdown only stops
    following it. A plain ``set()`` is the user's Stop."""

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
    reason: StopReason | None = getattr(stop, "reason", StopReason.USER) if stop.is_set() else None
    return reason


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
    # an older Hermes, ``declined``, nothing submitted: the checked entry changed (a skip won), or Hermes
    marker_changed: bool = False
    live_elsewhere: str | None = None  # was found on the session right before (why)
    marker_left: str | None = None  # older Hermes: the run's own marker could not be removed (why)
    marker_left_started_at: float | None = None  # that marker's: the outcome is recorded under it too
    answer: str | None = None  # Hermes' final text, for the UI only: never recorded or logged
    log_problem: str | None = None  # why the gateway's stderr log could not be opened (Hermes ran without)
    ran_in: RanIn = RanIn.SEPARATE_PROCESS
    backend_pid: int | None = None
    where: str | None = None  # where it ran, for a user
    backend_unusable: str | None = None  # why the running backend was not used (the caller falls back)
    stopped_by: StopReason | None = None  # ``interrupted`` / ``detached`` because the caller asked
    note_mark: tuple[str, int] | None = None  # (stored session, messages.id before the note): its end, later
    left_session: str | None = None  # the runtime session left in the user's running Hermes, for later
    not_continued: NotContinued | None = None  # why Hermes did not continue it here, from its facts
    holder_pid: int | None = None  # another Hermes process that continues it or holds the session
    finish: Finish | None = None  # how the tray learnt the end
    left_alone: str | None = None  # why the tray sent no ``session.interrupt``

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
    """Per-continuation stderr log of the gateway (0600), its name safe on Windows too."""
    from hermes_tray_core.stores.logfiles import safe_file_part
    from hermes_tray_core.stores.paths import log_dir

    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    # milliseconds and a count: two continuations within a second each keep their own log
    return log_dir() / "gateway" / f"{stamp}-{safe_file_part(session_key)}-{os.getpid()}-{next(_LOG_SEQ)}.log"


_LOG_SEQ = itertools.count(1)
