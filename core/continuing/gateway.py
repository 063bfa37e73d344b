"""Continuing one interrupted turn through Hermes (the tray never calls a model itself): :func:`continue_turn`
in a gateway the tray spawns, :func:`continue_in_backend` inside the user's running backend over its
``/api/ws``.

Hermes' protocol (``tui_gateway``): ``gateway.ready`` first; events ``{"method":"event","params":{"type",
"session_id","payload"}}``; ``session.resume {session_id}`` → ``{session_id: <runtime id>, resumed, running,
…}`` plus ``auto_continue: {attempt, interrupted_at}`` from a Hermes that continues the turn itself (then
``status.update`` "Resuming interrupted turn…", ``message.start`` … ``message.complete``, maybe before the
reply reaches us); ``prompt.submit {session_id, text}`` → ``{status: "streaming"}`` and the turn's events up
to ``message.complete {text, usage, status}`` (an ``error`` event for a failure outside the agent loop;
silence for a turn interrupted before its agent was built); ``session.interrupt``. Which side continues is
decided by capability before anything is sent: an older Hermes gets the note, the tray keeping the turn's
marker for that run (:mod:`core.continuing.handover`). A continuation is stopped after ``idle_timeout``
without a frame, never after a total time.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tray_core.backend.capabilities import backend_capabilities, probe_capabilities
from hermes_tray_core.backend.install import HermesInstall, gateway_environment
from hermes_tray_core.backend.stdio import stdio_session
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
    options: GatewayOptions | None = None,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ContinuationResult:
    """Run one continuation of ``turn`` (as ``attempts + 1``, with the ORIGINAL prompt) in ``install``, and
    report how it ended; never raises for anything Hermes does. A skip that changed the checked entry before
    the older Hermes' swap wins: ``declined``, ``marker_changed`` (:mod:`core.continuing.handover`)."""
    opts = options or GatewayOptions()
    home, key = Path(turn.home), turn.key
    gw_env = dict(env) if env is not None else gateway_environment(home)
    gw_cwd = str(Path.home())
    caps = probe_capabilities(install, env=gw_env, cwd=gw_cwd)
    if log_path is None:
        from hermes_tray_core.stores.logfiles import KEEP_GATEWAY_LOGS, prune_logs

        log_path = gateway_log_path(key)
        prune_logs(log_path.parent, keep=KEEP_GATEWAY_LOGS - 1)  # with this run's: the newest 20 stay
    if caps.auto_continue is None:
        return ContinuationResult(Outcome.ERROR, f"Not resumed: {caps.detail}", log_path=str(log_path))
    gw = stdio_session(install, home, log_path=log_path, env=gw_env, cwd=gw_cwd,
                         start_timeout=opts.start_timeout, idle_timeout=opts.idle_timeout)
    return Run(RunState(home, key, gw, _handover(turn), caps, opts, stop or threading.Event(), listener=Heard(listener),
                        log_path=log_path)).run()


def continue_in_backend(
    turn: Turn,
    backend: BackendEndpoint,
    *,
    options: GatewayOptions | None = None,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    other_backends: tuple[BackendEndpoint, ...] = (),
    connections: dict[int, RpcSession] | None = None,
    left_before: tuple[str, float] | None = None,
) -> ContinuationResult:
    """:func:`continue_turn` in the user's running backend. A session live there or in ``other_backends``
    (a window has it) is left alone; one unusable before anything was resumed gives ``backend_unusable``
    (the caller falls back). ``connections``: sessions the caller opened, by pid (the one used is taken
    out); ``left_before``: the session the tray left there last time, waited for until Hermes lets it go."""
    opts = options or GatewayOptions()
    home, key = Path(turn.home), turn.key
    where = f"in your running Hermes (pid {backend.pid})"
    caps = backend_capabilities(home, backend)
    if caps.auto_continue is None:
        return ContinuationResult(Outcome.ERROR, f"Not resumed {where}: {caps.detail}", where=where,
                                  ran_in=RanIn.RUNNING_BACKEND, backend_pid=backend.pid,
                                  backend_unusable=caps.detail)
    ready = connections.pop(backend.pid, None) if connections else None
    if ready is not None and not ready.alive():
        ready.shutdown(1.0)
        ready = None
    gw = ready if ready is not None else backend.session()
    return Run(RunState(home, key, gw, _handover(turn), caps, opts, stop or threading.Event(),
                        listener=Heard(listener), backend=backend, preopened=ready is not None,
                        other_backends=other_backends, connections=connections,
                        left_before=left_before)).run()


def _handover(turn: Turn) -> MarkerHandover:
    return MarkerHandover(Path(turn.home), turn.key, turn.marker.prompt, turn.attempts, turn.marker.entry)


__all__ = ["Callbacks", "ContinuationResult", "GatewayOptions", "Listener", "Progress", "continue_in_backend",
           "continue_turn", "gateway_log_path"]
