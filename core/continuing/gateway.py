"""Continuing one interrupted turn through a Hermes gateway: capability probe, note or resume,
progress, Stop, outcome.

The tray never calls a model itself: a continuation always runs through Hermes. Finding Hermes is
``core.backend.install``; the JSON-RPC session is ``core.backend.rpc`` over a transport — a spawned stdio
gateway (``core.backend.stdio``) or the running backend's ``/api/ws`` (``core.backend.websocket``).
This module runs the continuation over either and follows the turn to its end.

Protocol facts (read from ``hermes-agent`` 0.19.0 ``tui_gateway``; newer backends add the
auto-continue pieces):

* first frame ``{"method":"event","params":{"type":"gateway.ready","payload":{"skin":…}}}``;
* events ``{"method":"event","params":{"type":T,"session_id":<runtime id>,"payload":…}}``;
* ``session.resume {session_id: <stored id>}`` → ``{session_id: <runtime id>, resumed: <stored id
  (compression tip)>, session_key, message_count, messages, info, running, status}``; a backend
  that continues the turn itself adds ``auto_continue: {attempt, interrupted_at}`` and emits
  ``status.update`` ("Resuming interrupted turn…") then ``message.start`` … ``message.complete``
  — possibly before the response frame reaches us;
* ``prompt.submit {session_id, text}`` → ``{status: "streaming"}``, then ``message.start``,
  ``message.delta``/``thinking.delta``/``tool.*``…, ``message.complete {text, usage, status:
  complete|interrupted|error}``; a turn that fails before or outside the agent loop emits an
  ``error`` event ``{message}`` and no ``message.complete``; a turn interrupted before its agent
  was built ends silently;
* ``session.interrupt {session_id}`` → ``{status: "interrupted"}``;
* closing stdin makes the gateway exit (``[gateway-exit] stdin EOF`` on stderr).

Which side continues is decided by capability *before* anything is sent: the backend's own
installation is asked (a probe subprocess with its interpreter) whether it has
``tui_gateway.turn_marker``. A backend that has it continues by itself or declines; the tray
never submits a note to it. A backend without it gets the continuation note via
``prompt.submit``, and the tray keeps the marker for that run (``attempts + 1``, original prompt,
the gateway child as writer, the original's ``notification_category``) and clears it when the turn
concludes, before the gateway exits — so a crash of the continuation is itself detected and the
retry budget holds. That marker also carries what recognises the note's completion in Hermes'
``state.db`` (:mod:`core.continuing.completion`), so a run whose own process was stopped or killed after Hermes
finished is settled from ``state.db`` by whoever reads it next, never continued twice.

Which installation to run is the caller's choice (``install``); this module never reads the tray's
settings. A continuation is stopped after ``idle_timeout`` seconds without a frame from Hermes (as
Hermes itself watches inactivity), never after a total time.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.backend.install import (  # noqa: F401 - re-exported: one import for callers
    GATEWAY_MODULE,
    HermesInstall,
    HermesSettingsError,
    find_hermes,
    gateway_environment,
    install_from_command,
    launcher_python,
)
from hermes_tray_core.backend.rpc import EOF as _EOF
from hermes_tray_core.backend.rpc import (  # noqa: F401 - re-exported
    RECEIVED,
    GatewayError,
    HermesNotFound,
    RpcError,
    RpcSession,
)
from hermes_tray_core.backend.stdio import StdioTransport, popen_platform_kwargs
from hermes_tray_core.hermes.note import RESUMING_STATUS_TEXT, continuation_note
from hermes_tray_core.keys import validate_session_id
from hermes_tray_core.vocab import ContinuedBy, Finish, NotContinued, Outcome, RanIn, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.backend.endpoint import BackendEndpoint

logger = logging.getLogger(__name__)

MARKER_MODULE = "tui_gateway.turn_marker"

# Outcomes a continuation can have (the vocabulary is vocab.Outcome; these names are kept for callers).
COMPLETED = Outcome.COMPLETED
INTERRUPTED = Outcome.INTERRUPTED
ERROR = Outcome.ERROR
CRASHED = Outcome.CRASHED
TIMED_OUT = Outcome.TIMED_OUT
DECLINED = Outcome.DECLINED
OUTCOMES = (COMPLETED, INTERRUPTED, ERROR, CRASHED, TIMED_OUT, DECLINED)

# Where a continuation ran, by the older names (the enum is vocab.RanIn).
RUNNING_BACKEND, SEPARATE_PROCESS = RanIn.RUNNING_BACKEND, RanIn.SEPARATE_PROCESS
OPEN_IN_APP = "this session is open in your Hermes app"

DEFAULT_READY_TIMEOUT = 90.0  # a cold first start of Hermes compiles and imports a lot
DEFAULT_RPC_TIMEOUT = 60.0
DEFAULT_IDLE_TIMEOUT = 600.0  # Hermes' own inactivity limit for a turn; no total cap
DEFAULT_DECLINE_GRACE = 2.0  # how long a continuation-capable backend may take to show its frames
DEFAULT_STOP_GRACE = 15.0
DEFAULT_START_TIMEOUT = 150.0
DEFAULT_FACTS_INTERVAL = 2.0
PROBE_TIMEOUT = 30.0
ANSWER_CHARS = 4000  # how much of Hermes' final reply a result keeps for the UI


# ── capabilities ───────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Capabilities:
    """What a Hermes installation can do. ``auto_continue`` None = could not be told (refuse)."""

    auto_continue: bool | None
    version: str | None = None
    detail: str = ""
    package_dir: str | None = None


_PROBE = r"""
import importlib.util, json, os, sys
out = {"gateway": False, "turn_marker": False, "version": None, "package_dir": None}
try:
    spec = importlib.util.find_spec("tui_gateway")
    if spec is not None:
        out["package_dir"] = list(spec.submodule_search_locations or [None])[0]
        out["gateway"] = importlib.util.find_spec("tui_gateway.entry") is not None
        out["turn_marker"] = importlib.util.find_spec("tui_gateway.turn_marker") is not None
except Exception as exc:
    out["error"] = repr(exc)
try:
    from importlib.metadata import version
    out["version"] = version("hermes-agent")
except Exception:
    pass
sys.stdout.write(json.dumps(out))
"""

_cap_cache: dict[tuple[str, str, str], tuple[Capabilities, float | None]] = {}
_cap_lock = threading.Lock()


def _dir_mtime(path: str | None) -> float | None:
    if not path:
        return None
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def probe_capabilities(
    install: HermesInstall, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
    timeout: float = PROBE_TIMEOUT, use_cache: bool = True,
) -> Capabilities:
    """Ask the installation itself whether it continues interrupted turns (has ``turn_marker``).

    Runs its interpreter once with the gateway's environment (cached per interpreter + PYTHONPATH
    until the package directory changes, so an upgrade is noticed). Never guesses: anything that
    leaves the answer open is ``auto_continue=None``.
    """
    if install.python is None:
        return Capabilities(None, detail=f"cannot tell what {install.argv[0]} is: set hermes_command to "
                                         "Hermes' Python interpreter")
    env = dict(env) if env is not None else gateway_environment(Path.home() / ".hermes")
    key = (install.python, env.get("PYTHONPATH", ""), cwd or "")
    if use_cache:
        with _cap_lock:
            hit = _cap_cache.get(key)
        if hit is not None and hit[0].package_dir and _dir_mtime(hit[0].package_dir) == hit[1]:
            return hit[0]
    try:
        proc = subprocess.run(  # noqa: S603 - argv list, no shell
            [install.python, "-c", _PROBE], env=env, cwd=cwd, capture_output=True, timeout=timeout,
            stdin=subprocess.DEVNULL, **popen_platform_kwargs(),
        )
    except FileNotFoundError:
        return Capabilities(None, detail=f"Hermes' interpreter {install.python} does not exist")
    except subprocess.TimeoutExpired:
        return Capabilities(None, detail=f"{install.python} did not answer the capability probe in {timeout:.0f}s")
    except OSError as exc:
        return Capabilities(None, detail=f"cannot run {install.python}: {exc.strerror or exc}")
    try:
        data = json.loads(proc.stdout.decode("utf-8", "replace") or "null")
    except ValueError:
        data = None
    if proc.returncode != 0 or not isinstance(data, dict):
        return Capabilities(None, detail=f"capability probe with {install.python} failed (exit {proc.returncode})")
    if not data.get("gateway"):
        return Capabilities(None, version=data.get("version"),
                            detail=f"{install.python} has no {GATEWAY_MODULE}: is Hermes Agent installed there?")
    has = bool(data.get("turn_marker"))
    version = data.get("version") if isinstance(data.get("version"), str) else None
    caps = Capabilities(
        has, version, package_dir=data.get("package_dir"),
        detail=("Hermes continues interrupted turns itself" if has
                else "this Hermes predates auto-continue: the tray submits the continuation note"),
    )
    with _cap_lock:
        _cap_cache[key] = (caps, _dir_mtime(caps.package_dir))
    return caps


def clear_capability_cache() -> None:
    with _cap_lock:
        _cap_cache.clear()


# ── the gateway process ────────────────────────────────────────────────────────────────────────


class GatewayProcess(RpcSession):
    """A spawned stdio gateway and a JSON-RPC session over it (``core.backend.rpc`` over ``core.backend.stdio``)."""

    def __init__(self, install: HermesInstall, home: Path | str, *, log_path: Path | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | None = None) -> None:
        self.install = install
        self.home = Path(home)
        self.stdio = StdioTransport(install.argv, env=dict(env) if env is not None else gateway_environment(home),
                                    cwd=cwd, log_path=log_path, describe=install.describe())
        super().__init__(self.stdio)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.stdio.proc

    @property
    def log_path(self) -> Path | None:
        return self.stdio.log_path



# ── one continuation ───────────────────────────────────────────────────────────────────────────


@dataclass
class Progress:
    """What a continuation is doing, for a progress line: phase, seconds since start, last frame."""

    phase: str  # starting | resuming | running | stopping | finishing
    elapsed: float
    last_frame: str | None = None
    frames: int = 0


@dataclass
class ContinuationResult:
    """How a continuation ended, plus what a user or the journal needs to know about it."""

    outcome: Outcome
    message: str
    continued_by: ContinuedBy | None = None
    runtime_session_id: str | None = None
    attempt: int | None = None
    gateway_pid: int | None = None
    gateway_exit: int | None = None
    log_path: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    status: str | None = None  # message.complete status as Hermes reported it
    dispatched: bool = False  # a continuation turn was started (note submitted / backend continued)
    # Legacy backend: the marker was no longer the entry the caller checked (skipped, changed) when the
    # tray came to take it over, so nothing was submitted (outcome ``declined``).
    marker_changed: bool = False
    # Legacy backend: right before submitting, Hermes (a turn lease, an active-session owner other than our
    # gateway) was found on the session, or whether it is could not be told: nothing was submitted
    # (outcome ``declined``); the reason.
    live_elsewhere: str | None = None
    # Legacy backend: the continuation concluded but the tray's own marker for it could not be removed
    # (why); the leftover entry's ``started_at`` names it (``core.continuing.resume`` journals the outcome under it
    # so it is not offered or continued again).
    marker_left: str | None = None
    marker_left_started_at: float | None = None
    # Hermes' final text for the turn (message.complete), for the UI only: never journalled or logged.
    answer: str | None = None
    # The gateway's stderr log could not be opened (why): Hermes ran without one (``log_path`` None).
    log_problem: str | None = None
    # Where it ran: ``running-backend`` (the user's own ``hermes dashboard``, pid ``backend_pid``, over its
    # /api/ws) or ``separate-process`` (a gateway the tray spawned, ``gateway_pid``); ``where`` says it for a user.
    ran_in: RanIn = RanIn.SEPARATE_PROCESS
    backend_pid: int | None = None
    where: str | None = None
    # The running backend could not be used before anything was sent to a session (why): the caller falls
    # back to a spawned gateway and reports this reason.
    backend_unusable: str | None = None
    # ``interrupted`` because the caller asked to stop it (Stop, Ctrl-C, SIGTERM), not Hermes on its own.
    stopped_by_request: bool = False
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
    """Timeouts and knobs for :func:`continue_turn` (seconds)."""

    ready_timeout: float = DEFAULT_READY_TIMEOUT
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # stop after this long without a frame from Hermes
    decline_grace: float = DEFAULT_DECLINE_GRACE
    stop_grace: float = DEFAULT_STOP_GRACE
    shutdown_grace: float = 5.0
    progress_interval: float = 1.0
    # A backend that said it continues (``auto_continue``) builds its agent first (Hermes waits up to 120 s):
    # how long the tray waits for the continuation's first frame before it says "not started".
    start_timeout: float = DEFAULT_START_TIMEOUT
    # While Hermes sends nothing, how often the tray reads Hermes' facts (state.db, the marker) instead.
    facts_interval: float = DEFAULT_FACTS_INTERVAL


def gateway_log_path(session_key: str) -> Path:
    """Per-continuation stderr log of the gateway, in the tray's log dir (0600). The session key is made
    safe for a file name everywhere (``:`` is valid in a key, not in a Windows file name)."""
    from hermes_tray_core.stores.logfiles import safe_file_part
    from hermes_tray_core.stores.paths import log_dir

    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    # Milliseconds and a per-process count: one tray can start two continuations within a second, and each
    # keeps its own log (the second must never append to or replace the first's).
    return log_dir() / "gateway" / f"{stamp}-{safe_file_part(session_key)}-{os.getpid()}-{next(_LOG_SEQ)}.log"


_LOG_SEQ = itertools.count(1)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _status_of(payload: Any) -> str:
    status = payload.get("status") if isinstance(payload, dict) else None
    return status if isinstance(status, str) else "complete"


def continue_turn(
    home: Path | str,
    session_key: str,
    *,
    original_prompt: str,
    attempts: int,
    install: HermesInstall,
    capabilities: Capabilities | None = None,
    options: GatewayOptions | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_dispatched: Callable[[ContinuationResult], None] | None = None,
    on_spawned: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    expected: Mapping[str, Any] | None = None,
    on_submitting: Callable[[dict[str, Any]], None] | None = None,
) -> ContinuationResult:
    """Run one continuation of ``session_key`` in ``home`` through Hermes and report how it ended.

    ``attempts`` is the marker's count (the continuation runs as ``attempts + 1``);
    ``original_prompt`` the marker's ORIGINAL prompt. ``expected``: the raw marker entry the caller
    checked; on a legacy backend the tray swaps it for its own continuation marker (compare-and-swap)
    right before ``prompt.submit``, and submits nothing if it changed or vanished meanwhile (a skip
    that landed while Hermes was starting): outcome ``declined`` with ``marker_changed``. ``on_spawned(pid)`` fires right after the
    gateway was started (bookkeeping can overlap its start-up); ``on_submitting(marker)`` (legacy
    backends) with the continuation's marker as stored, completion mark included, after it is taken
    and before the note is submitted (the caller journals it); ``on_dispatched`` once the
    continuation turn has started; ``stop`` set → ``session.interrupt`` and the marker is retired.
    ``install`` is the caller's: which Hermes to run (settings, PATH) is not decided here.
    Never raises for anything Hermes does: failures are outcomes with a message.
    """
    validate_session_id(session_key, what="session key")
    opts = options or GatewayOptions()
    home = Path(home)
    gw_env = dict(env) if env is not None else gateway_environment(home)
    gw_cwd = cwd if cwd is not None else str(Path.home())
    caps = capabilities or probe_capabilities(install, env=gw_env, cwd=gw_cwd)
    if log_path is None:
        from hermes_tray_core.stores.logfiles import KEEP_GATEWAY_LOGS, prune_logs

        log_path = gateway_log_path(session_key)
        prune_logs(log_path.parent, keep=KEEP_GATEWAY_LOGS - 1)  # with this run's: the newest 20 stay
    if caps.auto_continue is None:
        return ContinuationResult(ERROR, f"Not resumed: {caps.detail}", log_path=str(log_path))
    run = _Run(home, session_key, original_prompt, attempts, install, caps, opts, on_progress,
               on_dispatched, stop or threading.Event(), log_path, gw_env, gw_cwd)
    run.on_spawned = on_spawned
    run.expected = dict(expected) if expected is not None else None
    run.on_submitting = on_submitting
    return run.run()


def backend_capabilities(home: Path | str, backend: BackendEndpoint) -> Capabilities:
    """What the running backend's own installation can do (cached per interpreter, as :func:`probe_capabilities`)."""
    if backend.python is None:
        return Capabilities(None, detail=f"cannot tell which Python your running Hermes (pid {backend.pid}) runs")
    probe = HermesInstall((backend.python, "-m", GATEWAY_MODULE), backend.python, "running backend")
    return probe_capabilities(probe, env=gateway_environment(Path(home)), cwd=str(Path.home()))


def connect_backend(backend: BackendEndpoint, *, timeout: float = 10.0) -> RpcSession:
    """A JSON-RPC session with a running backend's ``/api/ws``, ready (``gateway.ready``); GatewayError /
    TimeoutError when it cannot be reached. Opening one changes nothing in the backend."""
    from hermes_tray_core.backend.websocket import WebSocketTransport

    s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid,
                                      identity=backend.identity))
    try:
        s.start()
        s.wait_ready(timeout)
    except (GatewayError, TimeoutError):
        s.shutdown(1.0)
        raise
    return s


def continue_in_backend(
    home: Path | str,
    session_key: str,
    backend: BackendEndpoint,
    *,
    original_prompt: str,
    attempts: int,
    capabilities: Capabilities | None = None,
    options: GatewayOptions | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_dispatched: Callable[[ContinuationResult], None] | None = None,
    stop: threading.Event | None = None,
    expected: Mapping[str, Any] | None = None,
    on_submitting: Callable[[dict[str, Any]], None] | None = None,
    on_connected: Callable[[], None] | None = None,
    other_backends: tuple[BackendEndpoint, ...] = (),
    connections: dict[int, RpcSession] | None = None,
) -> ContinuationResult:
    """:func:`continue_turn` inside the user's running backend (``hermes dashboard``), over its ``/api/ws``.

    The continuation runs in the process that owns the session: no second Hermes start-up. Before anything
    is resumed this backend and every one of ``other_backends`` (the other backends serving the home) are
    asked which sessions are live (``session.active_list``): a session live in any of them is open in the
    user's Hermes app and is left alone (``declined``, ``not_continued`` ``open-in-app``). A resume that Hermes
    answers with a session that was already live (a window opened it between the check and the resume) is
    left alone too (``opened-during-check``): nothing is submitted, interrupted or closed. The tray never
    sends ``session.close`` there (it resumes with ``close_on_disconnect``: Hermes closes the session when the
    tray disconnects only if no other client holds it), and ``session.interrupt`` only while the turn running
    is provably its own in a session no other client touched (``left_alone`` says why not). Until a session is
    resumed nothing is changed: a backend that cannot be used (refused, gated, no answer, capabilities unknown) gives
    ``backend_unusable`` (why), and the caller falls back to a spawned gateway. ``connections``: sessions the
    caller already opened (:func:`connect_backend`, by backend pid) while it checked the turn; those used are
    taken out of the dict and closed here, the rest stay the caller's to close.
    """
    validate_session_id(session_key, what="session key")
    opts = options or GatewayOptions()
    home = Path(home)
    where = f"in your running Hermes (pid {backend.pid})"
    if capabilities is None:
        capabilities = backend_capabilities(home, backend)
    if capabilities.auto_continue is None:
        return ContinuationResult(ERROR, f"Not resumed {where}: {capabilities.detail}", ran_in=RanIn.RUNNING_BACKEND,
                                  backend_pid=backend.pid, where=where, backend_unusable=capabilities.detail)
    install = HermesInstall((backend.python or "?",), backend.python, "running backend")
    run = _Run(home, session_key, original_prompt, attempts, install, capabilities, opts, on_progress,
               on_dispatched, stop or threading.Event(), None, {}, str(Path.home()))
    run.backend = backend
    run.expected = dict(expected) if expected is not None else None
    run.on_submitting = on_submitting
    run.on_connected = on_connected
    run.other_backends = tuple(b for b in other_backends if b.pid != backend.pid)
    run.connections = connections if connections is not None else {}
    run.result.ran_in, run.result.backend_pid, run.result.where = RanIn.RUNNING_BACKEND, backend.pid, where
    run.result.log_path = None
    return run.run()


class _Run:
    """State of one :func:`continue_turn` call (split out so each step stays readable)."""

    backend: BackendEndpoint | None = None
    on_connected: Callable[[], None] | None = None  # the running backend answered: bookkeeping may start beside it

    def __init__(self, home: Path, key: str, prompt: str, attempts: int, install: HermesInstall,
                 caps: Capabilities, opts: GatewayOptions, on_progress: Callable[[Progress], None] | None,
                 on_dispatched: Callable[[ContinuationResult], None] | None, stop: threading.Event,
                 log_path: Path | None, env: dict[str, str], cwd: str) -> None:
        self.home, self.key, self.prompt, self.attempts = home, key, prompt, attempts
        self.install, self.caps, self.opts = install, caps, opts
        self.on_progress, self.on_dispatched, self.stop = on_progress, on_dispatched, stop
        self.log_path, self.env, self.cwd = log_path, env, cwd
        self.t0 = time.monotonic()
        self.phase = "starting"
        self.last_frame: str | None = None
        self.frames = 0
        self._last_progress = 0.0
        self.result = ContinuationResult(CRASHED, "", log_path=str(log_path) if log_path else None,
                                         continued_by=ContinuedBy.BACKEND if caps.auto_continue else ContinuedBy.TRAY,
                                         attempt=attempts + 1, where="in a separate Hermes process")
        self.gw: RpcSession | None = None
        self.connections = {}
        self.our_marker: dict[str, Any] | None = None  # the entry we wrote (legacy backends)
        self.sid: str | None = None

    # helpers

    def progress(self, force: bool = False) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last_progress < self.opts.progress_interval:
            return
        self._last_progress = now
        try:
            self.on_progress(Progress(self.phase, now - self.t0, self.last_frame, self.frames))
        except Exception:
            logger.exception("progress callback failed")

    def finish(self, outcome: Outcome, message: str, status: str | None = None) -> ContinuationResult:
        if self.result.marker_left:
            message += (f" The marker could not be removed: {self.result.marker_left}. It is recorded as "
                        f"{outcome} so it is not continued again; remove it with `hermes-tray skip`.")
        self.result.outcome = outcome
        self.result.message = message
        if status is not None:
            self.result.status = status
        return self.result

    expected: dict[str, Any] | None = None

    def _take_marker(self) -> bool:
        """Legacy backend: keep the marker for this run as Hermes would (attempts+1, original prompt, child).

        Compare-and-swap against the entry the caller checked: False (nothing written) when it changed or
        vanished since — a skip won, whoever made it. Raises ``MarkerStoreError`` when it cannot be written.
        """
        from hermes_tray_core.markers.store import MarkerStore, build_entry

        assert self.gw is not None and self.gw.identity is not None and self.mark is not None
        store = MarkerStore(self.home)
        expected = self.expected if self.expected is not None else store.list().get(self.key)
        category = expected.get("notification_category") if isinstance(expected, dict) else None
        entry = {**build_entry(self.prompt, attempts=self.attempts + 1, writer=self.gw.identity,
                               notification_category=category if isinstance(category, str) else None),
                 **self.mark.fields()}
        if expected is None:  # no checked entry and none there (a direct call): record ours
            entry = {**store.record(self.key, self.prompt, attempts=self.attempts + 1, writer=self.gw.identity),
                     **self.mark.fields()}
            expected = store.list().get(self.key)
            if not isinstance(expected, dict):
                return False
        if not store.replace_if_unchanged(self.key, expected, entry):
            return False
        self.our_marker = entry
        return True

    mark: Any = None  # the completion mark (core.continuing.completion.ContinuationMark) of the note about to be sent
    on_submitting: Callable[[dict[str, Any]], None] | None = None

    def _make_mark(self, state_session: str) -> str | None:
        """Read ``state.db``'s message high-water mark for the note's completion mark; why not, or None."""
        from hermes_tray_core.continuing.completion import ContinuationMark
        from hermes_tray_core.hermes.state_db import message_high_water

        after, problem = message_high_water(self.home)
        if after is None:
            return problem or "state.db cannot be read"
        self.mark = ContinuationMark.for_note(state_session, after, continuation_note(self.prompt))
        return None

    def _finished_in_state_db(self) -> bool:
        """Hermes' own record: is our note answered in ``state.db`` (the gateway may have exited after)?"""
        from hermes_tray_core.hermes.state_db import note_answered

        if self.mark is None or self.our_marker is None:
            return False
        state, _why = note_answered(self.home, self.mark.state_session, continuation_note(self.prompt),
                                    self.mark.after_message_id)
        return state == "finished"

    def _live_elsewhere(self) -> str | None:
        """Legacy backend, right before the swap: is a Hermes turn lease or another active-session owner on
        the session now? The caller checked before spawning the gateway, up to ``ready_timeout`` ago. Our
        own gateway registering the session it resumed is not another owner. Returns why not to go on."""
        from hermes_tray_core.hermes.state_db import session_activity

        assert self.gw is not None
        try:
            activity = session_activity(self.home, self.key, ignore_pids=(self.gw.pid,) if self.gw.pid else ())
        except Exception as exc:  # cannot tell: never risk a second turn
            return f"cannot tell whether Hermes is running this session ({exc})"
        if activity.running:
            return activity.reason
        if activity.unsure:
            return f"cannot tell whether Hermes is running this session ({activity.reason})"
        return None

    def _give_marker_back(self) -> None:
        """Nothing reached Hermes after all: put the checked entry back (only over our own)."""
        from hermes_tray_core.markers.store import MarkerStore

        if self.expected is None or self.our_marker is None:
            return
        try:
            if MarkerStore(self.home).replace_if_unchanged(self.key, self.our_marker, self.expected):
                self.our_marker = None
        except Exception:
            logger.exception("could not restore the marker for %s", self.key)

    def _retire_marker(self) -> None:
        """The continuation concluded (or was stopped): its marker must not be continued again."""
        from hermes_tray_core.markers.store import MarkerStore

        try:
            store = MarkerStore(self.home)
            if self.our_marker is not None:
                if not store.remove_if_unchanged(self.key, self.our_marker):
                    logger.warning("marker for %s changed during the continuation; left as is", self.key)
                self.result.marker_left = self.result.marker_left_started_at = None
                return
            # A backend that continued itself retires its own marker; after a Stop we make sure,
            # but only for an entry its gateway (our child) wrote.
            entry = store.list().get(self.key)
            if (isinstance(entry, dict) and self.gw is not None and self.gw.identity is not None
                    and entry.get("writer_pid") == self.gw.identity.pid):
                store.remove_if_unchanged(self.key, entry)
        except Exception as exc:
            logger.exception("could not retire the marker for %s", self.key)
            if self.our_marker is not None:
                # Our entry (attempts + 1, a writer that is about to exit) would read actionable: say so,
                # and let the caller record the turn under the leftover's identity.
                started = self.our_marker.get("started_at")
                self.result.marker_left = (str(exc) or type(exc).__name__)[:300]
                self.result.marker_left_started_at = (
                    float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None)

    def _see_log(self) -> str:
        if self.backend is not None:
            return "See your Hermes app's own logs"
        if self.gw is not None and self.gw.log_problem:
            return f"Its output could not be logged ({self.gw.log_problem})"
        return f"See {self.log_path}"

    def _child_died_marker_note(self) -> str:
        if self.backend is not None and self.gw is not None and self.gw.identity is not None \
                and self.gw.identity.liveness() != WriterState.DEAD:
            # Only the connection ended: the turn may still run there (its marker names that live process).
            return (" Your running Hermes is still up and may still be running the turn; the tray will not continue "
                    "it while that process runs.")
        return (f" The turn stays marked as interrupted (attempt {self.attempts + 1}), so it can be "
                "continued again within the retry budget.")

    connections: dict[int, RpcSession]  # ready sessions the caller opened, by backend pid (continue_in_backend)
    _preopened = False

    def run(self) -> ContinuationResult:
        if self.backend is not None:
            from hermes_tray_core.backend.websocket import WebSocketTransport

            b = self.backend
            ready = self.connections.pop(b.pid, None)
            if ready is not None and ready.alive():
                self.gw, self._preopened = ready, True
            else:
                if ready is not None:
                    ready.shutdown(1.0)
                self.gw = RpcSession(WebSocketTransport(b.host, b.port, b.token, pid=b.pid, identity=b.identity))
        else:
            self.gw = GatewayProcess(self.install, self.home, log_path=self.log_path, env=self.env, cwd=self.cwd)
        try:
            return self._run()
        finally:
            if self._dispatch_thread is not None:
                self._dispatch_thread.join()  # "dispatched" is reported before the outcome, always
            self.phase = "finishing"
            # Any marker still ours here belongs to a run that did not conclude (crash): it stays,
            # with the dead child as writer, so the next scan sees it actionable (attempts + 1).
            if self.backend is not None:
                # Disconnects only: the backend is the user's. The tray never sends session.close there: the
                # session was resumed with close_on_disconnect, so Hermes closes it now only if no other client
                # holds it (0.22 detaches this client alone; 0.19.0 touches only a session whose events still come
                # here). Like a spawned gateway at stdin EOF, a continuation nobody else watches ends with the tray.
                self.gw.shutdown(self.opts.shutdown_grace)
            elif isinstance(self.gw, GatewayProcess) and self.gw.proc is not None:
                self.result.gateway_exit = self.gw.shutdown(self.opts.shutdown_grace)

    # ── what Hermes holds in the running backend ──────────────────────────────────────────────────

    own_touch = 0.0  # wall time of the tray's own latest touch of the session (resume, submit, start frame)
    note_after: int | None = None  # messages.id high-water before the resume (Hermes' own note comes after)

    def _live_row(self) -> dict[str, Any] | None:
        """This session's ``session.active_list`` row in the running backend (GatewayError/TimeoutError when
        it does not answer)."""
        from hermes_tray_core.backend.sessions import session_row

        assert self.gw is not None
        return session_row(self.gw.request("session.active_list", {}, timeout=min(10.0, self.opts.rpc_timeout)),
                           self.key)

    def _live_in_backend(self) -> str | None:
        """Ask the running backend which sessions are live (``session.active_list``); why not to go on, or None.

        Raises GatewayError/TimeoutError when it does not answer (the caller falls back: nothing was sent)."""
        assert self.gw is not None and self.backend is not None
        listed = self.gw.request("session.active_list", {}, timeout=self.opts.rpc_timeout)
        if not isinstance(listed.get("sessions"), list):
            raise GatewayError("its session.active_list answer has no session list")
        from hermes_tray_core.backend.sessions import session_row

        if session_row(listed, self.key) is not None:
            return f"{OPEN_IN_APP} (your running Hermes, pid {self.backend.pid}, has it live)"
        return None

    other_backends: tuple[BackendEndpoint, ...] = ()

    def _live_in_others(self) -> str | None:
        """Every other backend serving this home is asked too: a session live in any of them is never
        continued here. One that cannot be asked is passed over (Hermes' own turn lease and active-session
        registry, checked before, cover it), and said in the log."""
        from hermes_tray_core.backend.sessions import session_row

        for other in self.other_backends:
            s = self.connections.pop(other.pid, None)
            try:
                if s is None or not s.alive():
                    s = connect_backend(other, timeout=min(self.opts.ready_timeout, 10.0))
                listed = s.request("session.active_list", {}, timeout=min(10.0, self.opts.rpc_timeout))
            except (GatewayError, TimeoutError) as exc:
                logger.info("could not ask %s which sessions are live (%s); relying on Hermes' lease and registry",
                            other.describe(), exc)
                continue
            finally:
                if s is not None:
                    s.shutdown(1.0)
            if session_row(listed, self.key) is not None:
                return f"{OPEN_IN_APP} (your running Hermes, pid {other.pid}, has it live)"
        return None

    def _note_text(self) -> str:
        return continuation_note(self.prompt)

    def _note_facts(self) -> tuple[str, str]:
        """Where this run's continuation note stands in ``state.db`` (``core.hermes.state_db.note_state``)."""
        from hermes_tray_core.hermes.state_db import note_state

        if self.mark is not None:
            return note_state(self.home, self.mark.state_session, self._note_text(), self.mark.after_message_id)
        if self.note_after is None:
            return "unknown", "the tray could not read state.db before the resume"
        return note_state(self.home, self.state_session or self.key, self._note_text(), self.note_after)

    state_session: str | None = None

    def _ours_alone(self) -> str | None:
        """Before ``session.interrupt``: is the turn running there provably this run's, in a session no other
        client touched? None when it is; else why the tray leaves the session alone (one line)."""
        if self.backend is None:
            return None  # our own gateway child: nobody else can hold its sessions
        try:
            row = self._live_row()
        except (GatewayError, TimeoutError) as exc:
            return f"your running Hermes did not say who holds the session ({exc})"
        from hermes_tray_core.continuing.facts import touched_by_other

        if row is None or row.get("id") != self.sid:
            return "the session is no longer live under the tray's connection"
        if touched_by_other(row, self.own_touch):
            return "another client (a Hermes window) has used the session since the tray resumed it"
        if str(row.get("status") or "") not in ("working", "starting", "waiting", "streaming"):
            return "Hermes runs no turn in the session any more"
        state, why = self._note_facts()
        if state in ("finished", "superseded", "unknown"):
            return why
        from hermes_tray_core.markers.store import read_turn_marker

        if self.caps.auto_continue and self.gw is not None:
            entry = read_turn_marker(self.home, self.key)
            if entry is not None and entry != self.expected_read and (
                    entry.get("attempts") != self.result.attempt or entry.get("writer_pid") != self.gw.pid):
                return "the marker names another turn: the turn running now is not the tray's continuation"
        elif self.our_marker is not None:
            entry = self._raw_marker()
            if entry != self.our_marker:
                return "the continuation's marker changed: the turn running now is not the tray's"
        return None

    expected_read: dict[str, Any] | None = None  # the checked entry as Hermes' reader reads it

    def _raw_marker(self) -> dict[str, Any] | None:
        from hermes_tray_core.markers.store import MarkerStore

        try:
            entry = MarkerStore(self.home).list().get(self.key)
        except Exception:
            return None
        return entry if isinstance(entry, dict) else None

    def unusable(self, why: str) -> ContinuationResult:
        """The running backend cannot be used and nothing was resumed there: the caller falls back."""
        self.result.backend_unusable = why
        return self.finish(ERROR, f"Not resumed in your running Hermes: {why}.")

    def not_continued(self, code: NotContinued, why: str, *, holder: int | None = None) -> ContinuationResult:
        """Hermes did not continue the turn in this run (``declined``), and why, from its facts."""
        self.result.not_continued = code
        self.result.holder_pid = holder
        if code in (NotContinued.OPEN_IN_APP, NotContinued.OPENED_DURING_CHECK, NotContinued.ANOTHER_OWNER):
            self.result.live_elsewhere = why
        return self.finish(DECLINED, f"Not continued: {why}.")

    # the run

    def _run(self) -> ContinuationResult:
        gw = self.gw
        assert gw is not None
        if self.backend is not None:
            return self._run_in_backend()
        try:
            gw.start()
        except GatewayError as exc:
            return self.finish(ERROR, f"Not resumed: {exc}")
        self.result.gateway_pid = gw.pid
        if gw.log_problem:
            self.result.log_path = None
            self.result.log_problem = gw.log_problem
        if self.on_spawned is not None and gw.pid is not None:
            try:
                self.on_spawned(gw.pid)
            except Exception:
                logger.exception("on_spawned callback failed")
        self.progress(force=True)
        try:
            self.result.timings["ready"] = self._wait(gw.wait_ready, self.opts.ready_timeout, "become ready")
        except TimeoutError as exc:
            return self.finish(TIMED_OUT, f"Not resumed: {exc}. The turn is still pending.")
        except _Stopped:
            self.result.stopped_by_request = True
            return self.finish(INTERRUPTED, "Stopped before Hermes was ready; the turn is still pending.")
        except GatewayError as exc:
            return self.finish(CRASHED, f"Not resumed: {exc}. {self._see_log()}. The turn is still pending.")
        return self._resume()

    def _run_in_backend(self) -> ContinuationResult:
        """Connect, ready, ``session.active_list`` here and in every other backend of the home: until here
        nothing has changed, so any failure falls back."""
        gw = self.gw
        assert gw is not None and self.backend is not None
        self.progress(force=True)
        try:
            if self._preopened:  # connected while the caller re-checked the turn
                self.result.timings["ready"] = 0.0
            else:
                gw.start()
                self.result.timings["ready"] = self._wait(gw.wait_ready, min(self.opts.ready_timeout, 10.0),
                                                          "become ready")
            if self.on_connected is not None:
                try:
                    self.on_connected()
                except Exception:
                    logger.exception("on_connected callback failed")
            t_asked = time.monotonic()
            busy = self._live_in_backend()
            self.result.timings["active_list"] = time.monotonic() - t_asked
        except _Stopped:
            self.result.stopped_by_request = True
            return self.finish(INTERRUPTED, "Stopped before the continuation started; the turn is still pending.")
        except RpcError as exc:
            return self.unusable(f"its /api/ws refused session.active_list ({exc.rpc_message})")
        except (GatewayError, TimeoutError) as exc:
            return self.unusable(str(exc))
        busy = busy or self._live_in_others()
        if busy:
            there = ("; this Hermes continues the interrupted turn there itself" if self.caps.auto_continue
                     else ". Continue it there")
            self.result.live_elsewhere = busy
            self.result.not_continued = NotContinued.OPEN_IN_APP
            return self.finish(DECLINED, f"Not resumed: {busy}{there}; the tray starts nothing for it.")
        return self._resume()

    def _resume(self) -> ContinuationResult:
        gw = self.gw
        assert gw is not None
        self.phase = "resuming"
        self.progress(force=True)
        from hermes_tray_core.hermes.state_db import message_high_water
        from hermes_tray_core.markers.store import read_turn_marker

        if self.caps.auto_continue:
            # Hermes writes its own continuation note after this id: how the tray recognises its end in state.db.
            self.note_after, _problem = message_high_water(self.home)
            self.expected_read = read_turn_marker(self.home, self.key)
        t_resume = time.monotonic()
        sent_at = time.time()
        try:
            # In the user's backend the session is Hermes' to close when the tray disconnects, and only if no other
            # client holds it then (close_on_disconnect: 0.22 skips a session another client is attached to, 0.19.0
            # one whose events went to a newer client) — never the tray's session.close, which ends it for all.
            params: dict[str, Any] = {"session_id": self.key}
            if self.backend is not None:
                params["close_on_disconnect"] = True
            waiter = gw.send("session.resume", params)
            # Not cut short by a stop: a backend may already be continuing; its turn is stopped properly below.
            resumed = self._wait(lambda t: gw.result_of("session.resume", waiter, t), self.opts.rpc_timeout,
                                 "answer session.resume", stoppable=False)
        except TimeoutError as exc:
            return self.finish(TIMED_OUT, f"Not resumed: {exc}. The turn is still pending.")
        except RpcError as exc:
            return self.finish(ERROR, f"Not resumed: Hermes refused the session ({exc.rpc_message}).")
        except GatewayError as exc:
            return self.finish(CRASHED, f"Not resumed: {exc}. {self._see_log()}.")
        from hermes_tray_core.continuing.facts import live_reuse, wall_time_of

        self.result.timings["resume"] = gw.received.get("session.resume", time.monotonic()) - t_resume
        self.own_touch = wall_time_of(gw.received.get("session.resume"))
        sid = resumed.get("session_id")
        if not isinstance(sid, str) or not sid:
            return self.finish(ERROR, "Not resumed: Hermes' session.resume answer had no session id.")
        self.sid = self.result.runtime_session_id = sid
        tip = resumed.get("resumed")
        self.state_session = tip if isinstance(tip, str) and tip else self.key
        if self.backend is not None and live_reuse(resumed, sent_at):
            # Live there already: a window opened it between the tray's check and its resume. Hermes handed the
            # tray that live session; nothing is submitted, interrupted or closed, and the session is left to the
            # window (0.19.0 sends its events to the latest resumer: the window gets them back at its next prompt).
            return self.not_continued(NotContinued.OPENED_DURING_CHECK,
                                      f"{OPEN_IN_APP}: a Hermes window opened it while the tray was checking; "
                                      "nothing was sent")
        if resumed.get("running") and not resumed.get("auto_continue"):
            return self.not_continued(NotContinued.OPEN_IN_APP, "this Hermes reports the session is already running")
        if self.caps.auto_continue:
            return self._follow_backend(resumed, t_resume)
        return self._submit_note(t_resume, self.state_session)

    def _submit_note(self, t_resume: float, state_session: str) -> ContinuationResult:
        gw = self.gw
        assert gw is not None and self.sid is not None
        if self.stop.is_set():
            self.result.stopped_by_request = True
            return self.finish(INTERRUPTED, "Stopped before the continuation was submitted; the turn is still "
                                            "pending.")
        busy = self._live_elsewhere()
        if busy:
            self.result.live_elsewhere = busy
            return self.finish(DECLINED, f"Not resumed: {busy}; nothing was submitted. Continue it in the Hermes "
                                         "window that has it open.")
        if self.backend is not None:
            # Before prompt.submit: the session the tray resumed is live under the tray's own runtime id, and
            # no other client resumed it or submitted to it since (its last_active would say so).
            from hermes_tray_core.continuing.facts import touched_by_other

            try:
                row = self._live_row()
            except (GatewayError, TimeoutError) as exc:
                return self.finish(ERROR, f"Not resumed: your running Hermes did not say who holds the session "
                                          f"({exc}); nothing was submitted. The turn is still pending.")
            if row is None or row.get("id") != self.sid or touched_by_other(row, self.own_touch):
                return self.not_continued(NotContinued.OPENED_DURING_CHECK,
                                          f"{OPEN_IN_APP}: a Hermes window opened it while the tray was resuming; "
                                          "nothing was submitted")
        unreadable = self._make_mark(state_session)
        if unreadable:
            return self.finish(ERROR, f"Not resumed: Hermes' state.db cannot be read ({unreadable}), so the tray "
                                      "could not tell later whether the continuation finished; nothing was "
                                      "submitted. The turn is still pending.")
        t_marker = time.monotonic()
        # Hermes records a turn's marker when its submit arrives; the tray does it for a backend that
        # cannot, just BEFORE submitting: a compare-and-swap of the entry that was checked for this
        # run's own (attempts + 1, original prompt, this child as writer). If a skip (or anything)
        # changed the entry since, nothing is submitted — the skip won. Once swapped, a skip of the
        # old entry fails, so exactly one of the two wins. (A crash after the swap reads right: the
        # entry names this child, so a dead child reads dead and the budget counts this attempt.)
        from hermes_tray_core.markers.store import MarkerStoreError

        try:
            taken = self._take_marker()
        except (MarkerStoreError, ValueError) as exc:
            logger.error("could not record the continuation marker for %s: %s", self.key, exc)
            return self.finish(ERROR, f"Not resumed: the tray could not keep the turn marker for the "
                                      f"continuation ({exc}); nothing was submitted. The turn is still pending.")
        t_submit = time.monotonic()
        self.result.timings["marker"] = t_submit - t_marker
        if not taken:
            self.result.marker_changed = True
            return self.finish(DECLINED, "Not resumed: the interrupted turn was skipped or changed while Hermes "
                                         "was starting; nothing was submitted.")
        if self.on_submitting is not None and self.our_marker is not None:
            try:  # the caller journals the mark: bookkeeping, never a reason not to go on
                self.on_submitting(dict(self.our_marker))
            except Exception:
                logger.exception("on_submitting callback failed")
        try:
            waiter = gw.send("prompt.submit", {"session_id": self.sid, "text": continuation_note(self.prompt)})
        except GatewayError as exc:
            self._give_marker_back()
            return self.finish(CRASHED, f"Not resumed: {exc}. The turn is still pending.")
        try:
            self._wait(lambda t: gw.result_of("prompt.submit", waiter, t), self.opts.rpc_timeout,
                       "accept the continuation")
        except _Stopped:
            pass  # _follow sends the interrupt and retires the marker
        except (GatewayError, TimeoutError) as exc:
            if not gw.alive():
                return self.finish(CRASHED, f"Hermes exited while the continuation was submitted ({exc})."
                                   + self._child_died_marker_note())
            self._retire_marker()
            return self.finish(ERROR, f"Not resumed: Hermes did not take the continuation ({exc}).")
        from hermes_tray_core.continuing.facts import wall_time_of

        self.own_touch = max(self.own_touch, wall_time_of(gw.received.get("prompt.submit")))
        self.result.timings["submit"] = gw.received.get("prompt.submit", time.monotonic()) - t_submit
        self.result.dispatched = True
        self._dispatched()
        return self._follow(t_resume)

    def _follow_backend(self, resumed: dict[str, Any], t_resume: float) -> ContinuationResult:
        """A backend with the feature: it continues (or declines) by itself; the tray never submits anything.

        With ``auto_continue`` in the reply Hermes has scheduled the continuation (it builds its agent first),
        but the turn is only "running" once its first frame arrives here: a losing resume gets the same reply
        and is refused silently (another live owner), so until that frame the tray watches the marker and the
        active-session registry, within ``start_timeout``. Without it, only frames already in flight can say it
        continues after all (``decline_grace``); else the marker before and after says why not."""
        desc = resumed.get("auto_continue")
        promised = isinstance(desc, dict)
        if isinstance(desc, dict):
            attempt = desc.get("attempt")
            if isinstance(attempt, int) and not isinstance(attempt, bool):
                self.result.attempt = attempt
            self.phase = "starting"
            self.progress(force=True)
        from hermes_tray_core.continuing.facts import continued_elsewhere, wall_time_of, why_not_continued

        limit = self.opts.start_timeout if promised else self.opts.decline_grace
        deadline = time.monotonic() + limit
        next_facts = time.monotonic() + min(0.5, self.opts.facts_interval)
        while time.monotonic() < deadline:
            ev = self._next_event(0.1)
            if ev is _EOF:
                return self.finish(CRASHED, f"{_sentence(self.gw.transport.ended('right after resuming the session'))}."
                                   if self.gw is not None else "Hermes exited right after resuming the session.")
            if isinstance(ev, dict) and self._is_continuation_frame(ev):
                self.own_touch = max(self.own_touch, wall_time_of(ev.get(RECEIVED)))
                self.result.dispatched = True
                self._dispatched()
                self._pushback = ev
                return self._follow(t_resume)
            if self.stop.is_set() and promised:
                return self._stop_before_start()
            if time.monotonic() >= next_facts:
                next_facts = time.monotonic() + min(0.5, self.opts.facts_interval)
                elsewhere = continued_elsewhere(self.home, self.key, self.gw.pid if self.gw else None, self.expected)
                if elsewhere is not None:
                    return self.not_continued(elsewhere[0], elsewhere[1], holder=elsewhere[2])
                if promised:
                    state, _why = self._note_facts()
                    if state == "finished":  # answered, and none of it came here: another process ran it
                        return self.not_continued(NotContinued.ANOTHER_OWNER,
                                                  "another Hermes process continued it, and it finished")
                self.progress()
        if promised:
            return self.not_continued(NotContinued.NOT_STARTED,
                                      f"Hermes said it would continue the turn but started nothing within "
                                      f"{self.opts.start_timeout:g}s")
        code, why = why_not_continued(self.home, self.key, self.expected, self.gw.pid if self.gw else None)
        return self.not_continued(code, why)

    def _stop_before_start(self) -> ContinuationResult:
        """Stop asked while Hermes builds the continuation's agent: interrupt it (only in a session the tray
        holds alone: Hermes then never starts it, and retires its marker itself)."""
        why = self._ours_alone_before_start()
        self.result.stopped_by_request = True
        if why:
            self.result.left_alone, self.result.finish = why, Finish.LEFT_ALONE
            return self.finish(INTERRUPTED, f"Not stopped by the tray: {why}. Stop it in Hermes if it runs.")
        with contextlib.suppress(GatewayError, TimeoutError):
            assert self.gw is not None
            self.gw.request("session.interrupt", {"session_id": self.sid}, timeout=min(10.0, self.opts.rpc_timeout))
        return self.finish(INTERRUPTED, "Stopped before Hermes started the continuation; it will not be continued "
                                        "again.")

    def _ours_alone_before_start(self) -> str | None:
        if self.backend is None:
            return None
        from hermes_tray_core.continuing.facts import touched_by_other

        try:
            row = self._live_row()
        except (GatewayError, TimeoutError) as exc:
            return f"your running Hermes did not say who holds the session ({exc})"
        if row is None or row.get("id") != self.sid or touched_by_other(row, self.own_touch):
            return "another client (a Hermes window) has used the session since the tray resumed it"
        return None

    def _is_continuation_frame(self, ev: dict[str, Any]) -> bool:
        if ev.get("session_id") not in (None, self.sid):
            return False
        t = ev.get("type")
        if t == "message.start":
            return True
        payload = ev.get("payload")
        return t == "status.update" and isinstance(payload, dict) and \
            RESUMING_STATUS_TEXT.rstrip("…") in str(payload.get("text") or "")

    _pushback: Any = None
    on_spawned: Callable[[int], None] | None = None

    def _next_event(self, timeout: float) -> Any:
        if self._pushback is not None:
            ev, self._pushback = self._pushback, None
            return ev
        assert self.gw is not None
        try:
            return self.gw.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _dispatched(self) -> None:
        """Report the start; the callback (journal, UI) runs beside the frame loop, never delaying it."""
        self.phase = "running"
        self.progress(force=True)
        if self.on_dispatched is None:
            return
        callback, snapshot = self.on_dispatched, self.result

        def call() -> None:
            try:
                callback(snapshot)
            except Exception:
                logger.exception("on_dispatched callback failed")

        self._dispatch_thread = threading.Thread(target=call, name="on-dispatched", daemon=True)
        self._dispatch_thread.start()

    _dispatch_thread: threading.Thread | None = None

    def _finished_elsewhere(self) -> ContinuationResult | None:
        """The events stopped coming here (a window resumed the session: 0.19.0 sends them to the newest client):
        Hermes' state.db says whether the turn finished. The tray's marker is retired; Hermes retires its own."""
        if self.backend is None:
            return None
        state, why = self._note_facts()
        if state != "finished":
            return None
        # Hermes writes the reply a moment before it sends message.complete: if the stream is still ours, that
        # frame is on its way — follow it instead of reading the end from state.db.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            ev = self._next_event(0.1)
            if ev is _EOF:
                break
            if isinstance(ev, dict) and ev.get("session_id") in (None, self.sid):
                if ev.get("session_id") == self.sid:
                    self._pushback = ev
                    return None
        self._retire_marker()
        self.result.finish = Finish.STATE_DB
        return self.finish(COMPLETED, "The interrupted turn was continued and completed; it is now open in your "
                                      f"Hermes window, which took over its events ({why}).", "complete")

    def _follow(self, t_resume: float) -> ContinuationResult:
        """Follow this session's frames to the end of the turn (or a stop / time-out / crash)."""
        gw = self.gw
        assert gw is not None
        deadline = time.monotonic() + self.opts.idle_timeout  # moves on with every frame of this session
        next_facts = time.monotonic() + self.opts.facts_interval
        stop_deadline: float | None = None
        acked_at: float | None = None
        interrupt_waiter: queue.Queue[dict[str, Any]] | None = None
        while True:
            now = time.monotonic()
            if stop_deadline is None and (self.stop.is_set() or now >= deadline):
                self._timed_out = not self.stop.is_set()
                done = self._finished_elsewhere()
                if done is not None:
                    return done
                why = self._ours_alone()
                if why:  # never interrupt a session the tray does not provably hold alone: say so instead
                    return self._left_alone(why)
                self.phase = "stopping"
                self.progress(force=True)
                stop_deadline = now + self.opts.stop_grace
                with contextlib.suppress(GatewayError):
                    interrupt_waiter = gw.send("session.interrupt", {"session_id": self.sid})
            if interrupt_waiter is not None and acked_at is None:
                with contextlib.suppress(queue.Empty):
                    if "result" in interrupt_waiter.get_nowait():
                        acked_at = now
                        self._retire_marker()  # a confirmed Stop retires the marker at once, as Hermes does
            if stop_deadline is not None:
                quiet_end = acked_at is not None and not self._turn_seen and now - acked_at >= 1.0
                if quiet_end or now >= stop_deadline:
                    # Interrupted before its agent ran (Hermes then ends the turn without a frame),
                    # or Hermes did not confirm in time: either way the turn is over for us.
                    self._retire_marker()
                    return self._stopped_result()
            ev = self._next_event(0.2)
            if ev is None:
                if stop_deadline is None and time.monotonic() >= next_facts:
                    next_facts = time.monotonic() + self.opts.facts_interval
                    done = self._finished_elsewhere()  # quiet here: did Hermes finish it for another client?
                    if done is not None:
                        return done
                self.progress()
                continue
            if ev is _EOF:
                if stop_deadline is not None:
                    self._retire_marker()
                    return self._stopped_result()
                if self._finished_in_state_db():  # it exited after answering: Hermes' record says done
                    self._retire_marker()
                    self.result.finish = Finish.STATE_DB
                    return self.finish(COMPLETED, "The interrupted turn was continued and completed (Hermes "
                                                  "exited right after; its state.db holds the reply).", "complete")
                return self.finish(CRASHED, f"{_sentence(gw.transport.ended('mid-turn'))}. "
                                            f"{self._see_log()}." + self._child_died_marker_note())
            if ev.get("session_id") not in (None, self.sid):
                continue
            etype = str(ev.get("type") or "")
            if stop_deadline is None:
                deadline = time.monotonic() + self.opts.idle_timeout
                next_facts = time.monotonic() + self.opts.facts_interval
            self.frames += 1
            self.last_frame = etype
            if etype == "message.start":
                self._turn_seen = True
                arrived = float(ev.get(RECEIVED) or time.monotonic())
                self.result.timings.setdefault("first_frame", arrived - t_resume)
                self.result.timings.setdefault("message_start_at", arrived)
            elif etype in ("message.delta", "thinking.delta", "tool.start", "tool.progress"):
                self._turn_seen = True
            self.progress(force=etype == "message.start")
            if etype == "message.complete":
                status = _status_of(ev.get("payload"))
                payload = ev.get("payload")
                if isinstance(payload, dict) and isinstance(payload.get("text"), str):
                    self.result.answer = payload["text"][:ANSWER_CHARS]
                self._retire_marker()
                self.result.finish = Finish.STREAM
                if stop_deadline is not None:
                    return self._stopped_result(status)
                if status == "interrupted":
                    return self.finish(INTERRUPTED, "The continuation was interrupted before it finished.", status)
                if status == "error":
                    return self.finish(ERROR, "Hermes finished the continuation with an error.", status)
                return self.finish(COMPLETED, "The interrupted turn was continued and completed.", status)
            if etype == "error":
                payload = ev.get("payload") if isinstance(ev.get("payload"), dict) else {}
                msg = str(payload.get("message") or "unknown error")[:300]
                self._retire_marker()
                return self.finish(ERROR, f"Hermes reported an error during the continuation: {msg}", "error")

    _turn_seen = False
    _timed_out = False

    def _left_alone(self, why: str) -> ContinuationResult:
        """The tray does not interrupt: the turn running there is not provably its own, alone. Said as it is."""
        self.result.left_alone, self.result.finish = why, Finish.LEFT_ALONE
        state, _facts = self._note_facts()
        if state == "superseded":
            return self.finish(INTERRUPTED, f"The continuation was ended in Hermes: {why}. The tray sent no stop.",
                               "interrupted")
        if self._timed_out:
            return self.finish(TIMED_OUT, f"Hermes sent the tray nothing for {self.opts.idle_timeout:g}s, and the tray "
                                          f"left the session alone: {why}. It will not continue the turn again.")
        self.result.stopped_by_request = True
        return self.finish(INTERRUPTED, f"Not stopped by the tray: {why}. Stop it in your Hermes window if it "
                                        "still runs.")

    def _stopped_result(self, status: str = "interrupted") -> ContinuationResult:
        if status == "complete":  # Hermes finished the turn before the stop reached it
            return self.finish(COMPLETED, "The interrupted turn was continued and completed (it finished before "
                                          "the stop reached Hermes).", status)
        if self._timed_out:
            return self.finish(TIMED_OUT, f"Hermes showed no activity for {self.opts.idle_timeout:g}s, so the "
                                          "continuation was stopped; it will not be continued again.", status)
        self.result.stopped_by_request = True
        return self.finish(INTERRUPTED, "Stopped; the continuation was interrupted and will not be continued "
                                        "again.", status)

    def _wait(self, fn: Callable[[float], Any], timeout: float, what: str, *, stoppable: bool = True) -> Any:
        """Call a blocking ``fn(timeout)`` in slices so a stop request is noticed while waiting."""
        deadline = time.monotonic() + timeout
        while True:
            if stoppable and self.stop.is_set():
                raise _Stopped
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Hermes did not {what} within {timeout:g}s")
            try:
                return fn(min(0.25, left))
            except TimeoutError:
                pass
            self.progress()


class _Stopped(Exception):
    pass


__all__ = [
    "COMPLETED", "CRASHED", "DECLINED", "ERROR", "INTERRUPTED", "OUTCOMES", "TIMED_OUT",
    "Capabilities", "ContinuationResult", "GatewayError", "GatewayOptions", "GatewayProcess", "backend_capabilities", "connect_backend",
    "HermesInstall", "HermesNotFound", "HermesSettingsError", "Progress", "RpcError", "clear_capability_cache",
    "continue_turn",
    "find_hermes", "gateway_environment", "install_from_command", "launcher_python", "probe_capabilities",
]
