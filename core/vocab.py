"""The engine's typed vocabulary: string enums whose values are exactly the strings the JSON output,
the journal and docs/cli.md use (``StrEnum`` members *are* those strings), so typing a value never changes
what a user or a script reads.
"""

from __future__ import annotations

import enum
import sys

__all__ = ["StrEnum", "Verdict", "WriterState", "ProcessKind", "ReasonCode", "Outcome", "Mode", "NotContinued",
           "Finish", "Refusal", "SkipOutcome", "RanIn", "ContinuedBy", "TurnSource", "StopCause", "StepKind",
           "StopReason", "Event", "Moment"]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10 (a version check, not try/except: mypy then sees real enums)

    class StrEnum(str, enum.Enum):
        """``enum.StrEnum`` for Python 3.10: members format and print as their value."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, format_spec: str) -> str:
            return str.__format__(self, format_spec)


class Verdict(StrEnum):
    """What the tray may do with one interrupted turn (first match wins, Hermes' own order)."""

    NOT_OURS = "not-ours"
    RUNNING = "running"
    DISABLED = "disabled"
    STALE = "stale"
    EXHAUSTED = "exhausted"
    ACTIONABLE = "actionable"
    # not Hermes' verdicts: the ledger settles this very turn, yet its marker is there (a stale write, or a
    # file that could not be changed): never offered or resumed again
    SKIPPED = "skipped"
    STOPPED = "stopped"  # by you, or given up by the tray
    FINISHED = "finished"  # a continuation of ours finished it: never even listed


class WriterState(StrEnum):
    """Is the process that wrote a marker (or a WebUI turn's worker) still running?"""

    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


class ProcessKind(StrEnum):
    """A live Hermes process, by what it serves (:mod:`hermes_tray_core.hermes.processes`)."""

    DASHBOARD = "dashboard"  # ``hermes dashboard``: the Desktop backend (loopback FastAPI + /api/ws gateway)
    GATEWAY = "gateway"  # ``python -m tui_gateway.entry``: a stdio JSON-RPC backend
    CLI = "cli"  # any other ``hermes`` command (chat, the TUI, the messaging gateway, ...)
    WEBUI = "webui"  # a Hermes WebUI server (its turn journals live in its state dir)


class BackendKind(StrEnum):
    """Which running Hermes a continuation goes to (:class:`~hermes_tray_core.backend.endpoint.BackendEndpoint`)."""

    DASHBOARD = "dashboard"  # ``hermes dashboard`` / ``hermes serve``: found in the process table, token or ticket
    GATEWAY = "gateway"  # the gateway that owns every session: found through its control socket, tickets only


class ReasonCode(StrEnum):
    """Why a verdict was reached: what decisions and the shell branch on, never the English reason line."""

    MALFORMED_ENTRY = "malformed-entry"
    AUTO_CONTINUE_OFF = "auto-continue-off"
    NO_PROMPT = "no-prompt"
    HOSTED_ROOM = "hosted-room"
    FUTURE_ENTRY = "future-entry"  # starts more than 5 minutes in the future: newer Hermes' reader drops it
    OTHER_GENERATION = "other-generation"  # of a conversation generation before a chat clear: not continued
    WRITER_ALIVE = "writer-alive"
    LEASE_LIVE = "lease-live"
    OWNER_ALIVE = "owner-alive"
    BACKEND_LIVE = "backend-live"  # a live Hermes process serves the home (writer unknown)
    LEASE_UNKNOWN = "lease-unknown"
    OWNER_UNKNOWN = "owner-unknown"
    DISABLED = "disabled"
    STALE = "stale"
    EXHAUSTED = "exhausted"
    ACTIONABLE = "actionable"
    WEBUI_WORKER_ALIVE = "webui-worker-alive"
    WEBUI_SERVER_LIVE = "webui-server-live"
    WEBUI_INTERRUPTED = "webui-interrupted"
    TOMBSTONED = "tombstoned"  # skipped earlier (the ledger): never offered again
    STOPPED = "stopped"  # stopped by you, or given up by the tray, earlier (the ledger): never again
    FINISHED = "finished"  # continued by the tray and finished (the ledger, or state.db): never again
    UNSURE_FINISHED = "unsure-finished"  # a continuation of ours ran it, and whether it finished cannot be read


class Outcome(StrEnum):
    """How a continuation or a resume request ended (``refused`` and ``gave-up``: nothing ran)."""

    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    CRASHED = "crashed"
    TIMED_OUT = "timed-out"
    DECLINED = "declined"  # a backend with the feature chose not to continue
    DETACHED = "detached"  # the tray stopped following it (it quit, or a window shares the session)
    REFUSED = "refused"
    GAVE_UP = "gave-up"

    @classmethod
    def of(cls, value: object) -> Outcome:
        """The outcome named ``value``; an unknown name is an error (never mistaken for success)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.ERROR


class Mode(StrEnum):
    """What the tray does about a newly interrupted turn (the ``mode`` tray setting)."""

    ASK = "ask"  # notify and wait for the user
    AUTO = "auto"  # resume at once, notify after
    LIST = "list"  # only list it ("off" is its older name, still read)


class NotContinued(StrEnum):
    """Why a resume that reached Hermes did not continue the turn there, read from Hermes' own facts."""

    OPEN_IN_APP = "open-in-app"  # live in a Hermes backend (a window holds it): nothing was sent
    OPENED_DURING_CHECK = "opened-during-check"  # a window attached between the tray's check and its resume
    ANOTHER_OWNER = "another-owner"  # another Hermes process continues it (the losing side of a race)
    WRITER_ALIVE = "writer-alive"  # Hermes left the marker: its writer is alive (another process runs it)
    STALE = "stale"  # Hermes cleared the marker: older than its freshness window
    DISABLED = "disabled"  # Hermes cleared the marker: auto-continue is off
    EXHAUSTED = "exhausted"  # Hermes cleared the marker: its retry budget is spent
    NOT_STARTED = "not-started"  # Hermes said it would continue but started nothing within the bounded wait
    DECLINED = "declined"  # Hermes resumed the session and continued nothing, for a reason it did not give


class Finish(StrEnum):
    """How the tray learnt the end of a continuation (``ContinuationResult.finish``)."""

    STREAM = "stream"  # Hermes' own terminal frame (message.complete) on the tray's connection
    STATE_DB = "state-db"  # the events went elsewhere (a window took the session): Hermes' state.db has the reply
    LEFT_ALONE = "left-alone"  # the tray could not tell its turn from someone else's and left the session alone
    DETACHED = "detached"  # the tray quit while it ran: not learnt here; the next scan reads it from Hermes


class Refusal(StrEnum):
    """Why a resume was refused before anything ran, or the claim not granted (``resume --json``)."""

    CLAIMED_ELSEWHERE = "claimed-elsewhere"  # another hermes-tray process holds the turn's claim (resuming it)
    BEING_SKIPPED = "being-skipped"  # a skip holds the claim for a moment
    GONE = "gone"  # no longer marked: finished, skipped or resumed elsewhere
    CHANGED = "changed"  # the marker differs from the entry the user was shown
    ALREADY_SETTLED = "settled"  # the decision journal has it completed/skipped, yet its marker is back
    STOPPED = "stopped"  # the decision journal has it stopped by you (or given up), yet its marker is still there
    HOME_READ_ONLY = "home-read-only"  # Hermes could not write where the continuation must: nothing was started
    NOT_ACTIONABLE = "not-actionable"  # the policy's verdict says no (see ``verdict``)
    STORE_ERROR = "store-error"  # the lease store or the marker file could not be used: unsure, so nobody acts
    NO_HERMES_CHOICE = "hermes-settings"  # which Hermes to run is unknown (the tray settings are broken)
    GATEWAY_OWNS = "gateway-owns"  # a gateway owns the home's sessions and cannot be used: never a second runtime
    SESSIONS_ELSEWHERE = "sessions-elsewhere"  # this Hermes keeps its sessions outside state.db and the marker file


class SkipOutcome(StrEnum):
    """How a skip request ended (``SkipResult.outcome``)."""

    SKIPPED = "skipped"
    RESUMING = "resuming"  # a resume holds the turn's claim right now
    CHANGED = "changed"  # the entry changed or is gone since it was shown
    ERROR = "error"  # the lease store or the marker file could not be used


class RanIn(StrEnum):
    """Where a continuation ran (``ContinuationResult.ran_in``; the journal's and ``--json``'s ``ran_in``)."""

    RUNNING_BACKEND = "running-backend"  # the user's own ``hermes dashboard``, over its /api/ws
    SEPARATE_PROCESS = "separate-process"  # a gateway the tray spawned


class ContinuedBy(StrEnum):
    """Who continues the turn (``ContinuationResult.continued_by``)."""

    BACKEND = "backend"  # Hermes continues it itself (auto-continue)
    TRAY = "tray"  # the tray submitted the continuation note (an older Hermes)


class TurnSource(StrEnum):
    """Where an interrupted turn was found (``TurnRecord.source``)."""

    DESKTOP = "desktop"  # a Hermes marker (``<home>/desktop/interrupted_turns.json``): resumable
    WEBUI = "webui"  # an unfinished WebUI journal turn: informational, never acted on


class StopCause(StrEnum):
    """Why a turn stopped, each with its fact on this machine (``cause_fact``); without one ``unknown``."""

    SHUTDOWN = "shutdown"  # Hermes recorded that it was shut down (``interrupted_by: "shutdown"``: an update, a quit)
    OUT_OF_MEMORY = "out-of-memory"  # the kernel said it killed that very process (its log, its memory group)
    RESTARTED = "restarted"  # the computer started again after the turn's Hermes process did
    CONTINUATION_CRASHED = "continuation-crashed"  # the tray's journal: its own continuation of it exited mid-turn
    TRAY_QUIT = "tray-quit"  # the tray's journal: it quit while its continuation of the turn ran
    UNKNOWN = "unknown"


class Moment(StrEnum):
    """Which moment of a turn its age counts from: "interrupted N ago" only when that moment is known."""

    INTERRUPTED = "interrupted"  # Hermes' own ``interrupted_at``, or the end of its process as the tray saw it
    LAST_SAVED = "last-saved"  # the last thing Hermes saved of it (``state.db``): interrupted after that
    STARTED = "started"  # only when it started is known


class StepKind(StrEnum):
    """What one recorded step of a turn was (:mod:`hermes_tray_core.hermes.progress`)."""

    TOOL = "tool"  # a tool call (with or without its result yet)
    TEXT = "text"  # text the assistant wrote


class StopReason(StrEnum):
    """Why a running continuation is asked to stop: only the user's Stop ends a turn; a shutdown leaves it to
    Hermes as if the tray had never been there."""

    USER = "you"  # the menu's or window's Stop, Ctrl-C in ``resume --wait``: interrupted, for good
    SHUTDOWN = "shutdown"  # the tray quits: it stops following; the continuation is left to Hermes


class Event(StrEnum):
    """What the ledger records about an interruption (``history --json``'s ``event``)."""

    NOTIFIED = "notified"  # the user was told (a notification was delivered)
    SNOOZED = "snoozed"  # remind me later: not announced before ``until``; continues nothing
    SKIPPED = "skipped"
    APPROVED = "approved"  # a resume passed its checks (the user's Resume, auto mode, the command line)
    CONTINUING = "continuing"  # the tray is about to submit its continuation note (an older Hermes)
    DISPATCHED = "dispatched"  # Hermes started the continuation
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"  # by your Stop, by Hermes, or left waiting as the tray quit (``stopped_by``)
    FAILED = "failed"
    GAVE_UP = "gave-up"
    REFUSED = "refused"
    CLEARED = "cleared"  # the marker went away without the tray (Hermes ended it elsewhere)
    DETACHED = "detached"  # the tray stopped following a continuation that goes on in Hermes
    STOPPED = "stopped"  # a witness saw why the turn's Hermes process died (``cause``, ``fact``)
    CONFIG_CHANGED = "config-changed"  # a setting changed; about no turn
    DETECTED = "detected"  # written by early releases only; read from their journals
