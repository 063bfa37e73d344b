"""Every sentence :mod:`hermes_tray.words` can say, collected for the writing rules (tests/test_words.py) and the
check that no internals reach the user (tests/test_no_internals.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from hermes_tray import words
from hermes_tray.words import (
    EVENT_TEXT,
    MODE_LINES,
    NOT_ACTIONABLE,
    REFUSALS,
    RUNNING_BACKEND,
    SEPARATE_PROCESS,
    STOPPED_BY,
    VIA_TEXT,
    WAITING_WHAT,
    cause_line,
    ending,
    held,
    progress_line,
    progress_lines,
    reminder_text,
    storm_title,
    turn_title,
    untitled_label,
    when_text,
)
from hermes_tray_core import (
    Moment,
    Outcome,
    ProgressStep,
    ReasonCode,
    StepKind,
    StopCause,
    TurnProgress,
    Verdict,
)


def catalogue() -> Iterator[tuple[str, str]]:
    """``(where, text)`` for every string of :mod:`hermes_tray.words` and every rendering of each code."""
    for name, value in sorted(vars(words).items()):
        if name.isupper() and isinstance(value, str) and name not in ("RUNNING_BACKEND", "SEPARATE_PROCESS"):
            yield name, value
    yield from (("MODE_LINES", v) for v in MODE_LINES.values())
    yield from ((f"EVENT_TEXT {k}", v) for k, v in EVENT_TEXT.items())
    yield from ((f"VIA_TEXT {k}", v) for k, v in VIA_TEXT.items())
    yield from ((f"STOPPED_BY {k}", v) for k, v in STOPPED_BY.items())
    yield from ((f"when {m}", when_text(m, time.time() - 75)) for m in Moment)
    for code, (why, can) in [*REFUSALS.items(), *NOT_ACTIONABLE.items()]:
        yield f"refusal {code}", why
        yield f"refusal {code} (to do)", can
    for verdict in Verdict:
        for code in [None, *ReasonCode]:
            for in_app in (True, False):
                h = held(verdict, code, attempts=2, in_app=in_app)
                yield from ((f"held {verdict}/{code}", s) for s in (h.what, h.why, h.can_do))
    for outcome in Outcome:
        for stopped in (False, True):
            for ran_in in ("", RUNNING_BACKEND, SEPARATE_PROCESS):
                for code in ("", *REFUSALS, "not-actionable"):
                    for refused in ("", *NOT_ACTIONABLE):
                        e = ending(outcome, code=code, verdict=refused, stopped=stopped, attempts=2, ran_in=ran_in)
                        yield from ((f"ending {outcome}", s) for s in (e.what, e.why, e.can_do, e.title))
    yield "untitled", untitled_label("work", time.time() - 60)
    yield "untitled", untitled_label("default", None, "Refactor the config parser so unknown keys warn, then test")
    yield "storm", storm_title(12)
    yield "title", turn_title(WAITING_WHAT, "Fix the flaky test")
    for cause in StopCause:
        yield f"cause {cause}", cause_line(cause, "" if cause == StopCause.UNKNOWN else "the turn started at 14:02")
    steps = TurnProgress(messages=4, tool_calls=2, ran_for_s=75.0, last_excerpt="read_file: notes.txt")
    running = TurnProgress(messages=3, tool_calls=2, ran_for_s=75.0, recent=(
        ProgressStep(StepKind.TOOL, tool="read_file"), ProgressStep(StepKind.TEXT, paragraphs=2),
        ProgressStep(StepKind.TOOL, tool="terminal", running=True)))
    for p in (TurnProgress(), steps, running):
        yield "progress", progress_line(p, excerpts=False)
        yield from (("progress (details)", line) for line in progress_lines(p, excerpts=False))
    yield "reminder", reminder_text(time.time() + 3600, time.time())
