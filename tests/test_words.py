"""The writing rules, checked over every sentence the tray says about a turn (``tests/support/word_catalogue.py``)
and over what the views render from it: short sentences with one fact each, no nested parentheses, the
user's words rather than the engine's."""

from __future__ import annotations

import re

import pytest

from hermes_tray import words
from tests.support.word_catalogue import catalogue

#: Words of the engine a user never needs to read in a short sentence (its details may hold them).
ENGINE_WORDS = ("marker", "verdict", "actionable", "not-ours", "dispatched", "gateway", "exhausted", "lease",
                "writer", "tombstone", "journal", "backend", "claim", "epoch", "json-rpc", "session.resume")

MAX_SENTENCE = 90  # characters: one fact, read at a glance
MAX_TITLE = 40


def nested_parentheses(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > 1:
                return True
        elif ch == ")":
            depth = max(0, depth - 1)
    return False


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?…])\s+|\n", text) if s.strip()]


def engine_words(text: str) -> list[str]:
    low = text.lower()
    return [w for w in ENGINE_WORDS if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", low)]


def broken_rules(text: str, *, limit: int = MAX_SENTENCE) -> list[str]:
    out = []
    if nested_parentheses(text):
        out.append("nested parentheses")
    if "(s)" in text:
        out.append("a '(s)' plural: say the count's own word")
    if "`" in text:
        out.append("back-ticks: what users read is not markdown")
    out += [f"engine word {w!r}" for w in engine_words(text)]
    out += [f"sentence of {len(s)} chars: {s!r}" for s in sentences(text) if len(s) > limit]
    return out


def test_the_rules_can_fail() -> None:
    """Each check catches what it is for (the strings the issue quoted)."""
    assert nested_parentheses("(Ctrl-C stops it; … as Hermes' own Stop does (it is not continued again).)")
    assert not nested_parentheses("(a) and (b)")
    assert engine_words("forget its marker") == ["marker"]
    assert engine_words("not-ours") == ["not-ours"] and not engine_words("not ours")
    long = ("Why: Stopped; the continuation was interrupted and will not be continued again. It ran in a separate "
            "Hermes process. (Not in your running Hermes: no running Hermes backend (hermes dashboard) serves this h…")
    assert {r.split(" ")[0] for r in broken_rules(long)} == {"nested", "engine"}
    assert broken_rules("3 turn(s) can be resumed") and broken_rules("Last steps: ran `terminal` (tool).")
    assert broken_rules("Hermes auto-continue is off in this home, so the tray does not offer to resume them; "
                        "select one below to turn auto-continue back on.")


@pytest.mark.parametrize(("where", "text"), sorted(set(catalogue())))
def test_every_sentence_follows_the_writing_rules(where: str, text: str) -> None:
    assert not broken_rules(text), (where, text)


def test_titles_are_short() -> None:
    titles = {e.title for o in words.Outcome for s in (False, True)
              for e in [words.ending(o, stopped=s, attempts=3)]} | {words.storm_title(10_000)}
    assert all(len(t) <= MAX_TITLE for t in titles), titles


def test_the_user_words_are_used() -> None:
    assert words.ending("interrupted", stopped=True).what == "Stopped"
    assert words.ending("gave-up", attempts=2).what == "Gave up after 2 tries"
    assert words.ending("gave-up", attempts=1).what == "Gave up after 1 try"
    assert words.held("running", "owner-alive").what == "Open in Hermes"
    assert words.ending("completed", ran_in="running-backend").why == "It ran in your running Hermes."
    # the demo has no Hermes app to finish a turn in: never sent there
    assert "Hermes by hand" not in words.held("stale", "stale", in_app=False).can_do
    assert "Hermes" not in words.ending("interrupted", stopped=True, in_app=False).can_do


def test_what_a_turn_did_last_and_when_are_said_of_what_is_known() -> None:
    """A tool call saved without its result was running when the turn stopped; the age is said "interrupted" only
    of the moment it was interrupted (``TurnRecord.moment``), else of the last thing saved, else of its start."""
    from hermes_tray_core import ProgressStep, StepKind, TurnProgress

    p = TurnProgress(messages=3, tool_calls=2, ran_for_s=1.0, last_excerpt="terminal: sleep 30", recent=(
        ProgressStep(StepKind.TOOL, tool="read_file"), ProgressStep(StepKind.TOOL, tool="terminal", running=True)))
    assert words.progress_lines(p, excerpts=False) == (
        "Progress: 3 messages, 2 tool calls.", "Last steps: ran read_file, was running terminal when it stopped.")
    assert words.progress_line(p, excerpts=False) == \
        "Progress: 3 messages, 2 tool calls; was running terminal when it stopped"
    now = 1_000_000.0
    assert words.when_text("interrupted", now - 9, now) == "interrupted 9 s ago"
    assert words.when_text("last-saved", now - 120, now) == "last saved 2 min ago"
    assert words.when_text("started", now - 2460, now) == "started 41 min ago"
    assert words.when_text("started", None, now) == "started at an unknown time"


def test_one_event_one_word_across_the_views() -> None:
    """A quit or Hermes ending a run is never "Stopped" (the word for your own Stop); auto mode's resume is not
    "You chose Resume"."""
    assert words.event_text({"event": "interrupted", "stopped_by": "shutdown"}) == "Left waiting: the tray quit"
    assert words.event_text({"event": "interrupted", "stopped_by": "you"}) == "Stopped by you"
    assert words.event_text({"event": "interrupted", "stopped_by": "hermes"}) == "Interrupted again in Hermes"
    assert words.event_text({"event": "interrupted"}) == "Interrupted again"  # an older journal: who is not known
    assert words.event_text({"event": "approved", "via": "tray-auto"}) == "Resumed automatically"
    assert words.event_text({"event": "approved", "via": "tray-menu"}) == "You chose Resume"
