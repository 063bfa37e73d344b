"""Following one continuation to its end: Hermes' own frames on the tray's connection, or its facts
(``state.db``, the marker, the active-session registry) while the frames go elsewhere. The tray stops a turn
(``session.interrupt``) only while it is provably its own, in a session no other client touched.
"""

from __future__ import annotations

import contextlib
import queue
import time
from dataclasses import dataclass
from typing import Any

from hermes_tray_core.backend.rpc import EOF as _EOF
from hermes_tray_core.backend.rpc import RECEIVED, GatewayError
from hermes_tray_core.continuing.facts import continued_elsewhere, wall_time_of, why_not_continued
from hermes_tray_core.continuing.results import ANSWER_CHARS, ContinuationResult, stop_reason
from hermes_tray_core.continuing.runstate import RunState, sentence
from hermes_tray_core.hermes.note import RESUMING_STATUS_TEXT
from hermes_tray_core.numbers import json_int
from hermes_tray_core.vocab import Finish, NotContinued, Outcome, StopReason

__all__ = ["Follow"]


@dataclass
class _Watch:
    """The follow loop's clocks, and the stop in flight."""

    deadline: float  # silence until then is a time-out; moves on with every frame of this session
    next_facts: float  # when to read Hermes' facts again while no frame comes
    stop_deadline: float | None = None  # a stop was sent: how long Hermes has to confirm it
    acked_at: float | None = None  # when Hermes confirmed the interrupt
    interrupt: queue.Queue[dict[str, Any]] | None = None  # the interrupt's answer, when it comes


class Follow:
    """From Hermes' answer to ``session.resume`` (or the note's submit) to the end of the turn."""

    def __init__(self, s: RunState) -> None:
        self.s = s

    def continued_by_hermes(self, resumed: dict[str, Any], t_resume: float) -> ContinuationResult:
        """A Hermes that continues (or declines) by itself. ``auto_continue`` in the reply means scheduled,
        but a losing resume gets the same reply and is refused silently: until the first frame the tray
        watches the marker and the registry (``start_timeout``). Without it only frames in flight can still
        say so (``decline_grace``); else the marker before and after says why not."""
        desc = resumed.get("auto_continue")
        promised = isinstance(desc, dict)
        if isinstance(desc, dict):
            attempt = json_int(desc.get("attempt"))
            if attempt is not None:  # Hermes' own count, 0 included
                self.s.result.attempt = attempt
            self.s.phase = "starting"
            self.s.progress(force=True)
        limit = self.s.opts.start_timeout if promised else self.s.opts.decline_grace
        deadline = time.monotonic() + limit
        next_facts = time.monotonic() + min(0.5, self.s.opts.facts_interval)
        while time.monotonic() < deadline:
            ev = self.s.next_event(0.1)
            if ev is _EOF:
                return self.s.finish(Outcome.CRASHED,
                                   f"{sentence(self.s.gw.transport.ended('right after resuming the session'))}.")
            if isinstance(ev, dict) and self._is_continuation_frame(ev):
                self.s.own_touch = max(self.s.own_touch, wall_time_of(ev.get(RECEIVED)))
                self.s.result.dispatched = True
                self.s._dispatched()
                self.s.pushback = ev
                return self.to_end(t_resume)
            if self.s.stop.is_set() and promised:
                quits = stop_reason(self.s.stop) == StopReason.SHUTDOWN
                return self.s.detach() if quits else self._stop_before_start()
            if time.monotonic() >= next_facts:
                next_facts = time.monotonic() + min(0.5, self.s.opts.facts_interval)
                elsewhere = continued_elsewhere(self.s.home, self.s.key, self.s.gw.transport.pid,
                                                self.s.handover.expected)
                if elsewhere is not None:
                    return self.s.not_continued(elsewhere[0], elsewhere[1], holder=elsewhere[2])
                if promised:
                    state, _why = self.s._note_facts()
                    if state == "finished":  # answered, and none of it came here: another process ran it
                        return self.s.not_continued(NotContinued.ANOTHER_OWNER,
                                                  "another Hermes process continued it, and it finished")
                self.s.progress()
        if promised:
            return self.s.not_continued(NotContinued.NOT_STARTED,
                                      f"Hermes said it would continue the turn but started nothing within "
                                      f"{self.s.opts.start_timeout:g}s")
        code, why = why_not_continued(self.s.home, self.s.key, self.s.handover.expected, self.s.gw.transport.pid)
        return self.s.not_continued(code, why)

    def _stop_before_start(self) -> ContinuationResult:
        """Stop while Hermes builds the agent: interrupt it, in a session the tray holds alone."""
        why = self.s._ours_alone(started=False)
        if why:
            return self._left_to_window(why)
        self.s.result.stopped_by = StopReason.USER
        with contextlib.suppress(GatewayError, TimeoutError):
            self.s.gw.request("session.interrupt", {"session_id": self.s.sid}, timeout=min(10.0, self.s.opts.rpc_timeout))
        self.s._retire_marker(stopped=True)
        return self.s.finish(Outcome.INTERRUPTED, "Stopped before Hermes started the continuation; it will not be "
                                                "continued again.")

    def _left_to_window(self, why: str) -> ContinuationResult:
        """The user's Stop, but a Hermes window shares the session: no interrupt; the turn is the window's to
        stop, and its end is read from Hermes later, never recorded as stopped by you."""
        self.s.result.stopped_by = StopReason.USER
        self.s.result.left_alone, self.s.result.finish = why, Finish.LEFT_ALONE
        return self.s.finish(Outcome.DETACHED, f"Not stopped by the tray: {why}. It goes on in your Hermes window; "
                                             "stop it there if you want it stopped.")

    def _is_continuation_frame(self, ev: dict[str, Any]) -> bool:
        if ev.get("session_id") not in (None, self.s.sid):
            return False
        t = ev.get("type")
        if t == "message.start":
            return True
        payload = ev.get("payload")
        return t == "status.update" and isinstance(payload, dict) and \
            RESUMING_STATUS_TEXT.rstrip("…") in str(payload.get("text") or "")

    def _finished_elsewhere(self) -> ContinuationResult | None:
        """The events stopped coming here (0.19.0 sends them to the newest client): did state.db finish it?"""
        if self.s.backend is None:
            return None
        state, why = self.s._note_facts()
        if state != "finished":
            return None
        # Hermes writes the reply a moment before message.complete: a stream still ours has it on its way
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            ev = self.s.next_event(0.1)
            if ev is _EOF:
                break
            if isinstance(ev, dict) and ev.get("session_id") == self.s.sid:
                self.s.pushback = ev
                return None
        self.s._retire_marker()
        self.s.result.finish = Finish.STATE_DB
        return self.s.finish(Outcome.COMPLETED, "The interrupted turn was continued and completed; it is now open in your "
                                      f"Hermes window, which took over its events ({why}).", "complete")

    def to_end(self, t_resume: float) -> ContinuationResult:
        now = time.monotonic()
        w = _Watch(deadline=now + self.s.opts.idle_timeout, next_facts=now + self.s.opts.facts_interval)
        while True:
            done = self._stopping(w, time.monotonic())
            if done is None:
                ev = self.s.next_event(0.2)
                if ev is None:
                    done = self._quiet(w)
                elif ev is _EOF:
                    done = self._ended(w)
                else:
                    done = self._frame(w, ev, t_resume)
            if done is not None:
                return done

    def _stopping(self, w: _Watch, now: float) -> ContinuationResult | None:
        """A Stop, or silence past the idle time-out: interrupt a session the tray holds alone, and give
        Hermes ``stop_grace`` to confirm."""
        if w.stop_deadline is None and (self.s.stop.is_set() or now >= w.deadline):
            if stop_reason(self.s.stop) == StopReason.SHUTDOWN:
                return self.s.detach()
            self.s.timed_out = not self.s.stop.is_set()
            done = self._finished_elsewhere()
            if done is not None:
                return done
            why = self.s._ours_alone()
            if why:  # never interrupt a session the tray does not provably hold alone: say so instead
                return self._left_alone(why)
            self.s.phase = "stopping"
            self.s.progress(force=True)
            w.stop_deadline = now + self.s.opts.stop_grace
            with contextlib.suppress(GatewayError):
                w.interrupt = self.s.gw.send("session.interrupt", {"session_id": self.s.sid})
        if w.interrupt is not None and w.acked_at is None:
            with contextlib.suppress(queue.Empty):
                if "result" in w.interrupt.get_nowait():
                    w.acked_at = now
                    # a confirmed Stop retires the marker at once, as Hermes does
                    self.s._retire_marker(stopped=not self.s.timed_out)
        if w.stop_deadline is not None:
            quiet_end = w.acked_at is not None and not self.s.turn_seen and now - w.acked_at >= 1.0
            if quiet_end or now >= w.stop_deadline:
                # interrupted before its agent ran (no frame then), or not confirmed in time: over for us
                self.s._retire_marker(stopped=not self.s.timed_out)
                return self._stopped_result()
        return None

    def _quiet(self, w: _Watch) -> ContinuationResult | None:
        """No frame for a moment: now and then ask Hermes' facts whether it finished for another client."""
        if w.stop_deadline is None and time.monotonic() >= w.next_facts:
            w.next_facts = time.monotonic() + self.s.opts.facts_interval
            done = self._finished_elsewhere()
            if done is not None:
                return done
        self.s.progress()
        return None

    def _ended(self, w: _Watch) -> ContinuationResult:
        if w.stop_deadline is not None:
            self.s._retire_marker(stopped=not self.s.timed_out)
            return self._stopped_result()
        if self.s.handover.ours is not None and self.s._note_facts()[0] == "finished":  # answered, then exited
            self.s._retire_marker()
            self.s.result.finish = Finish.STATE_DB
            return self.s.finish(Outcome.COMPLETED, "The interrupted turn was continued and completed (Hermes "
                                                  "exited right after; its state.db holds the reply).", "complete")
        return self.s.finish(Outcome.CRASHED, f"{sentence(self.s.gw.transport.ended('mid-turn'))}. "
                                            f"{self.s._see_log()}." + self.s._child_died_marker_note())

    def _frame(self, w: _Watch, ev: dict[str, Any], t_resume: float) -> ContinuationResult | None:
        if ev.get("session_id") not in (None, self.s.sid):
            return None
        etype = str(ev.get("type") or "")
        if w.stop_deadline is None:
            w.deadline = time.monotonic() + self.s.opts.idle_timeout
            w.next_facts = time.monotonic() + self.s.opts.facts_interval
        self.s.frames += 1
        self.s.last_frame = etype
        if etype == "message.start":
            self.s.turn_seen = True
            arrived = float(ev.get(RECEIVED) or time.monotonic())
            self.s.result.timings.setdefault("first_frame", arrived - t_resume)
            self.s.result.timings.setdefault("message_start_at", arrived)
        elif etype in ("message.delta", "thinking.delta", "tool.start", "tool.progress"):
            self.s.turn_seen = True
        self.s.progress(force=etype == "message.start")
        raw = ev.get("payload")
        payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if etype == "message.complete":
            return self._completed(w, payload)
        if etype == "error":
            msg = str(payload.get("message") or "unknown error")[:300]
            self.s._retire_marker()
            return self.s.finish(Outcome.ERROR, f"Hermes reported an error during the continuation: {msg}", "error")
        return None

    def _completed(self, w: _Watch, payload: dict[str, Any]) -> ContinuationResult:
        status = str(payload["status"]) if isinstance(payload.get("status"), str) else "complete"
        if isinstance(payload.get("text"), str):
            self.s.result.answer = payload["text"][:ANSWER_CHARS]
        self.s._retire_marker(stopped=w.stop_deadline is not None and not self.s.timed_out and status != "complete")
        self.s.result.finish = Finish.STREAM
        if w.stop_deadline is not None:
            return self._stopped_result(status)
        if status == "interrupted":
            return self.s.finish(Outcome.INTERRUPTED, "The continuation was interrupted before it finished.", status)
        if status == "error":
            return self.s.finish(Outcome.ERROR, "Hermes finished the continuation with an error.", status)
        return self.s.finish(Outcome.COMPLETED, "The interrupted turn was continued and completed.", status)

    def _left_alone(self, why: str) -> ContinuationResult:
        superseded = self.s._note_facts()[0] == "superseded"
        if not superseded and not self.s.timed_out:
            return self._left_to_window(why)
        self.s.result.left_alone, self.s.result.finish = why, Finish.LEFT_ALONE
        if superseded:
            return self.s.finish(Outcome.INTERRUPTED, f"The continuation was ended in Hermes: {why}. The tray sent no stop.",
                               "interrupted")
        return self.s.finish(Outcome.TIMED_OUT,
                             f"Hermes sent the tray nothing for {self.s.opts.idle_timeout:g}s, and the tray "
                                      f"left the session alone: {why}. It will not continue the turn again.")

    def _stopped_result(self, status: str = "interrupted") -> ContinuationResult:
        if status == "complete":  # Hermes finished the turn before the stop reached it
            return self.s.finish(Outcome.COMPLETED, "The interrupted turn was continued and completed (it finished before "
                                          "the stop reached Hermes).", status)
        if self.s.timed_out:
            return self.s.finish(Outcome.TIMED_OUT, f"Hermes showed no activity for {self.s.opts.idle_timeout:g}s, so the "
                                          "continuation was stopped; it will not be continued again.", status)
        self.s.result.stopped_by = StopReason.USER
        return self.s.finish(Outcome.INTERRUPTED, "Stopped; the continuation was interrupted and will not be continued "
                                        "again.", status)
