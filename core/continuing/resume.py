"""Resume one interrupted turn, exactly once across every hermes-tray process.

``resume_turn(home, session_key, expected)``:

1. claims ``resume:<canonical home>:<session_key>`` in the tray's per-user lease store (fencing
   epoch; a second tray, the helper or another login gets "already being resumed");
2. re-reads the marker: it must still be there, equal ``expected`` (what the user was shown) and
   still be ``actionable`` by the same policy the scanner uses — a live writer, a live Hermes turn
   lease or a live active-session owner means a backend is on it: refuse and say continue there;
3. dispatches the continuation through Hermes (``core.continuing.gateway``) and follows it to the end;
4. journals each step — ``approved``, ``dispatched``, ``completed`` / ``interrupted`` /
   ``failed`` / ``gave-up`` (and ``refused``) — identity only, never prompt text;
5. releases the claim.

A continuation that dies leaves its marker with ``attempts + 1`` (its writer then dead); the
next resume sees it actionable until ``max_attempts``, where the engine stops and says so — unless
Hermes' ``state.db`` shows that continuation's note answered (:mod:`core.continuing.completion`): then it is
settled, journalled ``completed``, and refused.

This module is the gateway driver's caller: it reads the tray settings (which Hermes to run,
the continuation's inactivity limit) and hands them to :func:`core.continuing.gateway.continue_turn`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_tray_core.backend.install import settings_hermes_command
from hermes_tray_core.continuing import claim as exactly_once
from hermes_tray_core.continuing import gateway
from hermes_tray_core.keys import validate_session_id
from hermes_tray_core.vocab import ClaimRefusal, Outcome, RanIn, Refusal, Verdict, WriterState

logger = logging.getLogger(__name__)

EXIT_COMPLETED = 0
EXIT_REFUSED = 1
EXIT_FAILED = 3

REFUSED = Outcome.REFUSED
GAVE_UP = Outcome.GAVE_UP
CLAIM_TTL = 60.0



@dataclass
class ResumeResult:
    """How a resume request ended: ``outcome`` (a gateway outcome, ``refused`` or ``gave-up``),
    a one-line human ``message``, and the exit code the CLI uses (0 / 1 / 3)."""

    outcome: Outcome
    message: str
    home: str
    session_key: str
    verdict: str | None = None
    continuation: gateway.ContinuationResult | None = None
    code: Refusal | None = None  # why it was refused (``--json`` writes "" for none)
    # Why the user's running Hermes was not used and a separate gateway was spawned (None: it was used, or
    # no continuation was attempted).
    fallback_reason: str | None = None

    @property
    def exit_code(self) -> int:
        if self.outcome == Outcome.COMPLETED:
            return EXIT_COMPLETED
        if self.outcome in (Outcome.REFUSED, Outcome.GAVE_UP, Outcome.DECLINED):  # nothing ran: a refusal, with its reason
            return EXIT_REFUSED
        return EXIT_FAILED

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.COMPLETED

    def to_dict(self) -> dict[str, Any]:
        c = self.continuation
        return {
            "outcome": self.outcome, "message": self.message, "home": self.home,
            "session_key": self.session_key, "verdict": self.verdict, "exit_code": self.exit_code,
            "continued_by": c.continued_by if c else None, "attempt": c.attempt if c else None,
            "gateway_log": c.log_path if c else None, "timings": dict(c.timings) if c else {},
            "marker_left": c.marker_left if c else None,  # the continuation's marker could not be removed
            "code": self.code or "",
            # Where it ran: "running-backend" (the user's hermes dashboard, backend_pid) or "separate-process".
            "ran_in": c.ran_in if c else None, "backend_pid": c.backend_pid if c else None,
            "where": c.where if c else None, "fallback_reason": self.fallback_reason,
            # What Hermes did, as codes (core.vocab): why it did not continue the turn here, how the tray learnt
            # the end, and why the tray left a session alone instead of stopping it.
            "not_continued": c.not_continued if c else None, "holder_pid": c.holder_pid if c else None,
            "finish": c.finish if c else None, "left_alone": c.left_alone if c else None,
        }


# The claim's home is core.continuing.claim; these names stay importable from here for callers and tests.
canonical_home = exactly_once.canonical_home
claim_name = exactly_once.claim_name
_lease_store = exactly_once.lease_store



#: what the user can still do about a turn resume refuses, by verdict (the turns window's "Recent" says the same)
_HINTS = {
    Verdict.RUNNING: " Continue it in the Hermes window that has it open.",
    Verdict.DISABLED: " Hermes auto-continue is off there: `hermes-tray enable` turns it back on, then resume it"
                " (or skip it with `hermes-tray skip`).",
    Verdict.STALE: " Continue it by hand in Hermes if it still matters, or skip it with `hermes-tray skip`.",
}

def settings_options() -> gateway.GatewayOptions:
    """Gateway options with the tray's ``continuation_idle_timeout`` (defaults if the settings are unreadable:
    the refusal for that comes from :func:`settings_hermes_command`)."""
    from hermes_tray_core.stores.settings import SettingsError, load_settings

    try:
        idle = load_settings().continuation_idle_timeout
    except (SettingsError, OSError):
        return gateway.GatewayOptions()
    return gateway.GatewayOptions(idle_timeout=float(idle))


def _journal(event: str, home: str, key: str, started_at: float | None = None, **fields: Any) -> None:
    """Decision journal entry for the turn that started at ``started_at`` (bookkeeping: a failure is
    logged, never raised)."""
    try:
        from hermes_tray_core.stores import decisions

        decisions.record(event, home=home, session_key=key, started_at=started_at, **fields)
    except Exception:
        logger.warning("could not journal %s for %s", event, key, exc_info=True)


@dataclass(frozen=True)
class Assessment:
    """The policy's verdict on one marker right now, with the config it used."""

    verdict: Verdict
    reason: str
    unsure: bool
    max_attempts: int


def assess(home: Path | str, session_key: str, entry: Mapping[str, Any], *, now: float | None = None) -> Assessment:
    """The scanner's verdict for one marker entry: writer, Hermes turn lease, active-session owner."""
    from hermes_tray_core.deciding.policy import decide
    from hermes_tray_core.hermes.config import read_backend_config
    from hermes_tray_core.hermes.state_db import lookup_session, session_activity
    from hermes_tray_core.markers.store import writer_judgement

    now = time.time() if now is None else now
    cfg = read_backend_config(home).auto_continue
    judged = writer_judgement(dict(entry), home)
    writer = judged.state
    info, _problem = lookup_session(home, session_key)
    source = info.source if info else None
    activity = session_activity(home, session_key, now=now)
    owner = activity.owner.state
    turn, turn_detail = "unknown", ""
    if writer == WriterState.ALIVE:  # a live backend that wrote it may run no turn for it any more: ask it
        from hermes_tray_core.backend.sessions import ask_writer

        pid, start = entry.get("writer_pid"), entry.get("writer_start_time")
        if isinstance(pid, int) and not isinstance(pid, bool):
            answer = ask_writer(home, session_key, pid, float(start) if isinstance(start, (int, float))
                                and not isinstance(start, bool) else None)
            turn, turn_detail = answer.state, answer.detail
            if turn == "none" and activity.owner.pid == pid:
                owner = "none"  # the registry's owner is that very backend, which runs no turn for it
    details = [v.detail for v in (activity.lease, activity.owner) if v.state in ("live", "alive", "unknown")]
    backend, backend_detail = "none", ""
    if writer == WriterState.UNKNOWN:  # Hermes' order lets an unknown writer through: unless a live Hermes serves the home
        from hermes_tray_core.hermes.processes import backend_state

        backend, backend_detail = backend_state(home)
    d = decide(entry, config=cfg, writer=writer, now=now, source=source, lease=activity.lease.state,
               owner=owner, activity_detail="; ".join(details), backend=backend,
               backend_detail=backend_detail, writer_note=judged.note, writer_turn=turn,
               writer_turn_detail=turn_detail)
    return Assessment(d.verdict, d.reason, d.unsure, int(cfg.max_attempts))


def resume_turn(
    home: Path | str,
    session_key: str,
    expected: Mapping[str, Any] | None = None,
    *,
    install: gateway.HermesInstall | None = None,
    options: gateway.GatewayOptions | None = None,
    on_progress: Callable[[gateway.Progress], None] | None = None,
    on_dispatched: Callable[[gateway.ContinuationResult], None] | None = None,
    stop: threading.Event | None = None,
    lease_path: Path | None = None,
    claim_wait: float = 0.0,
    env: Mapping[str, str] | None = None,
    via: str = "api",
    prefer_running_backend: bool = True,
) -> ResumeResult:
    """Resume ``session_key`` in ``home`` once (see module doc). Never raises for expected failures.

    ``expected``: the raw marker entry the user was shown (``list_turn_markers``); None = whatever
    is there now (auto mode). ``on_dispatched`` fires when the continuation has started.
    ``prefer_running_backend``: continue inside the user's running ``hermes dashboard`` of that home when
    there is one (``core.backend.running``); False always spawns a gateway (benchmarks compare the two).
    Raises :class:`~core.keys.InvalidIdError` for a malformed ``session_key``.
    """
    validate_session_id(session_key, what="session key")  # InvalidIdError: a caller bug, not a turn state
    home_s = canonical_home(home)
    key = session_key

    def refused(message: str, code: Refusal, verdict: str | None = None) -> ResumeResult:
        _journal("refused", home_s, key, None, reason=message, verdict=verdict, via=via)
        return ResumeResult(REFUSED, message, home_s, key, verdict, code=code)

    held = exactly_once.claim(home_s, key, purpose="resume", via=via, ttl=CLAIM_TTL, wait=claim_wait,
                              lease_path=lease_path)
    if isinstance(held, exactly_once.ClaimRefused):
        if held.code == ClaimRefusal.CLAIM_ERROR:  # unsure whether someone else holds it: refuse
            return ResumeResult(REFUSED, f"Not resumed: {held.message}.", home_s, key, code=Refusal.STORE_ERROR)
        return refused(f"Not resumed: {held.message}.",
                       Refusal.BEING_SKIPPED if held.code == ClaimRefusal.BUSY_SKIP else Refusal.CLAIMED_ELSEWHERE)
    store, lease = held.store, held.lease
    from hermes_tray_core.stores.lease import LeaseKeeper

    keeper = LeaseKeeper(store, lease, ttl=CLAIM_TTL,
                         on_lost=lambda _l: logger.error("resume claim on %s lost mid-run", key)).start()
    try:
        return _resume_claimed(home, home_s, key, expected, install, options, on_progress, on_dispatched,
                               prefer_running_backend,
                               stop, env, via, lease.epoch, refused)
    finally:
        keeper.stop()
        keeper.join(timeout=5)
        exactly_once.release(held, key)


SETTLED = exactly_once.SETTLED
_settled = exactly_once.settled


def _choose_backend(backends: list[Any], entry: Mapping[str, Any]) -> Any:
    """Which running backend to continue in: the one the marker names as its writer when it is among them
    (Hermes continues a marker of its own process, never another live one's), else the first found."""
    writer = entry.get("writer_pid")
    for b in backends:
        if b.pid == writer:
            return b
    return backends[0] if backends else None


def _resume_claimed(home: Path | str, home_s: str, key: str, expected: Mapping[str, Any] | None,
                    install: gateway.HermesInstall | None, options: gateway.GatewayOptions | None,
                    on_progress: Callable[[gateway.Progress], None] | None,
                    on_dispatched: Callable[[gateway.ContinuationResult], None] | None,
                    prefer_running_backend: bool, stop: threading.Event | None, env: Mapping[str, str] | None, via: str, epoch: int,
                    refused: Callable[..., ResumeResult]) -> ResumeResult:

    # Looking for the user's running backends (a process-table walk), asking their installation what it can do
    # (cached) and connecting to them overlap the re-checks below; nothing is asked of a backend until then.
    looked: list[tuple[list[Any], str | None, float]] = []
    connections: dict[int, Any] = {}
    finder: threading.Thread | None = None
    if prefer_running_backend:
        def look() -> None:
            from hermes_tray_core.backend.running import find_live_backends

            t = time.monotonic()
            try:
                backends, why = find_live_backends(home)
            except Exception as exc:  # never a reason not to resume: the separate gateway, and why
                backends, why = [], f"cannot look for a running Hermes ({type(exc).__name__})"
            looked.append((backends, why, time.monotonic() - t))
            for b in backends:
                try:
                    if gateway.backend_capabilities(home, b).auto_continue is not None:
                        connections[b.pid] = gateway.connect_backend(b)
                except Exception:  # continue_in_backend connects again, and says why it cannot
                    logger.debug("could not connect to %s ahead of the resume", b.describe(), exc_info=True)

        finder = threading.Thread(target=look, name="find-live-backend", daemon=True)
        finder.start()
    try:
        return _resume_checked(home, home_s, key, expected, install, options, on_progress, on_dispatched, stop, env,
                               via, epoch, refused, finder, looked, connections)
    finally:
        if finder is not None:
            finder.join()
        for s in list(connections.values()):  # those the continuation did not take
            s.shutdown(1.0)


def _resume_checked(home: Path | str, home_s: str, key: str, expected: Mapping[str, Any] | None,
                    install: gateway.HermesInstall | None, options: gateway.GatewayOptions | None,
                    on_progress: Callable[[gateway.Progress], None] | None,
                    on_dispatched: Callable[[gateway.ContinuationResult], None] | None,
                    stop: threading.Event | None, env: Mapping[str, str] | None, via: str, epoch: int,
                    refused: Callable[..., ResumeResult], finder: threading.Thread | None,
                    looked: list[tuple[list[Any], str | None, float]], connections: dict[int, Any]) -> ResumeResult:
    from hermes_tray_core.markers.store import MarkerStoreError, list_turn_markers

    try:
        entry = list_turn_markers(home).get(key)
    except MarkerStoreError as exc:
        return refused(f"Not resumed: cannot read the turn markers ({exc}).", Refusal.STORE_ERROR)
    if entry is None:
        return refused("Not resumed: this turn is no longer marked as interrupted (it finished, was skipped, "
                       "or was resumed elsewhere).", Refusal.GONE)
    if expected is not None and dict(entry) != dict(expected):
        return refused("Not resumed: the interrupted turn changed since it was shown (another attempt ran or "
                       "Hermes updated it); look at it again.", Refusal.CHANGED)
    started_at = exactly_once.turn_started_at(entry)

    def journal(event: str, **fields: Any) -> None:
        _journal(event, home_s, key, started_at, via=via, **fields)

    from hermes_tray_core.continuing.completion import settle_if_finished

    settled = settle_if_finished(home, key, entry)
    if settled is not None and not settled.finished:  # unsure whether it finished: never risk a second turn
        why = f"cannot tell whether the tray's previous continuation of this turn finished ({settled.reason})"
        journal("refused", reason=why, verdict="unsure")
        return ResumeResult(REFUSED, f"Not resumed: {why}. Try again when Hermes' state.db can be read.",
                            home_s, key, "unsure", code=Refusal.NOT_ACTIONABLE)
    if settled is not None:  # a continuation the tray ran finished; its own process did not say so
        why = f"this turn was already continued and completed ({settled.reason})"
        journal("refused", reason=why, verdict="settled")
        return ResumeResult(REFUSED, f"Not resumed: {why}." + (
            "" if settled.retired else " Its marker could not be removed: skip it with `hermes-tray skip`."),
            home_s, key, "settled", code=Refusal.ALREADY_SETTLED)
    done = _settled(home_s, key, started_at)
    if done:
        why = ("was skipped" if done == "skipped" else "was already continued and completed") + \
            " (the tray's decision journal says so), yet its marker is back"
        removed = exactly_once.enforce_tombstones(home, {key: entry})
        journal("refused", reason=f"this turn {why}", verdict="settled")
        tail = (" The stale marker was removed again, so Hermes will not continue it either." if removed else
                " Skip it to remove the marker, or continue it by hand in Hermes.")
        return ResumeResult(REFUSED, f"Not resumed: this turn {why}.{tail}", home_s, key, "settled",
                            code=Refusal.ALREADY_SETTLED)
    a = assess(home, key, entry)
    if a.verdict == Verdict.EXHAUSTED:
        msg = f"Not resumed: gave up — {a.reason}. Continue it by hand in Hermes if it still matters."
        journal(GAVE_UP, reason=a.reason)
        return ResumeResult(GAVE_UP, msg, home_s, key, a.verdict)
    if a.verdict != Verdict.ACTIONABLE:
        hint = _HINTS.get(a.verdict, "") if not a.unsure else ""
        journal("refused", reason=f"{a.reason}", verdict=a.verdict)
        return ResumeResult(REFUSED, f"Not resumed: {a.reason}.{hint}", home_s, key, a.verdict, code=Refusal.NOT_ACTIONABLE)
    from hermes_tray_core.deciding.policy import marker_attempts, marker_prompt

    attempts = marker_attempts(entry) or 0  # as Hermes counts them: a negative count is 0, never -1 + 1
    prompt = marker_prompt(entry)  # as Hermes reads it: a number in that field is its text
    assert prompt.strip()  # actionable implies a prompt
    approved: list[threading.Thread] = []

    def approve(gateway_pid: int | None = None) -> None:
        # Journalled beside Hermes' start-up (a durable append is an fsync); every later step of this
        # resume waits for it (approved_done), so the journal order is always approved → dispatched → …
        if not approved:
            t = threading.Thread(target=journal, args=("approved",), name="journal-approved", daemon=True,
                                 kwargs={"attempts": attempts, "epoch": epoch, "gateway_pid": gateway_pid})
            approved.append(t)
            t.start()

    def approved_done() -> None:
        approve()
        approved[0].join()

    def dispatched(res: gateway.ContinuationResult) -> None:
        approved_done()
        journal("dispatched", attempt=res.attempt, continued_by=res.continued_by, gateway_pid=res.gateway_pid,
                epoch=epoch, ran_in=res.ran_in, backend_pid=res.backend_pid)
        if on_dispatched is not None:
            on_dispatched(res)

    def submitting(marker: Mapping[str, Any]) -> None:
        # The continuation's own marker (its identity: this session + its started_at) and how state.db
        # will show the note answered: journalled before the note is submitted (core.continuing.completion).
        from hermes_tray_core.continuing.completion import mark_of

        approved_done()  # the journal order stays approved → continuing → dispatched → …
        mark = mark_of(marker)
        _journal("continuing", home_s, key, exactly_once.turn_started_at(marker), via=via, attempt=marker.get("attempts"),
                 original_started_at=started_at, **(mark.fields() if mark else {}))

    res: gateway.ContinuationResult | None = None
    fallback: str | None = None
    if finder is not None:
        t_wait = time.monotonic()
        finder.join()
        waited = time.monotonic() - t_wait
        backends, fallback, took_find = looked[0]
        backend = _choose_backend(backends, entry)
        if backend is not None:
            res = gateway.continue_in_backend(home, key, backend, original_prompt=prompt, attempts=attempts,
                                              options=options or settings_options(), on_progress=on_progress,
                                              on_dispatched=dispatched, stop=stop, expected=entry,
                                              on_submitting=submitting, on_connected=approve,
                                              other_backends=tuple(backends), connections=connections)
            res.timings["find_backend"] = took_find
            res.timings["find_backend_wait"] = waited  # what the overlap with the re-checks left over
            if res.backend_unusable:  # nothing was resumed there: a separate gateway, and say why
                from hermes_tray_core.backend.running import forget

                forget(home)
                fallback = f"your running Hermes (pid {backend.pid}) could not be used: {res.backend_unusable}"
                res = None
    else:
        fallback = "the running backend was not asked (disabled for this call)"
    if res is None:
        try:
            inst = install or gateway.find_hermes(settings_hermes_command())  # the caller's choice
        except gateway.HermesSettingsError as exc:  # which Hermes the user chose is unknown: guess nothing
            journal("refused", reason=str(exc), verdict=a.verdict, fallback_reason=fallback)
            return ResumeResult(REFUSED, f"Not resumed: {exc}", home_s, key, a.verdict, code=Refusal.NO_HERMES_CHOICE,
                                fallback_reason=fallback)
        except gateway.HermesNotFound as exc:
            approved_done()
            journal("failed", outcome=gateway.ERROR, reason=str(exc), dispatched=False, fallback_reason=fallback)
            return ResumeResult(gateway.ERROR, f"Not resumed: {exc}", home_s, key, a.verdict,
                                fallback_reason=fallback)
        res = gateway.continue_turn(home, key, original_prompt=prompt, attempts=attempts, install=inst,
                                    options=options or settings_options(), on_progress=on_progress,
                                    on_dispatched=dispatched, on_spawned=approve, stop=stop, env=env,
                                    expected=entry, on_submitting=submitting)
    else:
        fallback = None
    approved_done()  # (also when Hermes never started: approved, then failed)
    where = {"ran_in": res.ran_in, "backend_pid": res.backend_pid, "fallback_reason": fallback}
    if res.marker_changed:  # a skip (or Hermes) changed the entry while Hermes was starting: it won
        journal("refused", reason="marker changed before the continuation was submitted", verdict=a.verdict,
                dispatched=False, **where)
        return ResumeResult(REFUSED, res.message, home_s, key, a.verdict, res, code=Refusal.CHANGED, fallback_reason=fallback)
    if res.live_elsewhere:  # open / running in the user's Hermes app, or taken while ours was starting
        journal("refused", reason=res.live_elsewhere, verdict=Verdict.RUNNING, dispatched=False,
                not_continued=res.not_continued, holder_pid=res.holder_pid, **where)
        return ResumeResult(REFUSED, res.message, home_s, key, Verdict.RUNNING, res, code=Refusal.NOT_ACTIONABLE,
                            fallback_reason=fallback)
    fields = {"attempt": res.attempt, "attempts": attempts, "continued_by": res.continued_by, "status": res.status,
              "dispatched": res.dispatched, "gateway_exit": res.gateway_exit, **where,
              **{f"t_{k}": round(v, 3) for k, v in res.timings.items() if not k.endswith("_at")}}
    if res.log_problem:
        fields["log_problem"] = res.log_problem
    if res.outcome == Outcome.COMPLETED:
        event, extra = "completed", {}
    elif res.outcome == Outcome.INTERRUPTED:  # by a stop the user asked for, or by Hermes itself
        event, extra = "interrupted", {"stopped_by": "you" if res.stopped_by_request else "hermes"}
    else:
        event, extra = "failed", {"outcome": res.outcome, "reason": res.message[:300]}
    for name in ("not_continued", "finish", "left_alone"):
        if getattr(res, name):
            extra[name] = getattr(res, name)
    journal(event, **extra, **fields)
    if res.marker_left:
        # The continuation's own marker (attempts + 1, new started_at, a writer now gone) could not be
        # removed and would read actionable: record the same outcome under its identity, so ask-once and
        # auto mode see it answered and a resume of it is refused (completed).
        _journal(event, home_s, key, res.marker_left_started_at, via=via, marker_left=res.marker_left,
                 **extra, **fields)
    message = res.message
    if res.dispatched and res.where:
        message += f" It ran {res.where}."
    if fallback and res.ran_in == RanIn.SEPARATE_PROCESS and res.dispatched:
        message += f" (Not in your running Hermes: {fallback}.)"
    if res.outcome == Outcome.CRASHED and res.dispatched:
        attempt = res.attempt or attempts + 1
        if attempt >= a.max_attempts:
            message += (f" That was attempt {attempt} of {a.max_attempts}: the retry budget is used up, so "
                        "hermes-tray will not continue it again.")
            journal(GAVE_UP, reason=f"attempt {attempt} of {a.max_attempts} crashed")
    return ResumeResult(res.outcome, message, home_s, key, a.verdict, res, fallback_reason=fallback)


__all__ = ["EXIT_COMPLETED", "EXIT_FAILED", "EXIT_REFUSED", "GAVE_UP", "REFUSED", "Assessment", "ResumeResult",
           "assess", "canonical_home", "claim_name", "resume_turn", "settings_options"]
