"""Every sentence the tray says about a turn, in one place, keyed by the engine's typed codes (the views and
the command line never re-read the engine's English, which stays the *details*: pids, paths, reason codes).
Writing rules, checked by ``tests/test_words.py`` over every sentence here: short sentences, one fact each, no
nested parentheses, the user's words, never the engine's. Qt-free: the command line uses it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import hermes_tray_core
from hermes_tray_core import Moment, Outcome, ReasonCode, Verdict, json_int, json_number

if TYPE_CHECKING:
    from hermes_tray_core import StopCause, TurnProgress

__all__ = ["EVENT_TEXT", "RESUME_AGAIN", "VIA_TEXT", "Ending", "Held", "cause_line",
           "ending", "error_text", "event_detail", "field_of", "event_text", "held", "progress_line", "progress_lines",
           "ran_in_short", "ran_in_sentence", "reminder_text", "stop_not_written", "tries", "tries_text",
           "turn_title", "untitled_label", "value_text", "via_text", "when_text"]

RUNNING_BACKEND = "running-backend"  # the values of the engine's RanIn (vocab)
SEPARATE_PROCESS = "separate-process"

# -- the turns window, the menu and the tooltip --------------------------------------------------------------

STOP_LABEL = "Stop for good"
STOP_HINT = "Stop ends this turn for good, as Hermes' own Stop does. It is not resumed again."
RESUME_HINT = "Resume continues each turn where it stopped. Skip forgets it."
PROMPT_HIDDEN = "Prompt hidden"
NO_TURNS = "No interrupted turns"
LOOKING = "Looking for interrupted turns…"
NOTHING_WAITING = "Nothing is waiting. Turns cut off by a crash or restart show up here."
AUTO_OFF = "Hermes auto-continue is off"
AUTO_OFF_SOME = "Hermes auto-continue is off in some homes"
MODE_LINES = {"ask": "Asks before resuming", "auto": "Resumes automatically", "list": "Only lists interrupted turns",
              "off": "Only lists interrupted turns"}
DEMO_NO_LOGIN = "Not in the demo: it would start the demo at every login."
NO_LOGIN = "Start at login is not available on this system."


def error_text(exc: BaseException) -> str:
    """An error as a person reads it: a file error in the system's words (no errno number, no temp file), else
    its message, never its class name (the log and ``--json`` keep ``str(exc)`` and the traceback)."""
    if isinstance(exc, OSError):
        from hermes_tray_core import os_error_text

        return os_error_text(exc)
    from hermes_tray_core import TrayError

    if isinstance(exc, TrayError):  # the engine's own errors say it in the user's words
        return exc.user_message
    return str(exc) or "an unexpected error"


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 interrupted turn`` / ``3 interrupted turns``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def untitled_label(profile: str, started_at: float | None, excerpt: str = "", *, fmt: str | None = None) -> str:
    """What names a turn whose title is not shown (none, or the prompt's own words while prompts are hidden): its
    prompt's first words (``excerpt``: only where prompts are shown), else its profile and the time it started —
    never the user's words; ``fmt``: how the time is written (default: the minute, and the day if not today). The
    session id is on demand (tooltips, Details, Copy session ID)."""
    words = " ".join(excerpt.split()[:6])
    if words:
        more = len(words) < len(" ".join(excerpt.split()))
        return f"“{words}{'…' if more else ''}”"
    where = "" if not profile or profile == "default" else f" in {profile}"
    if isinstance(started_at, (int, float)) and 0 < started_at < 2**37:
        fmt = fmt or ("%H:%M" if time.time() - started_at < 86_400 else "%d %b %H:%M")
        return f"Turn{where}{',' if where else ''} started {time.strftime(fmt, time.localtime(started_at))}"
    return f"Turn{where}" if where else "A turn"


WHEN_LEAD: dict[str, str] = {Moment.INTERRUPTED: "interrupted", Moment.LAST_SAVED: "last saved",
                             Moment.STARTED: "started"}


def when_text(moment: str, at: float | None, now: float | None = None) -> str:
    """How long ago, said of what is known (``TurnRecord.moment``): "interrupted 3 s ago" only when that moment is
    known, else "last saved 2 min ago" or "started 41 min ago"."""
    lead = WHEN_LEAD.get(moment, "started")
    if at is None:
        return f"{lead} at an unknown time"
    return f"{lead} {hermes_tray_core.age_text((time.time() if now is None else now) - at)}"


# -- turns the tray leaves alone ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A turn that is not waiting: what it is, why (one sentence), what is left to do, and the buttons."""

    what: str
    why: str = ""
    can_do: str = ""
    actions: tuple[str, ...] = ()  # "enable" (auto-continue back on in its home), "skip"


def _finish_by_hand(in_app: bool) -> str:
    return "Finish it in Hermes by hand, or skip it." if in_app else "Skip it. This demo has no Hermes app."


def tries(n: int | None) -> str:
    return count(n, "try", "tries") if n else "its tries"


def tries_text(attempts: int) -> str:
    return "Not resumed yet" if not attempts else f"{tries(attempts)} so far"


def held(verdict: str, code: str | None = None, *, attempts: int = 0, source: str = "desktop",
         in_app: bool = True) -> Held:
    """Words for a turn the tray does not offer to resume (the policy's verdict and reason code)."""
    if source == "webui":
        if verdict == Verdict.RUNNING:
            return Held("Running in the WebUI")
        return Held("Interrupted in the WebUI", "The WebUI keeps its own turns.", "Retry it in the WebUI.")
    if verdict == Verdict.DISABLED:
        return Held("Held: auto-continue is off", "Hermes auto-continue is off in this home.",
                    "Turn auto-continue on to resume it, or skip it.", ("enable", "skip"))
    if verdict == Verdict.STALE:
        return Held("Too old to resume", "It is older than this home's freshness window.", _finish_by_hand(in_app),
                    ("skip",))
    if verdict == Verdict.EXHAUSTED:
        return Held(f"Gave up after {tries(attempts)}", "That is as many as this home allows.",
                    _finish_by_hand(in_app), ("skip",))
    if verdict == Verdict.SKIPPED:
        return Held("Skipped", "You skipped it. It is not resumed.")
    if verdict == Verdict.STOPPED:
        return Held("Stopped", "You stopped it. It is not resumed again.", "Skip it once its home can be written.",
                    ("skip",))
    if verdict == Verdict.RUNNING:
        if code == ReasonCode.OWNER_ALIVE:
            return Held("Open in Hermes", "It continues there.")
        if code == ReasonCode.BACKEND_LIVE:
            return Held("Hermes may still be running it", "A running Hermes serves this home.",
                        "Look at it in Hermes.")
        if code in (ReasonCode.LEASE_UNKNOWN, ReasonCode.OWNER_UNKNOWN):
            return Held("Left alone for now", "The tray cannot yet check whether Hermes has it.")
        return Held("Running in Hermes now", "It is not interrupted.")
    if verdict == Verdict.NOT_OURS:
        if code == ReasonCode.NO_PROMPT:
            return Held("Nothing to resume", "Hermes saved no prompt for it.")
        if code == ReasonCode.MALFORMED_ENTRY:
            return Held("Hermes cannot read this turn", "Hermes ignores it too.")
        return Held("Hermes handles this one", "Hermes recovers it in its own way.")
    return Held("Not waiting")


# -- how a resume ended ----------------------------------------------------------------------------------------


def ran_in_sentence(ran_in: str) -> str:
    return {RUNNING_BACKEND: "It ran in your running Hermes.",
            SEPARATE_PROCESS: "It ran in a separate Hermes process."}.get(ran_in, "")


def ran_in_short(ran_in: str) -> str:
    """History's "Where it ran" column (the pid is in the row's tooltip)."""
    return {RUNNING_BACKEND: "Your running Hermes", SEPARATE_PROCESS: "Separate Hermes process"}.get(ran_in, "")


@dataclass(frozen=True)
class Ending:
    """How one resume ended, for every view: Recent's row, the notification, the command line."""

    what: str  # Recent's headline and the CLI's first word
    why: str = ""  # one or two short sentences
    can_do: str = ""
    title: str = ""  # the notification's title ("" = no notification of its own)
    kind: str = "info"  # the notification's kind (hermes_tray.notify.note.URGENCY)


#: What is left to do after a continuation failed, where the turn is listed (the command line says its own)
RESUME_AGAIN = "If it is listed above, Resume tries again."

#: Why a resume was refused, by ``core.continuing.resume`` code (and, for ``not-actionable``, by the policy's verdict).
REFUSALS = {
    "claimed-elsewhere": ("Another Hermes Tray is resuming it.", ""),
    "being-skipped": ("It is being skipped right now.", ""),
    "gone": ("It is no longer waiting.", ""),
    "changed": ("It changed since it was shown.", "Look at it again."),
    "settled": ("It was already finished or skipped.", ""),
    "stopped": ("You stopped it. A Stop is final.", ""),
    "home-read-only": ("Hermes cannot write in this home.", "Make it writable, then resume it."),
    "store-error": ("The tray could not read its own records.", "Run hermes-tray doctor."),
    "hermes-settings": ("The tray settings name no usable Hermes.", "Fix the Hermes command in Settings."),
}
NOT_ACTIONABLE = {
    Verdict.RUNNING: ("Hermes has it open. It continues there.", ""),
    Verdict.DISABLED: ("Hermes auto-continue is off in this home.", "Turn it on, then resume it."),
    Verdict.STALE: ("It is too old to resume.", ""),
    Verdict.NOT_OURS: ("Hermes handles this one itself.", ""),
    "unsure": ("The tray cannot tell whether it already finished.", "Try again later."),
    "settled": ("It was already finished.", ""),
}


def ending(outcome: Outcome | str, *, code: str = "", verdict: str = "", stopped: bool = False,
           attempts: int | None = None, ran_in: str = "", in_app: bool = True) -> Ending:
    """Words for how a resume ended."""
    outcome = Outcome.of(outcome)
    where = ran_in_sentence(ran_in)
    if outcome is Outcome.COMPLETED:
        return Ending("Resumed and finished", where, "", "Hermes turn finished", "finished")
    if outcome is Outcome.DETACHED and stopped:  # your Stop, but a Hermes window shares the session
        return Ending("Left to your Hermes window", "Your Hermes window also uses it, so the tray did not stop it.",
                      "Stop it there if you want it stopped.", "Turn left to Hermes", "info")
    if outcome is Outcome.DETACHED:
        return Ending("Left running in Hermes", "The tray stopped following it. Hermes goes on with it.",
                      "History shows how it ends.", "", "info")
    if stopped:
        return Ending("Stopped", "You stopped it. It is not resumed again.",
                      "Go on in Hermes by hand." if in_app else "", "Turn stopped", "stopped")
    if outcome is Outcome.GAVE_UP:
        return Ending(f"Gave up after {tries(attempts)}", "That is as many as this home allows.",
                      _finish_by_hand(in_app), "Hermes gave up on a turn", "gave-up")
    if outcome is Outcome.REFUSED:
        why, can = (NOT_ACTIONABLE.get(verdict) if code == "not-actionable" else REFUSALS.get(code)) or (
            "It could not be resumed.", "")
        return Ending("Not resumed", why, can, "Turn not resumed", "refused")
    if outcome is Outcome.DECLINED:
        return Ending("Not resumed", "Hermes chose not to continue it.", "", "Turn not resumed", "refused")
    again = RESUME_AGAIN
    if outcome is Outcome.INTERRUPTED:
        return Ending("Interrupted again", " ".join(x for x in ("Hermes stopped it before it finished.", where) if x),
                      again, "Hermes turn failed again", "failed")
    if outcome is Outcome.TIMED_OUT:
        return Ending("Hermes stopped answering", "The tray gave up waiting for it.", again,
                      "Hermes turn failed again", "failed")
    if outcome is Outcome.CRASHED and ran_in:
        return Ending("Interrupted again", " ".join(x for x in ("Hermes exited before it finished.", where) if x),
                      again, "Hermes turn failed again", "failed")
    if outcome is Outcome.CRASHED:
        return Ending("Not resumed", "Hermes could not start.", "Run hermes-tray doctor.", "Turn not resumed",
                      "failed")
    return Ending("Not resumed", "Hermes could not resume it.", "Run hermes-tray doctor.", "Turn not resumed",
                  "failed")


def stop_not_written(why: str) -> str:
    """After your Stop, Hermes' own file could not be changed (``why``, plain words): one sentence, what to do."""
    return f"Hermes' file could not be changed: {why}. It is still never resumed; Skip clears it once that is fixed."


# -- notifications -------------------------------------------------------------------------------------------

WAITING_WHAT = "Interrupted"  # a waiting turn's note: "Interrupted: <its name>"
REMINDER_WHAT = "Reminder"  # the one note when a snooze ends: "Reminder: <its name>"
WAITING_ASK = "Resume it, skip it, or turn auto-continue off."
REMINDER_LEAD = "You asked to be reminded of it."
AUTO_ASKED_BEFORE = "You were asked about it before, or it was answered. Resume it by hand:"
FAILED_AGAIN_TITLE = "Hermes turn failed again"
OUT_OF_DATE = "That notification is out of date. Nothing was done."
CHANGED_SINCE = "changed since the notification. Nothing was done."


def storm_title(n: int) -> str:
    return f"{n} Hermes turns interrupted"


def turn_title(what: str, name: str) -> str:
    """A note about one turn: what happened, then which turn ("Interrupted: Fix CI"). Turns listed together
    have names that differ (``turn_names``), so their notes' titles do too."""
    return f"{what}: {name}"


# -- what a turn was doing when it stopped, and why it stopped ----------------------------------------------

KEPT_NOTHING = "Hermes kept nothing of this turn's progress."
REMIND_HOUR = "Remind me in 1 hour"
REMIND_LATER = "Remind me later"
REMIND_TOMORROW = "Remind me tomorrow morning"
LAPSED = "It stopped waiting before your reminder."
SNOOZE_NOT_KEPT = "The reminder could not be saved. Nothing changed."


def progress_line(progress: TurnProgress | None, *, excerpts: bool = True) -> str:
    """One line (a notification, a tooltip): how far the turn got, the tool it was running when it stopped, and
    (``excerpts``) the last thing it said or did. "" when it cannot be read: never a guess."""
    if progress is None:
        return ""
    if not progress.kept:
        return KEPT_NOTHING
    line = f"Progress: {count(progress.messages, 'message')}, {count(progress.tool_calls, 'tool call')}"
    running = [step.phrase() for step in progress.recent if step.running]
    if running:
        line += "; " + running[-1]
    return line + (f" — last: {progress.last_excerpt}" if excerpts and progress.last_excerpt else "")


def progress_lines(progress: TurnProgress | None, *, excerpts: bool = True) -> tuple[str, ...]:
    """The turn's progress in full (Details, the turn's page): how far, its last steps, the last thing it said
    or did (``excerpts``: shown only where prompts are)."""
    if progress is None:
        return ()
    if not progress.kept:
        return (KEPT_NOTHING,)
    lines = [f"Progress: {count(progress.messages, 'message')}, {count(progress.tool_calls, 'tool call')}."]
    if progress.recent:
        lines.append("Last steps: " + ", ".join(step.phrase() for step in progress.recent) + ".")
    if excerpts and progress.last_excerpt:
        lines.append(f"Last it said or did: {progress.last_excerpt}")
    return tuple(lines)


def cause_line(cause: StopCause | None, fact: str = "") -> str:
    """Why it stopped, with the fact behind it (a cause is never said without one); "" while it runs."""
    if cause is None:
        return ""
    from hermes_tray_core import cause_words

    return f"Why it stopped: {cause_words(cause, fact)}"


def reminder_text(until: float, now: float) -> str:
    """When a snoozed turn is announced again: "Reminder at 15:02", "Reminder Fri 09:00"."""
    at, today = time.localtime(until), time.localtime(now)
    same_day = (at.tm_year, at.tm_yday) == (today.tm_year, today.tm_yday)
    return f"Reminder {'at ' if same_day else ''}{time.strftime('%H:%M' if same_day else '%a %H:%M', at)}"


# -- History and ``hermes-tray history``: the decision journal's events, in words ------------------------------

#: event → what it was (the journal's own name stays in ``--json``)
EVENT_TEXT = {
    "detected": "Seen", "notified": "You were told", "approved": "You chose Resume", "dispatched": "Sent to Hermes",
    "continuing": "Hermes continues it", "completed": "Finished", "interrupted": "Interrupted again",
    "failed": "Failed",
    "gave-up": "Gave up", "refused": "Not resumed", "skipped": "Skipped", "cleared": "Cleared by Hermes",
    "config-changed": "Settings changed", "snoozed": "Remind me later", "stopped": "Hermes stopped",
    "detached": "Left to Hermes",
}
#: who or what acted (the journal's ``via``: an origin, or the channel a notification went out by; a
#: configuration change's ``by``), in words
VIA_TEXT = {"menu": "from the menu", "window": "from the turns window", "notification": "from a notification",
            "history": "from History", "auto": "automatically", "cli": "from the command line", "tray": "from the tray",
            "desktop-notifier": "by a notification", "log": "in the log only: no notification server"}


def field_of(entry: Any, name: str, default: Any = "") -> Any:
    return entry.get(name, default) if isinstance(entry, Mapping) else getattr(entry, name, default)


#: who or what ended a continuation (an ``interrupted`` event's ``stopped_by``): only the user's own Stop is "Stopped"
STOPPED_BY = {"you": "Stopped by you", "hermes": "Interrupted again in Hermes", "shutdown": "Left waiting: the tray quit"}


def event_text(entry: Any) -> str:
    """What one event was, in words (an event of a newer journal: its own name)."""
    name = str(field_of(entry, "event", ""))
    if name == "refused" and field_of(entry, "action", "") == "skip":
        return "Not skipped"
    if name == "interrupted":
        return STOPPED_BY.get(str(field_of(entry, "stopped_by", "")), EVENT_TEXT[name])
    if name == "approved" and str(field_of(entry, "via", "")).removeprefix("tray-") == "auto":
        return "Resumed automatically"
    return EVENT_TEXT.get(name, name)


def via_text(via: object) -> str:
    """``tray-menu`` → ``from the menu``; a name this version does not know is left out (``--json`` has it)."""
    text = str(via or "")
    return VIA_TEXT.get(text.removeprefix("tray-"), "")


def value_text(value: Any) -> str:
    """A setting's value: on/off, a list joined, "(unset)"."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def event_detail(entry: Any) -> str:
    """One line about one event (never prompt text: the journal has none; never its timings or raw times)."""
    if str(field_of(entry, "event", "")) == "config-changed":
        by = via_text(field_of(entry, "by", ""))
        return (f"{field_of(entry, 'key', '?')}: {value_text(field_of(entry, 'old', None))} → "
                f"{value_text(field_of(entry, 'new', None))}" + (f", {by}" if by else ""))
    bits = []
    for name in ("reason", "why", "outcome", "where"):
        v = field_of(entry, name, "")
        if v and not (name == "outcome" and str(v) in str(field_of(entry, "reason", ""))):
            bits.append(str(v))
    via = via_text(field_of(entry, "via", ""))
    if via:
        bits.append(via)
    attempt = json_int(field_of(entry, "attempt", None))
    if attempt is not None:
        bits.append(f"attempt {attempt}")
    until = json_number(field_of(entry, "until", None))
    if until is not None and 0 < until < 2**37:
        bits.append(f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(until))}")
    return " · ".join(bits)
