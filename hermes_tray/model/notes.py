"""Which note the tray shows for how a continuation ended (pure functions, words from :mod:`hermes_tray.words`):
its title says what happened, its body which turn, then why and what is left to do. The "turn interrupted"
question is :mod:`hermes_tray.notify.coalesce`'s.
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum

from hermes_tray import words
from hermes_tray.contract import ROUTINE_REFUSALS, Outcome, RunResult
from hermes_tray.format import first_line
from hermes_tray.notify.note import Action, Note
from hermes_tray_core import TurnRecord


class After(Enum):
    """What a continuation's end leaves to say."""

    NOTE = "note"  # the note returned, now
    LATER = "later"  # a failure: said after the scan that follows (only then is "gave up" known)
    NOTHING = "nothing"  # normal operation (another process won the claim; left running in Hermes as the tray quits)


def show_actions(can_show: bool) -> tuple[Action, ...]:
    """A click on a receipt opens the turns window; the headless helper has none, so no button that does nothing."""
    return (Action("default", "Show"),) if can_show else ()


def ending(out: RunResult, *, stopped: bool, in_app: bool) -> words.Ending:
    """How a continuation ended, in words; your Stop that Hermes' own file could not record says so."""
    e = words.ending(out.outcome, code=out.code, verdict=out.verdict, stopped=stopped, attempts=out.attempts,
                     ran_in=out.ran_in, in_app=in_app)
    if stopped and out.marker_left:
        e = replace(e, can_do=words.stop_not_written(out.marker_left))
    return e


def body(label: str, e: words.Ending) -> str:
    """A notification's body: the turn, then what happened and what is left to do, one fact a sentence."""
    what = "" if e.what in ("Not resumed", "Stopped") else f"{e.what}."
    return "\n".join(x for x in (label, " ".join(y for y in (what, e.why, e.can_do) if y)) if x)


def gave_up_text(label: str, rec: TurnRecord, *, in_app: bool = True) -> str:
    """The body of "Hermes gave up on a turn": after how many tries (the user's and automatic ones alike
    count against Hermes' budget), and what is left to do."""
    e = words.ending(Outcome.GAVE_UP, attempts=rec.attempts or None, in_app=in_app)
    return f"{label}\n{e.what}. {e.why} {e.can_do}".rstrip()


def gave_up_note(key: str, label: str, rec: TurnRecord, who: str, *, in_app: bool, can_show: bool) -> Note:
    """A turn this process continued died again and reached Hermes' retry budget."""
    return Note(key, words.ending(Outcome.GAVE_UP).title, gave_up_text(label, rec, in_app=in_app),
                show_actions(can_show), log_line=f"gave up: {who}", kind="gave-up")


def failure_note(key: str, title: str, out: RunResult, who: str, *, in_app: bool, can_show: bool) -> Note:
    """A continuation that failed with Hermes' budget left (the turn is no longer waiting)."""
    e = ending(out, stopped=False, in_app=in_app)
    return Note(key, e.title or words.FAILED_AGAIN_TITLE, body(title, e), show_actions(can_show),
                log_line=f"failed ({out.outcome.value}): {who}", kind=e.kind)


def outcome_note(key: str, title: str, out: RunResult, who: str, *, stopped: bool, auto: bool, show_answer: bool,
                 in_app: bool, can_show: bool) -> tuple[After, Note | None]:
    """What to say as a continuation ends: a note now, the failure after the next scan, or nothing.
    ``auto``: the tray resumed it by itself (auto mode); ``show_answer``: prompts are shown, so is the answer."""
    e = ending(out, stopped=stopped, in_app=in_app)
    outcome = out.outcome
    if outcome is Outcome.COMPLETED:
        line = first_line(out.answer, 160) if (out.answer and show_answer) else ""
        text = "\n".join(x for x in (f"{title} finished.", e.why, line) if x)
        return After.NOTE, Note(key, e.title, text, show_actions(can_show), log_line=f"finished: {who}", kind=e.kind)
    if outcome is Outcome.GAVE_UP:
        return After.NOTE, Note(key, e.title, body(title, e), show_actions(can_show), log_line=f"gave up: {who}",
                                kind=e.kind)
    if outcome is Outcome.REFUSED and auto and out.code in ROUTINE_REFUSALS:
        # tray and helper both in auto mode: the other one won the claim (or already finished). Normal
        # operation, not a failure: the log and the journal (the engine records the refusal) say so.
        return After.NOTHING, None
    if outcome is Outcome.REFUSED or stopped:
        said = "refused" if outcome is Outcome.REFUSED else "stopped"
        return After.NOTE, Note(key, e.title, body(title, e), log_line=f"{said}: {who}", kind=e.kind)
    if outcome is Outcome.DETACHED:  # left running in Hermes as the tray quits: no failure to say
        return After.NOTHING, None
    return After.LATER, None
