"""Turn a stream of "turn interrupted" events into few notifications.

The first interrupted turn is announced at once; turns found within the next 2 s update that
same notification in place ("3 turns interrupted", Resume all / Skip all / Open), so a crash
storm is one notification, not ten. After the window a new turn starts a new notification.
Text obeys ``show_prompts``: off → the note names the session, never the prompt.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hermes_tray import words
from hermes_tray.format import safe_text
from hermes_tray.notify.base import Action, Note, Notifier
from hermes_tray_core import TurnRecord

WINDOW_SECONDS = 2.0
LOG_TURNS = 20  # a storm's log line names this many turns, then counts the rest
_counter = itertools.count(1)


def clean_text(value: object, limit: int) -> str:
    """One line of displayable text from whatever a record holds (None, numbers, control chars:
    :func:`~hermes_tray.format.safe_text`).

    ``<``, ``>`` and ``&`` are swapped for look-alikes: servers with body markup would read a
    prompt such as ``<b>`` or ``<a href=…>`` as markup, servers without it show escapes verbatim.
    """
    if value is None:
        return ""
    text = safe_text(value if isinstance(value, str) else str(value))
    text = " ".join(text[: limit * 4].split()).translate({ord("<"): "‹", ord(">"): "›", ord("&"): "＋"})
    return text if len(text) <= limit else text[: limit - 1] + "…"


def turn_label(turn: TurnRecord, *, show_prompts: bool = False) -> str:
    """What a person calls a turn: its session's title; for an untitled session its prompt's first words
    (only when ``show_prompts``), else its profile and when it started (``words.untitled_label``). The
    session id is shown on demand, never as the name."""
    title = clean_text(turn.title, 80)
    if title:
        return title
    excerpt = clean_text(turn.prompt_excerpt, 120) if show_prompts else ""
    profile = clean_text(turn.profile, 64)
    return words.untitled_label(profile, turn.started_at if isinstance(turn.started_at, (int, float)) else None,
                                excerpt)


def turn_identity(turn: TurnRecord) -> str:
    """What a log may say about a turn: home/profile and session key."""
    return f"{turn.profile or 'default'}/{turn.session_key}"


@dataclass
class _Group:
    key: str
    started: float
    turns: list[TurnRecord] = field(default_factory=list)
    title: str = ""  # a single turn's own title ("failed again"), else the default
    lead: str = ""  # a first line saying why it is asked again


class InterruptionNotices:
    """Builds the "turn interrupted" notes and remembers which turns each note stands for."""

    def __init__(
        self,
        notifier: Notifier,
        *,
        show_prompts: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW_SECONDS,
        can_open: bool = True,
    ) -> None:
        self.notifier = notifier
        self.can_open = can_open
        self.show_prompts = show_prompts
        self.clock = clock
        self.window = window
        self._open: _Group | None = None
        self._groups: dict[str, _Group] = {}

    def announce(self, turns: Sequence[TurnRecord], *, title: str = "", lead: str = "") -> str | None:
        """Announce newly interrupted turns; returns the note key used (None if nothing to say).

        ``title``/``lead``: a turn asked about again for a reason (its continuation failed): a note
        of its own, with the same buttons, never merged into a storm note.
        """
        if not turns:
            return None
        now = self.clock()
        group = self._open
        if title or lead:
            group = _Group(key=f"interrupted-{next(_counter)}", started=now, title=title, lead=lead)
            self._groups[group.key] = group
        elif group is None or now - group.started > self.window or group.key not in self._groups or group.lead:
            group = _Group(key=f"interrupted-{next(_counter)}", started=now)
            self._groups[group.key] = group
            self._open = group
        known = {self._ident(t) for t in group.turns}
        group.turns.extend(t for t in turns if self._ident(t) not in known)
        self.notifier.show(self._note(group))
        return group.key

    def turns_for(self, note_key: str) -> list[TurnRecord]:
        group = self._groups.get(note_key)
        return list(group.turns) if group else []

    def answered(self, note_key: str) -> None:
        """The user answered this note (a button): forget it; a later turn starts a new note."""
        self._groups.pop(note_key, None)
        if self._open is not None and self._open.key == note_key:
            self._open = None

    def resolved(self, session_keys: set[tuple[str, str]]) -> None:
        """Turns settled elsewhere (menu, window, another process): shrink or withdraw their notes."""
        for key, group in list(self._groups.items()):
            before = len(group.turns)
            group.turns = [t for t in group.turns if self._ident(t) not in session_keys]
            if len(group.turns) == before:
                continue
            if group.turns:
                self.notifier.show(self._note(group))
            else:
                self.notifier.close(key)
                self.answered(key)

    @staticmethod
    def _ident(turn: TurnRecord) -> tuple[str, str]:
        return (str(turn.home), turn.session_key)

    def _note(self, group: _Group) -> Note:
        turns = group.turns
        show = self.show_prompts()
        if len(turns) == 1:
            turn = turns[0]
            label = turn_label(turn, show_prompts=show)
            excerpt = clean_text(turn.prompt_excerpt, 160)
            lines = [label]
            if show and excerpt:  # an untitled turn, named by its prompt's first words: the whole excerpt instead
                lines = [f"“{excerpt}”"] if label.startswith("“") else [label, f"“{excerpt}”"]
            if group.lead:
                lines.insert(0, clean_text(group.lead, 300))
            lines.append(words.WAITING_ASK)
            body = "\n".join(lines)
            actions: tuple[Action, ...] = (
                Action("resume", "Resume"),
                Action("skip", "Skip"),
                Action("disable", "Disable auto-continue"),
            )
            title = group.title or words.WAITING_TITLE
        else:
            names = ", ".join(turn_label(t, show_prompts=show) for t in turns[:3])
            more = f" and {len(turns) - 3} more" if len(turns) > 3 else ""
            body = f"{names}{more}"
            actions = (Action("resume-all", "Resume all"), Action("skip-all", "Skip all"), Action("open", "Open"))
            title = words.storm_title(len(turns))
        named = ", ".join(turn_identity(t) for t in turns[:LOG_TURNS])
        log_line = f"{title}: {named}" + (f" and {len(turns) - LOG_TURNS} more" if len(turns) > LOG_TURNS else "")
        if not self.can_open:  # no window to open (the headless helper): no button that does nothing
            actions = tuple(a for a in actions if a.key != "open")
        return Note(key=group.key, title=title, body=body, actions=actions, log_line=log_line,
                    subjects=tuple(turns), kind="waiting")
