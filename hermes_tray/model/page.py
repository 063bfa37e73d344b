"""A turn's page as plain data, built from the view state and History's rows (``app/turn_page.py`` renders it).
Only facts: a turn no longer listed says only what the ledger recorded. Only buttons that act: from History it
acts on the listed turn only when that is the row's newest interruption (a newer one is another turn).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hermes_tray import words
from hermes_tray.format import short_path
from hermes_tray.model.history import TurnHistory, group_turns, same_home, when_of
from hermes_tray.model.viewstate import RecentItem, TurnItem, ViewState
from hermes_tray_core import TurnId, TurnKey


@dataclass(frozen=True)
class Decision:
    """One event of the turn's journal, as History's trail says it."""

    at: float  # wall clock
    what: str
    detail: str = ""


@dataclass(frozen=True)
class TurnPage:
    """``key``: the turn's key while it is listed (None: nothing to act on); ``actions``: the buttons that apply
    (``resume``, ``skip``, ``snooze``)."""

    key: TurnKey | None
    title: str
    where: str
    state: str
    prompt: str = ""
    facts: tuple[str, ...] = ()
    tries: str = ""
    decisions: tuple[Decision, ...] = ()
    actions: tuple[str, ...] = ()
    session_key: str = ""
    home: str = ""


def where_text(profile: str, home: str) -> str:
    """Where a turn is: its profile, or its home's short path for the default profile."""
    return f"{profile} profile" if profile and profile != "default" else short_path(home)


def named_turn(home: str, session_key: str) -> TurnKey | None:
    """The key of a turn named by its home and session from outside a scan (a History row): the engine's door checks
    the session and spells the home canonically; None for a session no turn can have."""
    from hermes_tray_core import InvalidIdError, turn_key

    try:
        return turn_key(home, session_key)
    except InvalidIdError:
        return None


def _row(rows: Iterable[Any], home: str, session_key: str, ident: TurnId | None) -> TurnHistory | None:
    """History's row of this turn: the one holding that interruption (``ident``), else the newest of the session."""
    mine = [t for t in group_turns(rows) if not t.config and t.session_key == session_key and same_home(t.home, home)]
    for t in mine:
        if ident is not None and any(isinstance(e, dict) and e.get("started_at") == ident.started_at
                                     for e in t.events):
            return t
    return mine[0] if mine else None


def _decisions(turn: TurnHistory | None) -> tuple[Decision, ...]:
    if turn is None:
        return ()
    return tuple(Decision(when_of(e), words.event_text(e), words.event_detail(e)) for e in turn.events)


def _listed(state: ViewState, item: TurnItem, entries: list[Any]) -> TurnPage:
    """The page of a turn the tray lists: a waiting one can be resumed, skipped or snoozed; another one skipped when
    Recent offers it."""
    waiting = item in state.pending
    prompt = item.excerpt or ("" if state.show_prompts else words.PROMPT_HIDDEN)
    status = "Waiting for you" + (f" · {item.reminder_text()}" if item.reminder is not None else "") \
        if waiting else words.held(item.verdict, item.code, attempts=item.attempts, source=item.source,
                                   in_app=state.in_app).what
    recent = next((r for r in state.recent if r.key == item.key), None)
    actions = ("resume", "skip", "snooze") if waiting else tuple(a for a in (recent.actions if recent else ())
                                                                if a == "skip")
    return TurnPage(item.key, item.title, where_text(item.profile, item.home), status, prompt, item.facts,
                    words.tries_text(item.attempts), _decisions(_row(entries, item.home, item.session_key,
                                                            item.record.turn.ident if item.record else None)),
                    actions, item.session_key, item.home)


def page_for(state: ViewState, history: Iterable[Any], *, key: TurnKey | None = None, ident: TurnId | None = None,
             title: str = "") -> TurnPage | None:
    """The page of the turn listed under ``key``, or of History's row whose newest interruption is ``ident`` (listed
    or not; ``title``: History's name for it). None when neither is known."""
    home, session_key = (str(ident.home), str(ident.key)) if ident is not None else ("", "")
    if key is None and ident is not None:
        key = ident.id
    candidates: tuple[TurnItem | RecentItem, ...] = (*state.pending, *state.others, *state.recent)
    item = next((c for c in candidates if key is not None and c.key == key), None)
    if ident is not None and isinstance(item, TurnItem) and (item.record is None or item.record.turn.ident != ident):
        item = None  # the session's turn listed now is another interruption: this page acts on nothing
    entries = list(history)
    if isinstance(item, TurnItem):
        return _listed(state, item, entries)
    if isinstance(item, RecentItem) and ident is None:  # how a continuation of ours ended: the turn may be gone
        journal = _row(entries, item.home, item.session_key, None)
        status = " ".join(x for x in (item.what + ".", item.why, item.can_do) if x)
        return TurnPage(item.key, item.title, short_path(item.home), status, facts=item.facts,
                        decisions=_decisions(journal), actions=tuple(a for a in item.actions if a == "skip"),
                        session_key=item.session_key, home=item.home)
    journal = _row(entries, home, session_key, ident)
    if journal is None:
        return None
    return TurnPage(None, title or words.untitled_label(journal.profile, journal.started_at),
                    where_text(journal.profile, home), f"Last recorded: {journal.outcome()}. The tray does not list it now.",
                    tries=words.tries_text(journal.tries()), decisions=_decisions(journal), session_key=session_key, home=home)


__all__ = ["Decision", "TurnPage", "page_for", "where_text"]
