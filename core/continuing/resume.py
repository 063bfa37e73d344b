"""Resume one interrupted turn, exactly once across every hermes-tray process (docs/architecture.md, steps
5-7): claim it (with the run it starts, in one commit), re-read the marker under the claim (it must be what
the user was shown, and ``actionable``), continue it through Hermes to the end, recording each step in the
ledger (identity only, never prompt text), then release the claim.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.backend.capabilities import backend_capabilities
from hermes_tray_core.backend.install import (
    HermesInstall,
    HermesSettingsError,
    find_hermes,
    settings_hermes_command,
)
from hermes_tray_core.backend.rpc import HermesNotFound, RpcSession
from hermes_tray_core.continuing import claim as exactly_once
from hermes_tray_core.continuing.gateway import continue_in_backend, continue_turn
from hermes_tray_core.continuing.listener import Heard, Listener
from hermes_tray_core.continuing.results import ContinuationResult, GatewayOptions, Progress, stop_reason
from hermes_tray_core.errors import DEBUG, bookkeeping
from hermes_tray_core.keys import SessionKey
from hermes_tray_core.stores.ledger import NOTHING, TurnStatus
from hermes_tray_core.turn import Marker, Turn, TurnId
from hermes_tray_core.vocab import (
    BackendKind,
    Event,
    Outcome,
    RanIn,
    ReasonCode,
    Refusal,
    StopReason,
    Verdict,
)

if TYPE_CHECKING:  # http.client loads OpenSSL: imported where a backend is looked for, not with this module
    from hermes_tray_core.backend.endpoint import BackendEndpoint
    from hermes_tray_core.continuing.completion import Settlement

logger = logging.getLogger(__name__)

CLAIM_TTL = 60.0


@dataclasses.dataclass
class ResumeResult:
    """How a resume request ended: its ``outcome``, one line for people, and the CLI's exit code."""

    outcome: Outcome
    message: str
    home: str
    session_key: SessionKey
    verdict: str | None = None
    continuation: ContinuationResult | None = None
    code: Refusal | None = None  # why it was refused (``--json`` writes "" for none)
    # why the user's running Hermes was not used and a separate gateway was spawned
    fallback_reason: str | None = None

    @property
    def exit_code(self) -> int:
        """0 completed; 1 nothing ran (a refusal, with its reason); 3 it ran and did not finish here
        (``detached``: it goes on in Hermes; the CLI says which)."""
        if self.outcome == Outcome.COMPLETED:
            return 0
        return 1 if self.outcome in (Outcome.REFUSED, Outcome.GAVE_UP, Outcome.DECLINED) else 3

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.COMPLETED

    def to_dict(self) -> dict[str, Any]:
        c = self.continuation
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "continuation"},
                "exit_code": self.exit_code, "code": self.code or "",  # "" for none
                "gateway_log": c.log_path if c else None, "timings": dict(c.timings) if c else {},
                **{k: getattr(c, k) if c else None for k in _OF_CONTINUATION}}


#: what ``--json`` tells of the continuation: ``marker_left`` (its marker could not be removed), ``ran_in``
#: (``running-backend``, then ``backend_pid``, or ``separate-process``), ``stopped_by`` ("you": Stop, Ctrl-C;
#: "shutdown": the tray quit)…
_OF_CONTINUATION = ("continued_by", "attempt", "marker_left", "ran_in", "backend_pid", "where", "not_continued",
                    "holder_pid", "finish", "left_alone", "stopped_by")


#: what the user can still do about a turn resume refuses, by verdict (the turns window's "Recent" says the same)
_HINTS = {
    Verdict.RUNNING: " Continue it in the Hermes window that has it open.",
    Verdict.DISABLED: " Hermes auto-continue is off there: `hermes-tray enable` turns it back on, then resume it"
                " (or skip it with `hermes-tray skip`).",
    Verdict.STALE: " Continue it by hand in Hermes if it still matters, or skip it with `hermes-tray skip`.",
}


def settings_options() -> GatewayOptions:
    """Gateway options with the tray's ``continuation_idle_timeout`` (else the defaults)."""
    from hermes_tray_core.stores.settings import SettingsError, load_settings

    try:
        idle = load_settings().continuation_idle_timeout
    except (SettingsError, OSError):
        return GatewayOptions()
    return GatewayOptions(idle_timeout=float(idle))


@dataclasses.dataclass(frozen=True)
class Assessment:
    """The one judge's verdict on one marker now, with the budget it used."""

    verdict: Verdict
    reason: str
    unsure: bool
    max_attempts: int
    code: ReasonCode | None = None
    known: TurnStatus = NOTHING  # what the ledger knows of it
    settled: Settlement | None = None  # a continuation of ours, as state.db shows it


def assess(turn: Turn, *, now: float | None = None) -> Assessment:
    """The scanner's verdict for one turn, from a fresh look at every fact."""
    from hermes_tray_core.backend.sessions import ask_writer
    from hermes_tray_core.continuing.completion import settle_if_finished
    from hermes_tray_core.continuing.facts import seen_now
    from hermes_tray_core.deciding.policy import Facts, judge
    from hermes_tray_core.hermes.config import read_backend_config
    from hermes_tray_core.hermes.processes import backend_state
    from hermes_tray_core.hermes.state_db import active_session_owner, lookup_session, turn_lease_view
    from hermes_tray_core.stores.ledger import ledger

    now = time.time() if now is None else now
    home, key, marker, pid = turn.home, turn.key, turn.marker, turn.marker.writer_pid
    cfg = read_backend_config(home).auto_continue
    known = NOTHING
    with bookkeeping(logger, "cannot read the ledger for %s", key):  # unknown: the other facts decide
        known = ledger().status(turn.ident)
    settled = settle_if_finished(turn)
    info, _problem = lookup_session(home, key)
    seen = seen_now(turn, info.source if info else None, info.conversation_generation if info else None,
                    ask_writer=lambda: None if pid is None else ask_writer(home, key, pid, marker.writer_start),
                    lease=lambda: turn_lease_view(home, key, now=now)[:2],
                    owner=lambda: active_session_owner(home, key), backend=lambda: backend_state(home))
    d = judge(marker, Facts(cfg, now, seen, known, settled.state if settled else None,
                            settled.reason if settled else ""))
    return Assessment(d.verdict, d.reason, d.unsure, int(cfg.max_attempts), d.code, known, settled)


def resume_turn(
    turn: Turn,
    *,
    install: HermesInstall | None = None,
    options: GatewayOptions | None = None,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    claim_wait: float = 0.0,
    env: Mapping[str, str] | None = None,
    via: str = "api",
    prefer_running_backend: bool = True,
) -> ResumeResult:
    """Resume ``turn`` once; never raises for expected failures. ``turn.marker``: the entry the user was shown
    (one not read from a file: whatever is there now, auto mode). ``prefer_running_backend`` False always
    spawns a gateway (benchmarks compare the two)."""
    key = turn.key
    r = _Resume(turn, via, install, options, listener, stop, env)
    held = exactly_once.claim(turn, purpose="resume", via=via, ttl=CLAIM_TTL, wait=claim_wait)
    if isinstance(held, exactly_once.ClaimRefused):
        if held.code == Refusal.STORE_ERROR:  # unsure whether someone else holds it: refuse (not recorded)
            return r.result(Outcome.REFUSED, f"Not resumed: {held.message}.", code=held.code)
        return r.refused(f"Not resumed: {held.message}.", held.code)  # claimed elsewhere, or being skipped
    from hermes_tray_core.stores.lease import LeaseKeeper

    keeper = LeaseKeeper(held.store, held.lease, ttl=CLAIM_TTL,
                         on_lost=lambda _l: logger.error("resume claim on %s lost mid-run", key)).start()
    try:
        return r.claimed(held, prefer_running_backend)
    finally:
        keeper.stop()
        keeper.join(timeout=5)
        exactly_once.release(held, key)


class _Backends:
    """The home's running backends, found and connected to beside the re-checks. One still starting is waited
    for: a second Hermes beside it would take the session and lock the user's window out. Not ``used``
    (benchmarks): only whether a gateway owns the home."""

    def __init__(self, home: Path | str, *, used: bool = True, wait: float = 0.0,
                 on_waiting: Callable[[], None] | None = None, stop: threading.Event | None = None) -> None:
        self.home, self.used, self.wait, self.on_waiting, self.stop = home, used, wait, on_waiting, stop
        self.found: list[BackendEndpoint] = []
        self.why_none: str | None = None
        self.owned: str | None = None  # a gateway owns the home's sessions and cannot be used: why (nothing starts)
        self.took = 0.0
        self.connections: dict[int, RpcSession] = {}
        self.thread = threading.Thread(target=self._look, name="find-live-backend", daemon=True)
        self.thread.start()

    def _look(self) -> None:
        from hermes_tray_core.backend.endpoint import connect_backend
        from hermes_tray_core.backend.running import GatewayOwnsHome, wait_for_backends

        t = time.monotonic()
        try:
            self.found, self.why_none = wait_for_backends(self.home, wait=self.wait, on_waiting=self.on_waiting,
                                                          stop=self.stop)
        except GatewayOwnsHome as exc:
            self.owned = str(exc)
        except Exception as exc:  # boundary: never a reason not to resume: the separate gateway, and why
            self.why_none = f"cannot look for a running Hermes ({type(exc).__name__})"
        if not self.used:
            self.found, self.why_none = [], "the running backend was not asked (disabled for this call)"
        self.took = time.monotonic() - t
        for b in self.found:
            try:
                if backend_capabilities(self.home, b).auto_continue is not None:
                    self.connections[b.pid] = connect_backend(b)
            except Exception:  # boundary: continue_in_backend connects again, and says why it cannot
                logger.debug("could not connect to %s ahead of the resume", b.describe(), exc_info=True)

    def close(self) -> None:
        self.thread.join()
        for s in list(self.connections.values()):  # those the continuation did not take
            s.shutdown(1.0)


class _Resume:
    """One resume under its claim, in named steps: re-check the turn, continue it, record how it ended."""

    def __init__(self, turn: Turn, via: str, install: HermesInstall | None, options: GatewayOptions | None,
                 listener: Listener | None, stop: threading.Event | None, env: Mapping[str, str] | None) -> None:
        self.turn, self.home, self.key, self.via = turn, turn.home, turn.key, via
        self.install, self.options, self.listener = install, options, Heard(listener)
        self.stop, self.env = stop, env
        self.prompt: str | None = None  # the turn's original prompt (never recorded: its note's digest is)
        self.epoch = 0
        self.run = 0  # the ledger's run, recorded with the claim
        self.attempts = 0
        self._approved: list[threading.Thread] = []

    def result(self, outcome: Outcome, message: str, verdict: str | None = None,
               continuation: ContinuationResult | None = None, *, code: Refusal | None = None,
               fallback: str | None = None) -> ResumeResult:
        return ResumeResult(outcome, message, self.home, self.key, verdict, continuation, code=code,
                            fallback_reason=fallback)

    def journal(self, event: Event | str, *, marker: float | None = None, turn: TurnId | None = None,
                **fields: Any) -> None:
        """A step of this run, about the turn as read under the claim (``turn``: another marker's, outside
        the run)."""
        with bookkeeping(logger, "could not record %s for %s", event, self.key):
            from hermes_tray_core.stores.ledger import ledger

            ledger().record(event, turn or self.turn.ident, run=None if turn else self.run or None,
                            marker_started=marker, via=self.via, **fields)

    def refused(self, message: str, code: Refusal, verdict: str | None = None, *, why: str | None = None,
                res: ContinuationResult | None = None, fallback: str | None = None, **fields: Any) -> ResumeResult:
        """Refuse with ``message``; the ledger records ``why`` (else the message) and ``fields``."""
        self.journal(Event.REFUSED, reason=why or message, verdict=verdict, **fields)
        return self.result(Outcome.REFUSED, message, verdict, res, code=code, fallback=fallback)

    def claimed(self, held: exactly_once.Claim, prefer_running_backend: bool) -> ResumeResult:
        self.epoch, self.run = held.epoch, held.run
        self.options = self.options or settings_options()
        waiting = Progress("waiting-for-backend", 0.0, ran_in=RanIn.RUNNING_BACKEND)
        backends = _Backends(self.home, used=prefer_running_backend, stop=self.stop,
                             wait=self.options.backend_start_wait if prefer_running_backend else 0.0,
                             on_waiting=lambda: self.progress(waiting))
        try:
            checked = self._recheck()
            if isinstance(checked, ResumeResult):
                return checked
            ran = self._continue(checked, backends)
            return ran if isinstance(ran, ResumeResult) else self._report(*ran, checked)
        finally:
            backends.close()

    def _left_before(self, backend_pid: int) -> tuple[str, float] | None:
        """(runtime id, when) of the session a run of ours last left in that backend, or None."""
        with bookkeeping(logger, "cannot read which session the tray left in %s", backend_pid, level=DEBUG):
            from hermes_tray_core.stores.ledger import ledger

            for ev in ledger().history(50, home=self.home, session_key=self.key):
                if ev.get("backend_pid") == backend_pid and isinstance(ev.get("left_sid"), str):
                    at = ev.get("created_at")
                    return (str(ev["left_sid"]), float(at)) if isinstance(at, (int, float)) else None
        return None

    # step 1: the turn is still the one shown, not settled, not stopped, actionable, and Hermes can write its home

    def _recheck(self) -> Assessment | ResumeResult:
        from hermes_tray_core.hermes.config import sessions_elsewhere
        from hermes_tray_core.markers.store import MarkerStoreError, list_turn_markers

        elsewhere = sessions_elsewhere(self.home)
        if elsewhere:  # its markers and sessions are not in the files the tray reads: a stale file is no proof
            return self.refused(f"Not resumed: this Hermes keeps its sessions elsewhere ({elsewhere}). Continue it in "
                                "Hermes.", Refusal.SESSIONS_ELSEWHERE)
        try:
            entry = list_turn_markers(self.home).get(self.key)
        except MarkerStoreError as exc:
            return self.refused(f"Not resumed: cannot read the turn markers ({exc}).", Refusal.STORE_ERROR)
        if entry is None:
            return self.refused("Not resumed: this turn is no longer marked as interrupted (it finished, was skipped, "
                                "or was resumed elsewhere).", Refusal.GONE)
        if self.turn.marker.raw is not None and not self.turn.marker.same_entry(entry):
            return self.refused("Not resumed: the interrupted turn changed since it was shown (another attempt ran "
                                "or Hermes updated it); look at it again.", Refusal.CHANGED)
        self.turn = turn = Turn(self.home, self.key, Marker.read(entry))
        a = assess(turn)
        if a.verdict == Verdict.STOPPED:
            why = "you stopped it" if a.known.stopped == Event.INTERRUPTED else "the tray gave up on it"
            return self.refused(f"Not resumed: {why} earlier (the tray's ledger says so), and a Stop is final. Its "
                                "marker is still in Hermes' file; `hermes-tray skip` removes it once the home can be "
                                "written.", Refusal.STOPPED, Verdict.STOPPED, why=f"{why} earlier")
        if a.verdict in (Verdict.SKIPPED, Verdict.FINISHED):
            if a.settled is not None and a.settled.finished:  # a continuation of ours finished; its process did not say
                why = f"this turn was already continued and completed ({a.settled.reason})"
                tail = "" if a.settled.retired else " Its marker could not be removed: skip it with `hermes-tray skip`."
            else:
                why = ("this turn was skipped" if a.verdict == Verdict.SKIPPED else
                       "this turn was already continued and completed") + " (the tray's ledger says so), yet its marker is back"
                tail = (" The stale marker was removed again, so Hermes will not continue it either."
                        if exactly_once.remove_settled(turn) else " Skip it to remove the marker, or continue it by hand "
                        "in Hermes.")
            return self.refused(f"Not resumed: {why}.{tail}", Refusal.ALREADY_SETTLED, "settled", why=why)
        if a.code == ReasonCode.UNSURE_FINISHED:  # never risk a second turn
            return self.refused(f"Not resumed: {a.reason}. Try again when Hermes' state.db can be read.",
                                Refusal.NOT_ACTIONABLE, "unsure", why=a.reason)
        from hermes_tray_core.continuing.writable import write_problem

        cannot = write_problem(self.home)
        if cannot:
            self.journal(Event.REFUSED, reason=cannot, verdict="read-only")
            return self.result(Outcome.REFUSED, f"Not resumed: {cannot}. Make it writable, then resume it.",
                               code=Refusal.HOME_READ_ONLY)
        if a.verdict == Verdict.EXHAUSTED:
            self.journal(Event.GAVE_UP, reason=a.reason)
            return self.result(Outcome.GAVE_UP, f"Not resumed: gave up — {a.reason}. Continue it by hand in Hermes if it "
                                        "still matters.", a.verdict)
        if a.verdict != Verdict.ACTIONABLE:
            hint = _HINTS.get(a.verdict, "") if not a.unsure else ""
            return self.refused(f"Not resumed: {a.reason}.{hint}", Refusal.NOT_ACTIONABLE, a.verdict, why=a.reason)
        return a

    # the journal order is always approved → (continuing →) dispatched → the end

    def connected(self, gateway_pid: int | None = None) -> None:
        """Hermes is up: "approved" is recorded beside its start-up (a durable write is an fsync); every later
        step waits for it."""
        if not self._approved:
            t = threading.Thread(target=self.journal, args=("approved",), name="journal-approved", daemon=True,
                                 kwargs={"attempts": self.attempts, "epoch": self.epoch, "gateway_pid": gateway_pid})
            self._approved.append(t)
            t.start()

    def _approved_done(self) -> None:
        self.connected()
        self._approved[0].join()

    def _mark_fields(self, res: ContinuationResult) -> dict[str, Any]:
        """How state.db will show this continuation answered: its end is read from Hermes after we die."""
        if res.note_mark is None or self.prompt is None:
            return {}
        from hermes_tray_core.continuing.completion import ContinuationMark
        from hermes_tray_core.hermes.note import continuation_note

        session, after = res.note_mark
        return ContinuationMark.for_note(session, after, continuation_note(self.prompt)).fields()

    # what the continuation tells this resume (its Listener): journalled here, progress and the start passed on

    def progress(self, progress: Progress) -> None:
        self.listener.progress(progress)

    def dispatched(self, result: ContinuationResult) -> None:
        self._approved_done()
        self.journal("dispatched", attempt=result.attempt, continued_by=result.continued_by,
                     gateway_pid=result.gateway_pid, epoch=self.epoch, ran_in=result.ran_in,
                     backend_pid=result.backend_pid, **self._mark_fields(result))
        self.listener.dispatched(result)

    def submitting(self, marker: dict[str, Any]) -> None:
        """Record the run's own marker and how state.db will show the note answered, before the submit."""
        from hermes_tray_core.continuing.completion import mark_of

        self._approved_done()
        mark = mark_of(marker)
        self.journal(Event.CONTINUING, marker=Marker.read(marker).started_at, attempt=marker.get("attempts"),
                     **(mark.fields() if mark else {}))

    # step 2: continue it, in the user's running Hermes when there is one, else in a spawned gateway

    def _continue(self, a: Assessment, backends: _Backends) -> tuple[ContinuationResult, str | None] | ResumeResult:
        self.attempts = self.turn.attempts  # as Hermes counts them: a negative count is 0, never -1 + 1
        self.prompt = self.turn.marker.prompt  # as Hermes reads it: a number in that field is its text
        assert self.prompt.strip()  # actionable implies a prompt
        t_wait = time.monotonic()
        backends.thread.join()
        waited = time.monotonic() - t_wait
        fallback = backends.why_none
        if self.stop is not None and self.stop.is_set():  # stopped while a starting Hermes was waited for
            by = stop_reason(self.stop)
            return ContinuationResult(Outcome.INTERRUPTED, "hermes-tray quit before Hermes started the "
                                      "continuation; the turn is still waiting." if by == StopReason.SHUTDOWN
                                      else "Stopped before Hermes started the continuation; it is not "
                                      "resumed again.", stopped_by=by), fallback
        if backends.owned:
            return self._owned(a, backends.owned)
        # the marker's writer when it is among them (Hermes continues a marker of its own process, never
        # another live one's), else the first found (the gateway that owns the home comes first)
        found = backends.found
        backend = next((b for b in found if b.pid == self.turn.marker.writer_pid), found[0] if found else None)
        if backend is not None:
            res = continue_in_backend(self.turn, backend, options=self.options, listener=self, stop=self.stop,
                                      other_backends=tuple(backends.found), connections=backends.connections,
                                      left_before=self._left_before(backend.pid))
            res.timings["find_backend"] = backends.took
            res.timings["find_backend_wait"] = waited  # what the overlap with the re-checks left over
            if not res.backend_unusable:
                return res, None
            if backend.kind == BackendKind.GATEWAY:  # nothing was resumed, and nothing may start beside it
                return self._owned(a, f"{backend.describe()} owns this home's sessions and the tray cannot "
                                      f"continue through it ({res.backend_unusable})")
            from hermes_tray_core.backend.running import forget

            forget(self.home)  # nothing was resumed there: a separate gateway, and say why
            fallback = f"your running Hermes (pid {backend.pid}) could not be used: {res.backend_unusable}"
        try:
            inst = self.install or find_hermes(settings_hermes_command())  # the caller's choice
        except HermesSettingsError as exc:  # which Hermes the user chose is unknown: guess nothing
            return self.refused(f"Not resumed: {exc}", Refusal.NO_HERMES_CHOICE, a.verdict, why=str(exc),
                                fallback=fallback, fallback_reason=fallback)
        except HermesNotFound as exc:
            self._approved_done()
            self.journal("failed", outcome=Outcome.ERROR, reason=str(exc), dispatched=False, fallback_reason=fallback)
            return self.result(Outcome.ERROR, f"Not resumed: {exc}", a.verdict, fallback=fallback)
        return continue_turn(self.turn, inst, options=self.options, listener=self, stop=self.stop,
                             env=self.env), fallback

    def _owned(self, a: Assessment, why: str) -> ResumeResult:
        return self.refused(f"Not resumed: {why}. Continue it in Hermes.", Refusal.GATEWAY_OWNS, a.verdict, why=why,
                            fallback=why, dispatched=False)

    # step 3: record how it ended, and say it

    def _own_marker(self, res: ContinuationResult) -> float | None:
        """``started_at`` of the marker a run that reached Hermes and did not finish left (this run's)."""
        if res.outcome == Outcome.COMPLETED or not res.dispatched:
            return None
        if res.marker_left_started_at is not None:
            return float(res.marker_left_started_at)
        from hermes_tray_core.markers.store import MarkerStoreError, list_turn_markers

        try:
            left = Marker.read(list_turn_markers(self.home).get(self.key))
        except (MarkerStoreError, OSError, ValueError):
            return None
        return left.started if left.is_entry and left.started != self.turn.started_at else None

    def _report(self, res: ContinuationResult, fallback: str | None, a: Assessment) -> ResumeResult:
        self._approved_done()  # (also when Hermes never started: approved, then failed)
        where: dict[str, Any] = {"ran_in": res.ran_in, "backend_pid": res.backend_pid, "fallback_reason": fallback}
        if res.marker_changed:  # a skip (or Hermes) changed the entry while Hermes was starting: it won
            return self.refused(res.message, Refusal.CHANGED, a.verdict, res=res, fallback=fallback, dispatched=False,
                                why="marker changed before the continuation was submitted", **where)
        if res.live_elsewhere:  # open / running in the user's Hermes app, or taken while ours was starting
            return self.refused(res.message, Refusal.NOT_ACTIONABLE, Verdict.RUNNING, why=res.live_elsewhere, res=res,
                                fallback=fallback, dispatched=False, not_continued=res.not_continued,
                                holder_pid=res.holder_pid, **where)
        if res.left_session:
            where["left_sid"] = res.left_session  # the session left to Hermes in that backend (Run._left_by_us)
        fields: dict[str, Any] = {"attempt": res.attempt, "continued_by": res.continued_by,
                  "status": res.status, "dispatched": res.dispatched, "gateway_exit": res.gateway_exit, **where,
                  **{f"t_{k}": round(v, 3) for k, v in res.timings.items() if not k.endswith("_at")}}
        if res.log_problem:
            fields["log_problem"] = res.log_problem
        extra: dict[str, Any] = {}
        if res.outcome == Outcome.COMPLETED:
            event = "completed"
        elif res.outcome == Outcome.INTERRUPTED:  # by the user's Stop, by the tray quitting, or by Hermes itself
            event, extra = "interrupted", {"stopped_by": res.stopped_by or "hermes"}
        elif res.outcome == Outcome.DETACHED:  # it goes on in Hermes: its end is read from Hermes later
            event, extra = "detached", {"stopped_by": res.stopped_by, **self._mark_fields(res)}
        else:
            event, extra = "failed", {"outcome": res.outcome, "reason": res.message[:300]}
        for name in ("not_continued", "finish", "left_alone"):
            if getattr(res, name):
                extra[name] = getattr(res, name)
        self.journal(event, marker=self._own_marker(res), **extra, **fields)
        if res.marker_left and res.marker_left_started_at not in (None, self.turn.started_at):
            # The continuation's own marker could not be removed and would read actionable: the same outcome
            # under its identity, so that it reads answered (completed, or stopped for good).
            left = TurnId(self.home, self.key, float(res.marker_left_started_at or 0.0), int(res.attempt or 0))
            self.journal(event, turn=left, marker_left=res.marker_left, **extra, **fields)
        message = res.message
        if res.dispatched and res.where:
            message += f" It ran {res.where}."
        if fallback and res.ran_in == RanIn.SEPARATE_PROCESS and res.dispatched:
            message += f" (Not in your running Hermes: {fallback}.)"
        if res.outcome == Outcome.CRASHED and res.dispatched:
            attempt = res.attempt or self.attempts + 1
            if attempt >= a.max_attempts:
                message += (f" That was attempt {attempt} of {a.max_attempts}: the retry budget is used up, so "
                            "hermes-tray will not continue it again.")
                self.journal(Outcome.GAVE_UP, reason=f"attempt {attempt} of {a.max_attempts} crashed")
        return self.result(res.outcome, message, a.verdict, res, fallback=fallback)


__all__ = ["Assessment", "ResumeResult", "assess", "resume_turn", "settings_options"]
