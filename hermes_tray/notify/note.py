"""A notification as plain data, and what shows one (Qt-free). A note shown with a ``key`` already on screen
replaces it in place where the server allows; it has a default action only when its ``actions`` hold one keyed
``"default"``, whose label servers that list actions (dunst's menu) show (no blank entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hermes_tray.format import safe_text


@dataclass(frozen=True)
class Action:
    key: str
    label: str


@dataclass(frozen=True)
class Note:
    """One notification as the user sees it. ``body`` must already respect ``show_prompts``."""

    key: str
    title: str
    body: str
    actions: tuple[Action, ...] = field(default_factory=tuple)
    urgent: bool = False
    log_line: str = ""  # identity only (session keys, counts): what a log may say about this note
    subjects: tuple[Any, ...] = field(default=(), compare=False)  # the turns this version stands for
    kind: str = "info"  # one of KINDS: picks the icon and the urgency

    def __post_init__(self) -> None:
        # Whatever a title or body carries from Hermes' files (session titles, prompts, paths), no control
        # character or bidi override reaches the notification server (every notifier shows a Note).
        object.__setattr__(self, "title", safe_text(self.title))
        object.__setattr__(self, "body", safe_text(self.body, keep_newlines=True))

    @property
    def urgency(self) -> str:
        """``low`` | ``normal`` | ``critical`` (the freedesktop levels), by kind; ``urgent`` wins."""
        return "critical" if self.urgent else URGENCY.get(self.kind, "normal")


#: what a note is about → its urgency. Waiting turns need a decision (normal; it never expires by itself:
#: :data:`STAYS`); a turn Hermes gave up on or that failed again is bad news (critical); a finished
#: or stopped one is a receipt (low: no sound, no banner on a busy screen with most servers).
URGENCY = {"waiting": "normal", "finished": "low", "stopped": "low", "gave-up": "critical",
           "failed": "critical", "refused": "normal", "info": "normal"}
KINDS = tuple(URGENCY)
#: kinds whose note asks a question: it stays until answered (expire timeout 0, the spec's "never expires", where
#: the server honours it: dunst, KDE; GNOME keeps every note in its list anyway). Not the ``resident`` hint: that
#: keeps a note after a button was pressed, and an answered question should go.
STAYS = frozenset({"waiting"})


class NoteSink(Protocol):
    """Where notes go: a :class:`~hermes_tray.notify.base.Notifier` in the tray, a list in a test."""

    def show(self, note: Note) -> None: ...

    def close(self, key: str) -> None: ...

    def prepare(self) -> None: ...
