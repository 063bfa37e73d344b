"""What the views show, as plain data (the turn model builds it; views are tested with hand-made states and never
see engine records). Prompt excerpts are filled in only when ``show_prompts`` is on.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import hermes_tray_core
from hermes_tray import words
from hermes_tray.contract import ProblemDetail, key_of
from hermes_tray.format import elapsed_text, elide, repeats, short_path, turn_since

if TYPE_CHECKING:  # the engine's records load with its policy, after the tray's icon shows
    from hermes_tray_core import TurnKey, TurnRecord


@dataclass(frozen=True)
class TurnItem:
    """One interrupted turn as a row, with the engine record it came from."""

    key: TurnKey
    home: str
    session_key: str
    title: str
    excerpt: str  # "" when prompts are hidden or the record has none
    since: float | None  # wall clock the age counts from (None: unknown); the age is said live
    attempts: int
    verdict: str
    reason: str
    profile: str
    source: str = "desktop"
    record: TurnRecord | None = field(default=None, compare=False, repr=False)
    stated_age: float | None = None  # the age ``reason`` states (the policy's, as of the scan)
    code: str = ""  # the policy's reason code: what the views word it by (``reason`` is the details)
    # what it was doing and why it stopped: one line each (a tooltip, a notification) and in full (Details);
    # the last thing it said or did only when prompts are shown
    progress: str = ""
    cause: str = ""
    facts: tuple[str, ...] = ()
    reminder: float | None = None  # snoozed: announced again at this wall-clock time
    # the moment its age is said from, and what it is (``TurnRecord.moment``): "interrupted" only when known
    moment: str = "started"
    at: float | None = None

    @property
    def age_seconds(self) -> float | None:
        return None if self.since is None else max(0.0, time.time() - self.since)

    @property
    def when(self) -> str:
        """"interrupted 3 s ago", "last saved 2 min ago" or "started 41 min ago", said now."""
        return words.when_text(self.moment, self.at)

    @property
    def reason_now(self) -> str:
        """The policy's reason with the age it states said as of now (it ticks with :attr:`when`)."""
        return hermes_tray_core.restate_age(self.reason, self.stated_age, self.age_seconds)

    @property
    def reason_details(self) -> str:
        """The policy's reason less the age its row already says ("interrupted 1 min ago" once, not three
        times: the row, the line under the list, Details)."""
        said = f"{self.when}; "
        text = self.reason_now
        if text.startswith(said) and len(text) > len(said):
            text = text[len(said):]
        return text[:1].upper() + text[1:]

    def reminder_text(self) -> str:
        return "" if self.reminder is None else words.reminder_text(self.reminder, time.time())

    def menu_label(self) -> str:
        """``name — excerpt — age``, or ``— reminder at …`` while snoozed: the name tells it apart from the other
        turns listed (``turn_names``); the prompt's excerpt only when shown and not already said by the name."""
        parts = [self.title]
        if self.excerpt and not self.title.startswith("“") and not repeats(self.title, self.excerpt):
            parts.append(elide(self.excerpt, 30))
        reminder = self.reminder_text()
        parts.append(reminder[:1].lower() + reminder[1:] if reminder else self.when)
        return " — ".join(parts)


@dataclass(frozen=True)
class RunningItem:
    """A continuation the tray is running: shown with elapsed time, streaming status and Stop."""

    key: TurnKey
    title: str
    elapsed: float  # as of ``at`` (time.monotonic()); :meth:`elapsed_now` ticks on from there
    status: str
    at: float | None = None

    def elapsed_now(self) -> float:
        return self.elapsed + (time.monotonic() - self.at if self.at is not None else 0.0)


@dataclass(frozen=True)
class RecentItem:
    """A turn that is not waiting for a decision: what happened, why, and what the user can still do
    (``actions``: ``enable`` auto-continue in ``home``, ``skip``). ``details``: Hermes' facts as the engine states
    them, on demand; ``details_age``: the age those state (they tick with the row)."""

    key: TurnKey
    title: str
    what: str
    why: str = ""
    can_do: str = ""
    since: float | None = None
    home: str = ""
    actions: tuple[str, ...] = ()
    details: str = ""
    details_age: float | None = None
    session_key: str = ""
    facts: tuple[str, ...] = ()  # what it was doing and why it stopped (Details)

    @property
    def details_now(self) -> str:
        """``details`` with the age they state said as of now."""
        age = None if self.since is None else max(0.0, time.time() - self.since)
        return hermes_tray_core.restate_age(self.details, self.details_age, age)


def recent_items(others: Sequence[TurnItem], outcomes: Sequence[RecentItem] = (), *, in_app: bool = True,
                 lapsed: Collection[TurnKey] = ()) -> tuple[RecentItem, ...]:
    """The turns window's "Recent": turns listed but not waiting (held back by the policy) first, then how this
    tray's continuations and skips ended, newest first; ``lapsed``: snoozes that ended after their turn stopped
    waiting (said so)."""
    held = []
    shown = set()
    for t in others:
        if t.verdict == "actionable" and t.source == "desktop":
            continue  # waiting, between a resume that ended and the scan that offers it again: not "held"
        h = words.held(t.verdict, t.code, attempts=t.attempts, source=t.source, in_app=in_app)
        why = f"{words.LAPSED} {h.why}".strip() if t.key in lapsed else h.why
        held.append(RecentItem(t.key, t.title, h.what, why, h.can_do, t.since, t.home, h.actions, t.reason,
                               t.stated_age, t.session_key, t.facts))
        shown.add(t.key)
    # a turn listed above (its marker is back) is not also listed with an older ending
    ended = sorted((r for r in outcomes if r.key not in shown), key=lambda r: -(r.since or 0))
    return tuple(held) + tuple(ended)


@dataclass(frozen=True)
class Problem:
    """Something the tray could not read or do, with where to look and what to do about it. ``attention``: the
    user must act on it (False for a home that simply does not exist yet)."""

    text: str
    folder: str = ""  # what "Open folder" opens ("" = nothing to open)
    advice: str = "Run hermes-tray doctor for the details and how to fix it."
    attention: bool = True
    # "markers": a home's interrupted turns cannot be read (a corrupt, unreadable or not yet supported
    # store): the tray does not know that nothing waits there. "" for any other problem.
    kind: str = ""
    home: str = ""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ViewState:
    pending: tuple[TurnItem, ...] = ()  # actionable turns waiting for a decision
    others: tuple[TurnItem, ...] = ()  # markers the tray leaves alone (running, stale, exhausted, WebUI)
    running: tuple[RunningItem, ...] = ()
    backend_enabled: bool | None = True  # None: homes disagree
    mode: str = "ask"
    autostart: bool | None = None  # None: not available on this platform
    show_prompts: bool = True
    problems: tuple[Problem, ...] = ()  # sources the scanner could not read, said plainly
    homes_found: bool = True  # False: no Hermes home exists yet; ``watching`` says where we look
    watching: tuple[str, ...] = ()  # home paths watched (shown while none exists)
    recent: tuple[RecentItem, ...] = ()  # not waiting: held back (with why) and how continuations ended
    in_app: bool = True  # a Hermes app exists to finish a turn in by hand (False: the demo)
    demo: bool = False

    @property
    def held(self) -> tuple[TurnItem, ...]:
        """Interrupted turns not offered because Hermes auto-continue is off in their home."""
        return tuple(t for t in self.others if t.verdict == "disabled")

    @property
    def attention_problems(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.attention)

    @property
    def unreadable_homes(self) -> tuple[str, ...]:
        """Homes whose interrupted turns cannot be read: nobody knows that nothing waits there."""
        return tuple(dict.fromkeys(p.home or p.folder for p in self.attention_problems if p.kind == "markers"))

    def status_line(self, *, loading: bool = False) -> str:
        """What the menu and the tooltip say first when no turn waits (a waiting one says itself)."""
        if self.held:
            return words.count(len(self.held), "interrupted turn") + " held: auto-continue is off"
        if loading:
            return words.LOOKING
        if not self.homes_found:
            return self.no_home_text()
        bad = self.unreadable_homes
        if bad:
            where = short_path(bad[0]) if len(bad) == 1 else words.count(len(bad), "home")
            return f"Cannot read the interrupted turns in {where}"
        return words.NO_TURNS

    @property
    def needs_attention(self) -> bool:
        """Turns wait or a problem stands: the icon asks for a look (SNI ``NeedsAttention``)."""
        return bool(self.pending or self.attention_problems)

    @property
    def icon_state(self) -> str:
        if self.running:
            return "busy"
        if self.needs_attention:
            return "attention"
        if self.backend_enabled is False:
            return "paused"
        return "idle"

    def tooltip(self) -> str:
        lines = ["Hermes Tray"]
        for r in self.running:
            lines.append(f"Resuming {elide(r.title, 40)} — {elapsed_text(r.elapsed_now())} — {r.status}")
        n = len(self.pending)
        if n:
            lines.append(words.count(n, "interrupted turn") + " waiting")
            if self.unreadable_homes:
                lines.append(self.status_line())
        elif not self.running or self.held or self.unreadable_homes:
            lines.append(self.status_line())
        bad = self.attention_problems
        if bad:
            more = f" · {words.count(len(bad) - 1, 'more problem')}" if len(bad) > 1 else ""
            lines.append(f"⚠ {elide(str(bad[0]), 90)}{more}")
        if self.backend_enabled is False:
            lines.append(words.AUTO_OFF)  # it holds every turn: what the tray would do does not apply
        else:
            if self.backend_enabled is None:
                lines.append(words.AUTO_OFF_SOME)
            lines.append(words.MODE_LINES.get(self.mode, self.mode))
        return "\n".join(lines)

    def no_home_text(self) -> str:
        where = ", ".join(short_path(w) for w in self.watching[:2]) or "the Hermes home"
        return f"No Hermes home found yet — watching {where} for one"


def turn_item(record: TurnRecord, *, show_prompts: bool, now: float | None = None, name: str = "",
              reminder: float | None = None) -> TurnItem:
    """A scanner record as a row; ``now``: when its age was measured (its scan); ``name``: what tells it apart
    from the turns listed with it (``turn_names``)."""
    from hermes_tray.notify.coalesce import NAME_WIDTH, clean_text, turn_label, turn_lines

    home = str(record.home)
    progress, cause, facts = turn_lines(record, show_prompts=show_prompts)
    return TurnItem(
        key=key_of(record),
        home=home,
        session_key=record.session_key,
        title=name or elide(turn_label(record, show_prompts=show_prompts), NAME_WIDTH),
        excerpt=clean_text(record.prompt_excerpt, 200) if show_prompts else "",
        since=turn_since(record, now),
        moment=str(record.moment[0]),
        at=record.moment[1],
        attempts=record.attempts,
        verdict=str(record.verdict),
        reason=clean_text(record.reason, 300),
        profile=clean_text(record.profile, 64) or "default",
        source=str(record.source),
        record=record,
        stated_age=record.age_seconds,
        code=str(record.code or ""),
        progress=progress,
        cause=cause,
        facts=facts,
        reminder=reminder,
    )


def view_problems(texts: Sequence[str], details: Sequence[ProblemDetail] | None, *,
                  homes_found: bool = True) -> tuple[Problem, ...]:
    """The scan's problems as rows. While no home exists, its "does not exist" lines are left out: the no-home
    state says it."""
    if details is None:
        return tuple(Problem(str(t)) for t in texts)
    return tuple(Problem(d.text, folder=d.folder, attention=d.attention, kind=d.kind, home=d.home)
                 for d in details if d.attention or homes_found)
