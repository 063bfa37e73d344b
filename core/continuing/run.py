"""Starting one continuation: spawn a gateway or connect to the user's running backend, check nothing holds
the session there, ``session.resume``, and on a Hermes without auto-continue take the marker over and submit
the note. Until a session is resumed nothing is changed, so a running backend that cannot be used gives
``backend_unusable`` and the caller falls back to a spawned gateway. Why the tray never closes a session in
the user's backend, nor resumes with ``close_on_disconnect``: docs/architecture.md, "Crash-only".
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hermes_tray_core.backend.rpc import GatewayError, RpcError
from hermes_tray_core.backend.sessions import RUNNING_STATUSES
from hermes_tray_core.backend.stdio import StdioTransport
from hermes_tray_core.continuing.facts import TOUCH_SLACK, live_reuse, touched_by_other, wall_time_of
from hermes_tray_core.continuing.follow import Follow
from hermes_tray_core.continuing.results import ContinuationResult
from hermes_tray_core.continuing.runstate import OPEN_IN_APP, RunState, Stopped
from hermes_tray_core.numbers import strict_finite
from hermes_tray_core.vocab import Finish, NotContinued, Outcome

__all__ = ["Run"]

logger = logging.getLogger(__name__)


class Run:
    """One continuation, from the start to its result: its state (``s``) and ``follow``."""

    def __init__(self, s: RunState) -> None:
        self.s = s
        self.follow = Follow(s)

    def run(self) -> ContinuationResult:
        try:
            return self._run_in_backend(self.s.backend.pid) if self.s.backend is not None else self._run()
        finally:
            if self.s.dispatch_thread is not None:
                self.s.dispatch_thread.join()  # "dispatched" is reported before the outcome, always
            self.s.phase = "finishing"
            # A marker still ours here stays, its dead child the writer: the next scan finds it (attempts +
            # 1).
            if self.s.backend is not None:  # disconnect only: the session is the user's (module doc)
                self.s.result.left_session = self.s.sid
                self.s.gw.shutdown(self.s.opts.shutdown_grace)
            elif isinstance(t := self.s.gw.transport, StdioTransport) and t.proc is not None:
                if self.s.result.finish == Finish.DETACHED:
                    t.detach()  # its keeper carries the turn to its end, then ends it
                else:
                    self.s.result.gateway_exit = self.s.gw.shutdown(self.s.opts.shutdown_grace)

    def _left_by_us(self, row: dict[str, Any]) -> bool:
        """The live session is the one the tray left here last time, idle, untouched since: Hermes holds it
        only until its reap grace passes, and no window has it."""
        if self.s.left_before is None or row.get("id") != self.s.left_before[0]:
            return False
        if str(row.get("status") or "") in RUNNING_STATUSES:
            return False
        last = strict_finite(row.get("last_active"))
        return last is not None and last <= self.s.left_before[1] + TOUCH_SLACK

    def _wait_let_go(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """Wait (``release_wait``) for Hermes to let go of the session the tray left; anything else happening
        to it ends the wait (a window has it)."""
        phase, self.s.phase = self.s.phase, "waiting-for-release"
        self.s.progress(force=True)
        deadline = time.monotonic() + self.s.opts.release_wait
        try:
            while True:
                if self.s.stop.is_set():
                    raise Stopped
                time.sleep(0.5)
                now = self.s.live_row()
                if now is None or now != row and not self._left_by_us(now) or time.monotonic() >= deadline:
                    return now
                self.s.progress()
        finally:
            self.s.phase = phase

    def _live_in_others(self) -> str | None:
        """A session live in any other backend of this home is never continued here; one that cannot be asked
        is passed over (Hermes' turn lease and registry cover it)."""
        # here: endpoint's http.client loads OpenSSL, which an idle tray never maps
        from hermes_tray_core.backend.endpoint import connect_backend

        for other in self.s.other_backends:
            s = self.s.connections.pop(other.pid, None)
            try:
                if s is None or not s.alive():
                    s = connect_backend(other, timeout=min(self.s.opts.ready_timeout, 10.0))
                live = self.s.live_row(s) is not None
            except (GatewayError, TimeoutError) as exc:
                logger.info("could not ask %s which sessions are live (%s); relying on Hermes' lease and registry",
                            other.describe(), exc)
                continue
            finally:
                if s is not None:
                    s.shutdown(1.0)
            if live:
                return _open_in(other.pid)
        return None

    def _run(self) -> ContinuationResult:  # spawn the gateway, wait until it is ready, then resume
        gw = self.s.gw
        try:
            gw.start()
        except GatewayError as exc:
            return self.s.finish(Outcome.ERROR, f"Not resumed: {exc}")
        self.s.result.gateway_pid = gw.transport.pid
        if gw.transport.log_problem:
            self.s.result.log_path = None
            self.s.result.log_problem = gw.transport.log_problem
        if gw.transport.pid is not None:
            self.s.listener.connected(gw.transport.pid)
        self.s.progress(force=True)
        try:
            self.s.result.timings["ready"] = self.s._wait(gw.wait_ready, self.s.opts.ready_timeout, "become ready")
        except TimeoutError as exc:
            return self.s.finish(Outcome.TIMED_OUT, f"Not resumed: {exc}. The turn is still pending.")
        except Stopped:
            return self.s.not_started("Hermes was ready")
        except GatewayError as exc:
            return self.s.finish(Outcome.CRASHED, f"Not resumed: {exc}. {self.s._see_log()}. The turn is still pending.")
        return self._resume()

    def _run_in_backend(self, pid: int) -> ContinuationResult:
        """Connect, ready, ``session.active_list`` everywhere: nothing changed yet, so failures fall back."""
        gw = self.s.gw
        self.s.progress(force=True)
        try:
            if self.s.preopened:  # connected while the caller re-checked the turn
                self.s.result.timings["ready"] = 0.0
            else:
                gw.start()
                self.s.result.timings["ready"] = self.s._wait(gw.wait_ready, min(self.s.opts.ready_timeout, 10.0),
                                                          "become ready")
            self.s.listener.connected(None)
            t_asked = time.monotonic()
            row = self.s.live_row(timeout=self.s.opts.rpc_timeout)
            if row is not None and self._left_by_us(row):
                row = self._wait_let_go(row)
            self.s.result.timings["active_list"] = time.monotonic() - t_asked
        except Stopped:
            return self.s.not_started("the continuation started")
        except RpcError as exc:
            return self.s.unusable(f"its /api/ws refused session.active_list ({exc.rpc_message})")
        except (GatewayError, TimeoutError) as exc:
            return self.s.unusable(str(exc))
        busy = _open_in(pid) if row is not None else self._live_in_others()
        if busy:
            there = ("; this Hermes continues the interrupted turn there itself" if self.s.caps.auto_continue
                     else ". Continue it there")
            self.s.result.live_elsewhere = busy
            self.s.result.not_continued = NotContinued.OPEN_IN_APP
            return self.s.finish(Outcome.DECLINED, f"Not resumed: {busy}{there}; the tray starts nothing for it.")
        return self._resume()

    def _resume(self) -> ContinuationResult:
        gw = self.s.gw
        self.s.phase = "resuming"
        self.s.progress(force=True)
        from hermes_tray_core.hermes.state_db import message_high_water
        from hermes_tray_core.markers.turn_marker import read_turn_marker

        if self.s.caps.auto_continue:
            # Hermes writes its own continuation note after this id: how the tray recognises its end in state.db.
            self.s.note_after, _problem = message_high_water(self.s.home)
            self.s.expected_read = read_turn_marker(self.s.home, self.s.key)
        t_resume = time.monotonic()
        sent_at = time.time()
        try:
            # never close_on_disconnect (module doc): a quit or a crash of ours would cost the turn
            waiter = gw.send("session.resume", {"session_id": self.s.key})
            # Not cut short by a stop: a backend may already be continuing; its turn is stopped properly below.
            resumed = self.s._wait(lambda t: gw.result_of("session.resume", waiter, t), self.s.opts.rpc_timeout,
                                 "answer session.resume", stoppable=False)
        except TimeoutError as exc:
            return self.s.finish(Outcome.TIMED_OUT, f"Not resumed: {exc}. The turn is still pending.")
        except RpcError as exc:
            return self.s.finish(Outcome.ERROR, f"Not resumed: Hermes refused the session ({exc.rpc_message}).")
        except GatewayError as exc:
            return self.s.finish(Outcome.CRASHED, f"Not resumed: {exc}. {self.s._see_log()}.")
        self.s.result.timings["resume"] = gw.received.get("session.resume", time.monotonic()) - t_resume
        self.s.own_touch = wall_time_of(gw.received.get("session.resume"))
        sid = resumed.get("session_id")
        if not isinstance(sid, str) or not sid:
            return self.s.finish(Outcome.ERROR, "Not resumed: Hermes' session.resume answer had no session id.")
        self.s.sid = sid
        tip = resumed.get("resumed")
        self.s.state_session = tip if isinstance(tip, str) and tip else self.s.key
        if self.s.note_after is not None:
            self.s.result.note_mark = (self.s.state_session, self.s.note_after)
        if self.s.backend is not None and live_reuse(resumed, sent_at):
            # A window opened it between the check and the resume: nothing is submitted, interrupted or closed
            # (0.19.0 sends events to the latest resumer: the window gets them back at its next prompt).
            return self.s.not_continued(NotContinued.OPENED_DURING_CHECK,
                                      f"{OPEN_IN_APP}: a Hermes window opened it while the tray was checking; "
                                      "nothing was sent")
        if resumed.get("running") and not resumed.get("auto_continue"):
            return self.s.not_continued(NotContinued.OPEN_IN_APP, "this Hermes reports the session is already running")
        if self.s.caps.auto_continue:
            return self.follow.continued_by_hermes(resumed, t_resume)
        return self._submit_note(t_resume, self.s.state_session)

    def _submit_note(self, t_resume: float, state_session: str) -> ContinuationResult:
        gw = self.s.gw
        if self.s.stop.is_set():
            return self.s.not_started("the continuation was submitted")
        busy = self._live_elsewhere()
        if busy:
            self.s.result.live_elsewhere = busy
            return self.s.finish(Outcome.DECLINED, f"Not resumed: {busy}; nothing was submitted. Continue it in the Hermes "
                                         "window that has it open.")
        if self.s.backend is not None:
            # the session is live under the tray's own runtime id, and no other client touched it since
            try:
                row = self.s.live_row()
            except (GatewayError, TimeoutError) as exc:
                return self.s.finish(Outcome.ERROR, "Not resumed: your running Hermes did not say who holds the "
                                                  f"session ({exc}); nothing was submitted. The turn is still pending.")
            if row is None or row.get("id") != self.s.sid or touched_by_other(row, self.s.own_touch):
                return self.s.not_continued(NotContinued.OPENED_DURING_CHECK,
                                          f"{OPEN_IN_APP}: a Hermes window opened it while the tray was resuming; "
                                          "nothing was submitted")
        unreadable = self.s.handover.make_mark(state_session)
        if self.s.handover.mark is not None:
            self.s.result.note_mark = (self.s.handover.mark.state_session, self.s.handover.mark.after_message_id)
        if unreadable:
            return self.s.finish(Outcome.ERROR, f"Not resumed: Hermes' state.db cannot be read ({unreadable}), so the tray "
                                      "could not tell later whether the continuation finished; nothing was "
                                      "submitted. The turn is still pending.")
        t_marker = time.monotonic()
        from hermes_tray_core.markers.store import MarkerStoreError

        assert gw.transport.identity is not None  # a started gateway or a backend endpoint: its process is known
        try:
            # compare-and-swap just before the submit (core.continuing.handover)
            taken = self.s.handover.take(gw.transport.identity)
        except (MarkerStoreError, ValueError) as exc:
            logger.error("could not record the continuation marker for %s: %s", self.s.key, exc)
            return self.s.finish(Outcome.ERROR, f"Not resumed: the tray could not keep the turn marker for the "
                                      f"continuation ({exc}); nothing was submitted. The turn is still pending.")
        t_submit = time.monotonic()
        self.s.result.timings["marker"] = t_submit - t_marker
        if not taken:
            self.s.result.marker_changed = True
            return self.s.finish(Outcome.DECLINED, "Not resumed: the interrupted turn was skipped or changed while Hermes "
                                         "was starting; nothing was submitted.")
        if self.s.handover.ours is not None:  # the caller journals the mark: never a reason not to go on
            self.s.listener.submitting(dict(self.s.handover.ours))
        try:
            waiter = gw.send("prompt.submit", {"session_id": self.s.sid, "text": self.s.handover.note})
        except GatewayError as exc:
            self.s.handover.give_back()
            return self.s.finish(Outcome.CRASHED, f"Not resumed: {exc}. The turn is still pending.")
        try:
            self.s._wait(lambda t: gw.result_of("prompt.submit", waiter, t), self.s.opts.rpc_timeout,
                       "accept the continuation")
        except Stopped:
            pass  # _follow sends the interrupt and retires the marker
        except (GatewayError, TimeoutError) as exc:
            if not gw.alive():
                return self.s.finish(Outcome.CRASHED, f"Hermes exited while the continuation was submitted ({exc})."
                                   + self.s._child_died_marker_note())
            self.s._retire_marker()
            return self.s.finish(Outcome.ERROR, f"Not resumed: Hermes did not take the continuation ({exc}).")
        self.s.own_touch = max(self.s.own_touch, wall_time_of(gw.received.get("prompt.submit")))
        self.s.result.timings["submit"] = gw.received.get("prompt.submit", time.monotonic()) - t_submit
        self.s.result.dispatched = True
        self.s._dispatched()
        return self.follow.to_end(t_resume)

    def _live_elsewhere(self) -> str | None:
        """Why not to go on, right before an older Hermes' swap: a turn lease or another active-session
        owner on the session now (the re-check was up to ``ready_timeout`` ago; our gateway is no other)."""
        from hermes_tray_core.hermes.state_db import session_activity

        try:
            pid = self.s.gw.transport.pid
            activity = session_activity(self.s.home, self.s.key, ignore_pids=(pid,) if pid else ())
        except Exception as exc:  # boundary: cannot tell: never risk a second turn
            return f"cannot tell whether Hermes is running this session ({exc})"
        if activity.running:
            return activity.reason
        if activity.unsure:
            return f"cannot tell whether Hermes is running this session ({activity.reason})"
        return None


def _open_in(pid: int) -> str:
    return f"{OPEN_IN_APP} (your running Hermes, pid {pid}, has it live)"
