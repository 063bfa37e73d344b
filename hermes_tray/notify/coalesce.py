"""Turn a stream of "turn interrupted" events into few notifications: the first turn is announced at once; turns
found within the next 2 s update that note in place ("3 turns interrupted", Resume all / Skip all / Open), so a
crash storm is one notification, not ten. Text obeys ``show_prompts``. Qt-free: notes go to a ``NoteSink``.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hermes_tray import words
from hermes_tray.contract import key_of
from hermes_tray.format import elide, repeats, safe_text, tell_apart
from hermes_tray.notify.note import Action, Note, NoteSink
from hermes_tray_core import TurnId, TurnKey, TurnRecord

WINDOW_SECONDS = 2.0
LOG_TURNS = 20  # a storm's log line names this many turns, then counts the rest
_counter = itertools.count(1)


def clean_text(value: object, limit: int) -> str:
    """One line of displayable text from whatever a record holds (:func:`~hermes_tray.format.safe_text`), with
    ``<``, ``>`` and ``&`` swapped for look-alikes: servers with body markup would read a prompt's ``<b>`` as
    markup, servers without it show escapes verbatim."""
    if value is None:
        return ""
    text = safe_text(value if isinstance(value, str) else str(value))
    text = " ".join(text[: limit * 4].split()).translate({ord("<"): "‹", ord(">"): "›", ord("&"): "＋"})
    return text if len(text) <= limit else text[: limit - 1] + "…"


def turn_lines(turn: TurnRecord, *, show_prompts: bool) -> tuple[str, str, tuple[str, ...]]:
    """What the turn was doing and why it stopped, cleaned for display: (progress in one line, cause in one line,
    both in full). The last thing it said or did is shown only with ``show_prompts``, as prompts are; what
    cannot be read is left out, never guessed."""
    progress = turn.progress
    if progress is not None and progress.last_excerpt:
        progress = progress._replace(last_excerpt=clean_text(progress.last_excerpt, 160))
    cause = clean_text(words.cause_line(turn.cause, str(turn.cause_fact or "")), 300)
    full = tuple(clean_text(line, 300) for line in words.progress_lines(progress, excerpts=show_prompts))
    return (clean_text(words.progress_line(progress, excerpts=show_prompts), 240), cause,
            full + ((cause,) if cause else ()))


def turn_label(turn: TurnRecord, *, show_prompts: bool = False) -> str:
    """What a person calls a turn: its session's title (not one Hermes made of the prompt while prompts are
    hidden); else its prompt's first words (only when ``show_prompts``), else its profile and when it started
    (``words.untitled_label``). The session id is shown on demand, never as the name."""
    title = clean_text(turn.shown_title(prompts=show_prompts), 80)
    if title:
        return title
    excerpt = clean_text(turn.prompt_excerpt, 120) if show_prompts else ""
    return words.untitled_label(clean_text(turn.profile, 64), _when(turn), excerpt)


def _when(turn: TurnRecord) -> float | None:
    return turn.started_at if isinstance(turn.started_at, (int, float)) else None


NAME_WIDTH = 44  # characters of a turn's name the menu shows: names differ within them


def turn_names(turns: Sequence[TurnRecord], *, show_prompts: bool = False) -> list[str]:
    """:func:`turn_label` of each of turns listed together, told apart: names that would read alike
    (within :data:`NAME_WIDTH`) show the part of the prompt that differs (only when ``show_prompts``), else when
    each started, else which of them it is ("2 of 3")."""
    names = [elide(turn_label(t, show_prompts=show_prompts), NAME_WIDTH) for t in turns]
    alike = sorted(_alike(names))
    if not alike:
        return names
    excerpts = [clean_text(turns[i].prompt_excerpt, 200) if show_prompts else "" for i in alike]
    untitled = [not clean_text(turns[i].shown_title(prompts=show_prompts), 80) for i in alike]
    if show_prompts:  # the part of the prompt that differs: an untitled turn is named by it, a titled one adds it
        whole, short = tell_apart(excerpts, NAME_WIDTH - 2), tell_apart(excerpts, NAME_WIDTH - 23)
        for n, i in enumerate(alike):
            if excerpts[n] and untitled[n]:
                names[i] = f"“{whole[n]}”"
            elif excerpts[n] and not repeats(names[i], short[n]):
                names[i] = f"{elide(names[i], 20)} — {short[n]}"
    plain = names
    for fmt in ("%H:%M", "%H:%M:%S"):  # still alike (the same prompt twice): when each started
        if not _alike(names):
            return names
        dup = _alike(plain)
        names = [_timed(turns[i], n, fmt, show_prompts) if i in dup else n for i, n in enumerate(plain)]
    groups: dict[str, list[int]] = {}
    for i in sorted(_alike(names)):  # started the same second: which of them, the last resort
        groups.setdefault(names[i], []).append(i)
    for name, same in groups.items():
        for n, i in enumerate(same, 1):
            names[i] = f"{name} ({n} of {len(same)})"
    return names


def _timed(turn: TurnRecord, name: str, fmt: str, show_prompts: bool) -> str:
    """``name`` with when the turn started, written ``fmt``: a nameless turn's own label says it already."""
    at = _when(turn)
    if at is None or not 0 < at < 2**37:
        return name
    if not clean_text(turn.shown_title(prompts=show_prompts), 80) and not (show_prompts and turn.prompt_excerpt):
        return elide(words.untitled_label(clean_text(turn.profile, 64), at, fmt=fmt), NAME_WIDTH)
    return f"{name}, started {time.strftime(fmt, time.localtime(at))}"


class ListedNames:
    """The names of the turns listed together (:func:`turn_names`), made once per list and ``show_prompts``. A turn
    told apart from another keeps that name while it is listed, also once the other has gone: alone, its plain name
    could end right before the part that told it apart."""

    def __init__(self) -> None:
        self._names: dict[TurnKey, str] = {}
        self._named: tuple[Mapping[TurnKey, TurnRecord] | None, bool] = (None, False)  # the list, show_prompts

    def refresh(self, records: Mapping[TurnKey, TurnRecord], show: bool) -> None:
        before, shown = self._named
        if before is records and shown == show:
            return
        was = self._names if shown == show and before is not None else {}
        self._named = (records, show)
        names = dict(zip(records, turn_names(list(records.values()), show_prompts=show), strict=True))
        used = set(names.values())
        for key, name in names.items():
            old = was.get(key)
            if old is None or old == name or old in used or before is None or key not in before \
                    or before[key].turn.ident != records[key].turn.ident:
                continue
            if name == turn_names([records[key]], show_prompts=show)[0]:  # alone now, plainly named
                used.discard(name)
                used.add(old)
                names[key] = old
        self._names = names

    def get(self, key: TurnKey) -> str:
        return self._names.get(key, "")


def _alike(names: Sequence[str]) -> set[int]:
    count = Counter(names)
    return {i for i, n in enumerate(names) if count[n] > 1}


def turn_identity(turn: TurnRecord) -> str:
    """What a log may say about a turn: home/profile and session key."""
    return f"{turn.profile or 'default'}/{turn.session_key}"


@dataclass
class _Group:
    key: str
    started: float
    turns: list[TurnRecord] = field(default_factory=list)
    title: str = ""  # what happened to a single turn ("Interrupted again"), else "Interrupted"
    lead: str = ""  # a first line saying why it is asked again
    shown: set[TurnId] = field(default_factory=set)  # the interruptions a version of it reached the user with


class InterruptionNotices:
    """Builds the "turn interrupted" notes and remembers which turns each note stands for."""

    def __init__(
        self,
        notifier: NoteSink,
        *,
        show_prompts: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW_SECONDS,
        can_open: bool = True,
        name: Callable[[TurnRecord], str] | None = None,
    ) -> None:
        """``name``: what the user calls a turn (the name the menu lists it under), default :func:`turn_label`."""
        self.notifier = notifier
        self._name = name or (lambda t: turn_label(t, show_prompts=self.show_prompts()))
        self.can_open = can_open
        self.show_prompts = show_prompts
        self.clock = clock
        self.window = window
        self._open: _Group | None = None
        self._groups: dict[str, _Group] = {}

    def announce(self, turns: Sequence[TurnRecord], *, title: str = "", lead: str = "") -> str | None:
        """Announce newly interrupted turns; the note key used (None if nothing to say). ``title``/``lead``: a
        turn asked about again for a reason (its continuation failed, its reminder is due) gets a note of its own,
        never merged into a storm note; ``title`` says what happened, before the turn's name."""
        if not turns:
            return None
        now = self.clock()
        group = self._open
        again = bool(title or lead)
        if again or group is None or now - group.started > self.window or group.key not in self._groups or group.lead:
            group = _Group(key=f"interrupted-{next(_counter)}", started=now, title=title, lead=lead)
            self._groups[group.key] = group
            if not again:
                self._open = group
        known = {key_of(t) for t in group.turns}
        group.turns.extend(t for t in turns if key_of(t) not in known)
        self.notifier.show(self._note(group))
        return group.key

    def turns_for(self, note_key: str) -> list[TurnRecord]:
        group = self._groups.get(note_key)
        return list(group.turns) if group else []

    def newly_shown(self, note_key: str, turns: Sequence[TurnRecord]) -> list[TurnRecord]:
        """A version of the note reached the user showing ``turns``: those no earlier version showed (a storm
        note grows in place; the turns it showed before were asked already, whatever happened to them since)."""
        group = self._groups.get(note_key)
        if group is None:
            return list(turns)
        new = [t for t in turns if t.turn.ident not in group.shown]
        group.shown |= {t.turn.ident for t in new}
        return new

    def answered(self, note_key: str) -> None:
        """The user answered this note (any press: the note is gone, the notifier closes it): forget it; a later
        turn starts a new note."""
        self._groups.pop(note_key, None)
        if self._open is not None and self._open.key == note_key:
            self._open = None

    def resolved(self, keys: set[TurnKey]) -> None:
        """Turns settled elsewhere (menu, window, another process), by turn key: shrink or withdraw their notes."""
        for key, group in list(self._groups.items()):
            before = len(group.turns)
            group.turns = [t for t in group.turns if key_of(t) not in keys]
            if len(group.turns) == before:
                continue
            if group.turns:
                self.notifier.show(self._note(group))
            else:
                self.notifier.close(key)
                self.answered(key)

    def _note(self, group: _Group) -> Note:
        turns = group.turns
        show = self.show_prompts()
        if len(turns) == 1:  # the title says what happened to which turn; the body the facts and what to do
            turn = turns[0]
            label = self._name(turn)
            excerpt = clean_text(turn.prompt_excerpt, 160)
            lines = [clean_text(group.lead, 300)] if group.lead else []
            if show and excerpt and not label.startswith("“") and not repeats(label, excerpt):
                lines.append(f"“{excerpt}”")  # a titled turn: its prompt too, unless the title says it already
            progress, cause, _full = turn_lines(turn, show_prompts=show)
            lines += [x for x in (progress, cause) if x]
            lines.append(words.WAITING_ASK)
            body = "\n".join(lines)
            actions: tuple[Action, ...] = (
                Action("default", "Show"),  # a click on the note: the turns window
                Action("resume", "Resume"),
                Action("skip", "Skip"),
                Action("snooze", words.REMIND_HOUR),
                Action("disable", "Disable auto-continue"),
            )
            title = words.turn_title(group.title or words.WAITING_WHAT, label)
        else:
            names = ", ".join(self._name(t) for t in turns[:3])
            more = f" and {len(turns) - 3} more" if len(turns) > 3 else ""
            body = f"{names}{more}"
            actions = (Action("resume-all", "Resume all"), Action("skip-all", "Skip all"), Action("default", "Open"))
            title = words.storm_title(len(turns))
        named = ", ".join(turn_identity(t) for t in turns[:LOG_TURNS])
        log_what = title if len(turns) > 1 else group.title or words.WAITING_WHAT  # a log line names no turn
        log_line = f"{log_what}: {named}" + (f" and {len(turns) - LOG_TURNS} more" if len(turns) > LOG_TURNS else "")
        if not self.can_open:  # no window to open (the headless helper): no button that does nothing
            actions = tuple(a for a in actions if a.key not in ("open", "default"))
        return Note(key=group.key, title=title, body=body, actions=actions, log_line=log_line,
                    subjects=tuple(turns), kind="waiting")
