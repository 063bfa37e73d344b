"""The writing rules, checked over every sentence the tray says about a turn (``hermes_tray.words.catalogue``)
and over what the views render from it: short sentences with one fact each, no nested parentheses, the
user's words rather than the engine's."""

from __future__ import annotations

import re

import pytest

from hermes_tray import words

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
    return [w for w in words.ENGINE_WORDS if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", low)]


def broken_rules(text: str, *, limit: int = MAX_SENTENCE) -> list[str]:
    out = []
    if nested_parentheses(text):
        out.append("nested parentheses")
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
    assert broken_rules("Hermes auto-continue is off in this home, so the tray does not offer to resume them; "
                        "select one below to turn auto-continue back on.")


@pytest.mark.parametrize(("where", "text"), sorted(set(words.catalogue())))
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
