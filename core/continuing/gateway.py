"""Continuing one interrupted turn through Hermes: :func:`continue_turn` in a gateway the tray spawns,
:func:`continue_in_backend` inside the user's running backend (over its ``/api/ws``).

The tray never calls a model itself: a continuation always runs through Hermes. The run is
``core.continuing.run`` (start, resume, note) and ``core.continuing.follow`` (to the end); what it reports,
``core.continuing.results``; the capability probe, ``core.backend.capabilities``; the JSON-RPC session,
``core.backend.rpc`` over ``core.backend.stdio`` or ``core.backend.websocket``.

Protocol (``hermes-agent`` 0.19.0 ``tui_gateway``; newer backends add auto-continue): the first frame is the
``gateway.ready`` event; events are ``{"method":"event","params":{"type","session_id","payload"}}``;
``session.resume {session_id: <stored id>}`` → ``{session_id: <runtime id>, resumed, running, …}``, plus
``auto_continue: {attempt, interrupted_at}`` from a backend that continues the turn itself (it then emits
``status.update`` "Resuming interrupted turn…", ``message.start`` … ``message.complete``, possibly before the
reply reaches us); ``prompt.submit {session_id, text}`` → ``{status: "streaming"}``, then the turn's events up
to ``message.complete {text, usage, status: complete|interrupted|error}`` (a turn that fails outside the agent
loop sends an ``error`` event instead; one interrupted before its agent was built ends silently);
``session.interrupt {session_id}``; closing a spawned gateway's stdin makes it exit.

Which side continues is decided by capability before anything is sent: a backend with
``tui_gateway.turn_marker`` continues by itself or declines, and the tray never submits a note to it; an older
one gets the continuation note via ``prompt.submit``, the tray keeping the turn's marker for that run
(``core.continuing.handover``), so a crash of the continuation is itself detected, the retry budget holds, and
a run whose own process died after Hermes finished is settled from ``state.db``
(``core.continuing.completion``), never continued twice. Which installation to run is the caller's choice
(``install``); this module never reads the tray's settings. A continuation is stopped after ``idle_timeout``
seconds without a frame from Hermes (as Hermes itself watches inactivity), never after a total time.
"""

from __future__ import annotations

import subprocess  # noqa: F401 - tests patch ``gateway.subprocess.run`` to count capability probes
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

# Re-exported (one import for the shell and the tests): finding Hermes, what it can do, the run's types.
from hermes_tray_core.backend.capabilities import (  # noqa: F401
    Capabilities,
    backend_capabilities,
    clear_capability_cache,
    probe_capabilities,
)
from hermes_tray_core.backend.install import (  # noqa: F401
    HermesInstall,
    HermesSettingsError,
    find_hermes,
    gateway_environment,
    install_from_command,
)
from hermes_tray_core.backend.rpc import HermesNotFound  # noqa: F401
from hermes_tray_core.backend.stdio import GatewayProcess
from hermes_tray_core.continuing.handover import MarkerHandover
from hermes_tray_core.continuing.listener import Callbacks, Heard, Listener
from hermes_tray_core.continuing.results import ContinuationResult, GatewayOptions, Progress, gateway_log_path
from hermes_tray_core.continuing.run import Run
from hermes_tray_core.continuing.runstate import RunState
from hermes_tray_core.turn import Turn
from hermes_tray_core.vocab import Outcome, RanIn

if TYPE_CHECKING:
    from hermes_tray_core.backend.endpoint import BackendEndpoint
    from hermes_tray_core.backend.rpc import RpcSession


def continue_turn(
    turn: Turn,
    install: HermesInstall,
    *,
    capabilities: Capabilities | None = None,
    options: GatewayOptions | None = None,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> ContinuationResult:
    """Run one continuation of ``turn`` through Hermes and report how it ended. Never raises for anything Hermes
    does: failures are outcomes with a message.

    The turn's marker gives the attempts (it runs as ``attempts + 1``) and the ORIGINAL prompt; its entry, when
    the caller checked one (``turn.marker.raw``), is the one expected: on a legacy backend the tray swaps it for
    the run's own marker right before ``prompt.submit`` and submits nothing if it changed or vanished meanwhile
    (a skip that landed while Hermes was starting): ``declined`` with ``marker_changed``. The ``listener``
    (:mod:`core.continuing.listener`) hears ``connected(pid)`` right after the gateway started (bookkeeping
    overlaps its start-up), ``submitting(marker)`` (legacy) with the run's marker as stored, completion mark
    included, before the note is submitted (the caller journals it), ``dispatched`` once the continuation turn
    started. ``stop`` set → ``session.interrupt`` and the marker is retired. ``install`` is the caller's: which
    Hermes to run (settings, PATH) is not decided here.
    """
    opts = options or GatewayOptions()
    home, key = Path(turn.home), turn.key
    gw_env = dict(env) if env is not None else gateway_environment(home)
    gw_cwd = cwd if cwd is not None else str(Path.home())
    caps = capabilities or probe_capabilities(install, env=gw_env, cwd=gw_cwd)
    if log_path is None:
        from hermes_tray_core.stores.logfiles import KEEP_GATEWAY_LOGS, prune_logs

        log_path = gateway_log_path(key)
        prune_logs(log_path.parent, keep=KEEP_GATEWAY_LOGS - 1)  # with this run's: the newest 20 stay
    if caps.auto_continue is None:
        return ContinuationResult(Outcome.ERROR, f"Not resumed: {caps.detail}", log_path=str(log_path))
    gw = GatewayProcess(install, home, log_path=log_path, env=gw_env, cwd=gw_cwd,
                        start_timeout=opts.start_timeout, idle_timeout=opts.idle_timeout)
    return Run(RunState(home, key, gw, _handover(turn), caps, opts, stop or threading.Event(), listener=Heard(listener),
                        log_path=log_path)).run()


def continue_in_backend(
    turn: Turn,
    backend: BackendEndpoint,
    *,
    capabilities: Capabilities | None = None,
    options: GatewayOptions | None = None,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    other_backends: tuple[BackendEndpoint, ...] = (),
    connections: dict[int, RpcSession] | None = None,
    left_before: tuple[str, float] | None = None,
) -> ContinuationResult:
    """:func:`continue_turn` inside the user's running backend (``hermes dashboard``), over its ``/api/ws``.

    The continuation runs in the process that owns the session: no second Hermes start-up. Before anything is
    resumed this backend and every one of ``other_backends`` (the others serving the home) are asked which
    sessions are live (``session.active_list``): a session live in any of them is open in the user's Hermes app
    and left alone (``declined``, ``not_continued`` ``open-in-app``); so is one Hermes' resume shows already live
    (a window opened it in between: ``opened-during-check``): nothing is submitted, interrupted or closed. The
    tray never sends ``session.close`` there nor asks Hermes to close the session when it disconnects (Hermes parks
    it and lets it go once idle, so a turn running there outlives the tray: ``RunState.detach``), and
    ``session.interrupt`` only while the turn running is provably its own in a session no other client touched
    (``left_alone`` says why not). A backend that cannot be
    used before a session is resumed (refused, gated, no answer, capabilities unknown) gives ``backend_unusable``
    (why): the caller falls back to a spawned gateway. ``connections``: sessions the caller already opened
    (``connect_backend``, by backend pid); the one used is taken out of the dict, the rest stay the caller's.
    ``left_before``: the session the tray left in this backend last time (runtime id, when): found live, idle and
    untouched since, it is waited for until Hermes lets it go, instead of read as open in a Hermes window. The
    ``listener`` hears ``connected(None)`` once the backend answered.
    """
    opts = options or GatewayOptions()
    home, key = Path(turn.home), turn.key
    where = f"in your running Hermes (pid {backend.pid})"
    if capabilities is None:
        capabilities = backend_capabilities(home, backend)
    if capabilities.auto_continue is None:
        return ContinuationResult(Outcome.ERROR, f"Not resumed {where}: {capabilities.detail}", where=where,
                                  ran_in=RanIn.RUNNING_BACKEND, backend_pid=backend.pid,
                                  backend_unusable=capabilities.detail)
    connections = connections if connections is not None else {}
    ready = connections.pop(backend.pid, None)
    preopened = ready is not None and ready.alive()
    if ready is not None and not preopened:
        ready.shutdown(1.0)
    gw = ready if ready is not None and preopened else backend.session()
    return Run(RunState(home, key, gw, _handover(turn), capabilities, opts, stop or threading.Event(),
                        listener=Heard(listener), backend=backend, preopened=preopened, other_backends=other_backends,
                        connections=connections, left_before=left_before)).run()


def _handover(turn: Turn) -> MarkerHandover:
    """The turn's marker as a legacy continuation takes it over: its ORIGINAL prompt and attempts as Hermes reads
    them, and the entry the caller checked (None: none was read, nothing to compare)."""
    return MarkerHandover(Path(turn.home), turn.key, turn.marker.prompt, turn.attempts, turn.marker.entry)


__all__ = [
    "Callbacks", "Listener",
    "Capabilities", "ContinuationResult", "GatewayOptions", "GatewayProcess", "HermesInstall", "HermesNotFound",
    "HermesSettingsError", "Progress", "clear_capability_cache", "continue_in_backend", "continue_turn",
    "find_hermes", "gateway_environment", "gateway_log_path", "install_from_command", "probe_capabilities",
]
