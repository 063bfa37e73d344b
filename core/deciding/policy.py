"""What should happen to one interrupted turn: the tray's one home for verdicts, ages and reasons.

:func:`judge` and :func:`decide_webui` take everything as arguments (no I/O, no clock), so the scanner and the
resume's re-check reach one verdict in one order (docs/architecture.md, "The ledger, and the one judge"). A
writer of *unknown* liveness does not block by itself (Hermes' scheduler blocks only ``alive``) unless a live
Hermes process serves the home. An unreadable source leaves the other checks standing; a marker that would be
``actionable`` reads ``running``, ``unsure``. Each :class:`Decision` carries the age its line states, which
every view shows. The tray's mode never changes a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from hermes_tray_core.hermes.config import (
    DEFAULT_ENABLED,
    DEFAULT_FRESHNESS_MINUTES,
    DEFAULT_MAX_ATTEMPTS,
    MAX_FRESHNESS_MINUTES,
    AutoContinueConfig,
)
from hermes_tray_core.numbers import finite, json_int
from hermes_tray_core.stores.ledger import NOTHING, TurnStatus
from hermes_tray_core.turn import Marker
from hermes_tray_core.vocab import ReasonCode, Verdict, WriterState

__all__ = [
    "Verdict", "ReasonCode", "VERDICTS", "AutoContinueConfig", "Decision", "Facts", "Seen", "decide", "decide_webui",
    "judge",
    "marker_age", "age_text", "restate_age",
    "DEFAULT_ENABLED", "DEFAULT_FRESHNESS_MINUTES", "DEFAULT_MAX_ATTEMPTS", "MAX_FRESHNESS_MINUTES", "MAX_AGE_SECONDS",
]

# What decide() can return (SKIPPED, STOPPED and FINISHED are judge()'s, from the tray's own ledger).
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict if v not in (Verdict.SKIPPED, Verdict.STOPPED,
                                                                        Verdict.FINISHED))

# Ages are capped (about 3,000 years): beyond every finite window, and every reason and JSON number stays
# short.
MAX_AGE_SECONDS = 1e11
#: Newer Hermes' marker reader drops an entry that starts further than this in the future.
FUTURE_SKEW_SECONDS = 300.0


class Decision(NamedTuple):
    """A verdict, its reason code, the one line a user reads, and the age that line states."""

    verdict: Verdict
    reason: str
    unsure: bool = False
    code: ReasonCode | None = None
    age_seconds: float = 0.0

    @property
    def actionable(self) -> bool:
        return self.verdict == Verdict.ACTIONABLE


MAX_AGE_SAID = 10 * 365 * 86400.0  # seconds: older than Hermes itself, a time no turn started at


def age_text(seconds: float | None) -> str:
    """``"12 s ago"`` … ``"3 days ago"``: the one age formatter of every reason, view and ``status``. Negative
    and non-finite ages read as 0; one over :data:`MAX_AGE_SAID` (a ``started_at`` of 0 read "20791 days ago")
    as unknown."""
    if seconds is None:
        return "at an unknown time"
    s = max(0.0, finite(seconds) or 0.0)
    if s > MAX_AGE_SAID:
        return "at an unknown time"
    if s < 60:
        return f"{int(s)} s ago"
    if s < 90 * 60:
        return f"{int(s // 60)} min ago"
    if s < 36 * 3600:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} days ago"


def restate_age(reason: str, stated_age: float | None, age_now: float | None) -> str:
    """``reason`` with its ``stated_age`` said again as ``age_now``: it ticks with the row above it."""
    if stated_age is None or age_now is None:
        return reason
    return reason.replace(age_text(stated_age), age_text(age_now), 1)


def _fmt_minutes(minutes: float) -> str:
    return f"{int(minutes)} min" if float(minutes).is_integer() else f"{minutes:g} min"


def marker_age(marker: Marker, now: float) -> float:
    """Seconds since the marker's reference time (0 when unknown or in the future)."""
    return _age(marker.reference_time, now)


def _age(ref: float | None, now: float) -> float:
    """``now - ref`` clamped into [0, MAX_AGE_SECONDS]: stale exactly when Hermes' unclamped age is."""
    if ref is None:
        return 0.0
    age = now - ref
    if not age > 0:  # in the future, or NaN
        return 0.0
    return min(age, MAX_AGE_SECONDS)


class Seen(NamedTuple):
    """What else was seen about a turn: its writer, the session's ``source``, Hermes' turn ``lease``, the
    active-session ``owner``, whether a live Hermes ``backend`` serves the home (weighed only for an unknown
    writer). ``unknown``: a source that exists and could not be read, never actionable. ``writer_note``: why
    the tray's writer verdict differs from Hermes'. ``writer_turn``: what a live writer that is a running
    backend of the home answered when asked; ``none`` (it runs no turn for the session, and Hermes would
    continue the marker there) keeps it from making the turn ``running``."""

    writer: WriterState = WriterState.UNKNOWN
    source: str | None = None
    lease: str = "free"
    owner: str = "none"
    activity_detail: str = ""
    backend: str = "none"
    backend_detail: str = ""
    writer_note: str = ""
    writer_turn: str = "unknown"
    writer_turn_detail: str = ""
    generation: int | None = None  # the session's conversation_generation in state.db, where newer Hermes keeps it


NOTHING_SEEN = Seen()


def decide(marker: Marker, *, config: AutoContinueConfig, now: float, seen: Seen = NOTHING_SEEN) -> Decision:
    """Hermes' verdict on one marker, junk judged as Hermes' ``read_turn_marker`` judges it (only a conversion
    that raises makes an entry it ignores)."""
    if not marker.is_entry:
        return Decision(Verdict.NOT_OURS, "marker entry is not an object; Hermes ignores it",
                        code=ReasonCode.MALFORMED_ENTRY)
    attempts = marker.attempts
    age = marker_age(marker, now)
    writer, lease, owner, backend, backend_detail = seen.writer, seen.lease, seen.owner, seen.backend, seen.backend_detail

    # the age counts from Hermes' own moment: said "interrupted" only when Hermes wrote when that was
    since = "interrupted" if marker.interrupted_at is not None else "started"

    def out(verdict: Verdict, code: ReasonCode, reason: str, unsure: bool = False) -> Decision:
        return Decision(verdict, reason, unsure, code, age)

    # 1. not-ours
    if not marker.auto_continue:
        return out(Verdict.NOT_OURS, ReasonCode.AUTO_CONTINUE_OFF,
                   "auto_continue is off for this turn: another mechanism owns its recovery")
    if not marker.prompt.strip():
        what = "a queued entry with no prompt" if marker.queued else "no prompt recorded"
        return out(Verdict.NOT_OURS, ReasonCode.NO_PROMPT, f"{what}: there is nothing to continue")
    if seen.source == "bot_room":
        return out(Verdict.NOT_OURS, ReasonCode.HOSTED_ROOM, "hosted bot_room session: its driver owns recovery")
    if attempts is None or marker.hermes_started is None:
        bad = "attempts" if attempts is None else "started_at"
        return out(Verdict.NOT_OURS, ReasonCode.MALFORMED_ENTRY,
                   f"malformed marker ({bad} is not a number Hermes can read): Hermes ignores it")
    if marker.hermes_started > now + FUTURE_SKEW_SECONDS:  # newer Hermes' reader drops it (a clock set wrong)
        return out(Verdict.NOT_OURS, ReasonCode.FUTURE_ENTRY,
                   "its start time is more than 5 minutes in the future (a clock was wrong when it was written): "
                   "Hermes ignores it")
    marked = marker.raw.get("conversation_generation")
    if isinstance(marked, int) and not isinstance(marked, bool) and seen.generation is not None \
            and marked != seen.generation:
        return out(Verdict.NOT_OURS, ReasonCode.OTHER_GENERATION,
                   "the chat was cleared since this turn started: Hermes does not continue it")
    # 2. running
    detail = f" ({seen.activity_detail})" if seen.activity_detail else ""
    idle_writer = writer == WriterState.ALIVE and seen.writer_turn == "none"
    if idle_writer:  # asked, the live backend that wrote it runs no turn for it: judged as Hermes would there
        writer = WriterState.DEAD
    if writer == WriterState.ALIVE:
        pid = _short(marker.raw.get("writer_pid"))
        return out(Verdict.RUNNING, ReasonCode.WRITER_ALIVE,
                   f"its writer (pid {pid}) is still running: the turn is not interrupted{_paren(seen.writer_note)}")
    if lease == "live":
        return out(Verdict.RUNNING, ReasonCode.LEASE_LIVE, f"a Hermes backend holds this session's turn lease{detail}")
    if owner == "alive":
        return out(Verdict.RUNNING, ReasonCode.OWNER_ALIVE, f"a live Hermes process has this session open{detail}")
    unsure: tuple[ReasonCode, str] | None = None
    if writer != WriterState.DEAD:
        raw_pid = marker.raw.get("writer_pid")
        why = ("the marker has no writer pid (written by an older backend)" if raw_pid is None
               else f"cannot tell whether writer pid {_short(raw_pid)} is still running")
        if backend == "live":
            return out(Verdict.RUNNING, ReasonCode.BACKEND_LIVE,
                       f"{why}, and Hermes {backend_detail or 'backend'} serves this home: "
                       "the turn may be running there", unsure=True)
        if backend not in ("none", "live"):
            unsure = (ReasonCode.BACKEND_LIVE,
                      f"{why}, and whether a Hermes backend serves this home cannot be read{_paren(backend_detail)}")
    if unsure is None and lease not in ("free", "live"):
        unsure = (ReasonCode.LEASE_UNKNOWN, f"cannot read this session's Hermes turn lease{detail}")
    elif unsure is None and owner not in ("dead", "none", "alive"):
        unsure = (ReasonCode.OWNER_UNKNOWN, f"cannot tell whether the session's owner process is alive{detail}")
    # 3. disabled
    if not config.enabled:
        where = ("the administrator's managed config" if "enabled" in config.managed
                 else "this home's config.yaml")
        return out(Verdict.DISABLED, ReasonCode.DISABLED, f"auto-continue is disabled in {where}")
    # 4. stale
    window = float(config.freshness_minutes) * 60.0
    if config.freshness_minutes < MAX_FRESHNESS_MINUTES and age > window:  # the maximum is Hermes' .inf
        return out(Verdict.STALE, ReasonCode.STALE,
                   f"{since} {age_text(age)}, beyond the {_fmt_minutes(config.freshness_minutes)} "
                   "freshness window")
    # 5. exhausted
    if attempts >= config.max_attempts:
        return out(Verdict.EXHAUSTED, ReasonCode.EXHAUSTED,
                   f"already continued {attempts} {'time' if attempts == 1 else 'times'}; the budget is "
                   f"{config.max_attempts}")
    if unsure is not None:
        return out(Verdict.RUNNING, unsure[0], f"{unsure[1]}; left alone until that is known", unsure=True)
    # 6. actionable
    older = "; written by an older backend" if writer != WriterState.DEAD else ""
    if idle_writer:
        older = f"; {seen.writer_turn_detail or 'its writer, a running Hermes backend, runs no turn for it'}"
    return out(Verdict.ACTIONABLE, ReasonCode.ACTIONABLE,
               f"{since} {age_text(age)}; would be continuation {attempts + 1} of "
               f"{config.max_attempts}{older}")


class Facts(NamedTuple):
    """Everything :func:`judge` weighs beside the marker. ``note``: for a marker of a continuation the tray
    submitted its note to, ``finished`` or ``unknown`` (``note_detail`` says why) as ``state.db`` shows it,
    else None."""

    config: AutoContinueConfig
    now: float
    seen: Seen = NOTHING_SEEN
    ledger: TurnStatus = NOTHING
    note: str | None = None
    note_detail: str = ""


def judge(marker: Marker, facts: Facts) -> Decision:
    """The one verdict on a desktop marker: the tray's own settlements, then :func:`decide`."""
    known, age = facts.ledger, marker_age(marker, facts.now)
    if marker.is_entry:
        if known.skipped:
            return Decision(Verdict.SKIPPED, "skipped earlier (the tray's ledger); a stale Hermes write brought its "
                            "marker back, so it is removed again — it will not be resumed", code=ReasonCode.TOMBSTONED,
                            age_seconds=age)
        if known.finished or facts.note == "finished":
            how = facts.note_detail if facts.note == "finished" else "the tray's ledger"
            return Decision(Verdict.FINISHED, f"it was already continued and completed ({how or 'state.db'}), yet its "
                            "marker is back", code=ReasonCode.FINISHED, age_seconds=age)
        if known.stopped is not None:
            who = "you stopped it" if known.stopped == "interrupted" else "the tray gave up on it"
            return Decision(Verdict.STOPPED, f"{who} earlier (the tray's ledger): a Stop is final, so it is not resumed "
                            "again; its marker stays only while Hermes' file cannot be changed", code=ReasonCode.STOPPED,
                            age_seconds=age)
        if facts.note == "unknown":
            return Decision(Verdict.RUNNING, "cannot tell whether the tray's previous continuation of this turn "
                            f"finished ({facts.note_detail or 'state.db cannot be read'})", True,
                            ReasonCode.UNSURE_FINISHED, age)
    return decide(marker, config=facts.config, now=facts.now, seen=facts.seen)


def decide_webui(turn: Mapping[str, Any], *, worker: WriterState, now: float, server: str = "none",
                 server_detail: str = "", pending_turns: int = 1) -> Decision:
    """Verdict on a WebUI session's newest unfinished turn (never resumed by the tray): ``running`` while its
    worker or a WebUI server of its state dir (``server``) lives, else interrupted, to retry in the WebUI."""
    started = finite(turn.get("started_at"))
    age = _age(started, now)
    more = f" ({pending_turns} unfinished turns in this session)" if pending_turns > 1 else ""
    if worker == WriterState.ALIVE:
        return Decision(Verdict.RUNNING, f"WebUI turn still running (worker pid {_short(turn.get('pid'))}){more}",
                        False, ReasonCode.WEBUI_WORKER_ALIVE, age)
    if worker != WriterState.DEAD and server == "live":
        return Decision(Verdict.RUNNING, f"WebUI turn has not finished and the WebUI server {server_detail} for "
                        f"its state dir is running{more}", True, ReasonCode.WEBUI_SERVER_LIVE, age)
    if worker != WriterState.DEAD and server not in ("none", "live"):
        return Decision(Verdict.RUNNING, "WebUI turn has not finished; cannot tell whether a WebUI server is "
                        f"running{_paren(server_detail)}{more}", True, ReasonCode.WEBUI_SERVER_LIVE, age)
    gone = f"its worker (pid {_short(turn.get('pid'))}) is gone" if worker == WriterState.DEAD else "no WebUI server is running"
    return Decision(Verdict.NOT_OURS, f"WebUI turn started {age_text(age)} did not finish ({gone}); retry it from the "
                    f"WebUI{more}", False, ReasonCode.WEBUI_INTERRUPTED, age)


def _short(value: Any) -> str:
    number = json_int(value)
    if number is not None and abs(number) >= 10**20:
        return "(a huge number)"
    text = str(number) if number is not None else repr(value)
    return text if len(text) <= 24 else text[:23] + "…"


def _paren(text: str) -> str:
    return f" ({text})" if text else ""

