"""One interrupted turn, typed once where it enters the engine (the scanner, the command line): :class:`Turn`.
Past that door nothing re-checks the key, re-resolves the home or re-reads a number of the entry.

A :class:`Marker` is one entry read with Hermes' own coercions (``read_turn_marker``); a value whose
conversion raises in Hermes reads as None (Hermes then ignores the entry). ``raw`` keeps the entry as read,
for compare-and-swap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.keys import HomePath, SessionKey, home_path, session_key
from hermes_tray_core.numbers import (
    INT_CAP,
    as_float,
    as_int,
    capped_int,
    finite,
    json_int,
    json_number,
    strict_finite,
)

__all__ = ["Marker", "Turn", "TurnId", "TurnKey"]


class Marker(NamedTuple):
    """One marker entry as Hermes reads it (:meth:`read`), and the entry itself (``raw``)."""

    raw: Any = None  # the entry as read (compare-and-swap compares it); None for a turn known without one
    attempts: int | None = 0  # Hermes' max(0, int(attempts or 0)), capped; None where Hermes' reader fails
    hermes_started: float | None = 0.0  # Hermes' float(started_at or 0), NaN and ±inf kept; None where it raises
    started: float | None = None  # the same when it is a finite time, else None
    prompt: str = ""  # Hermes' str(prompt or "")
    auto_continue: bool = True  # Hermes' bool(entry.get("auto_continue", True))
    interrupted_at: float | None = None  # a positive finite JSON number (newer Hermes variants), else None
    writer_pid: int | None = None  # a positive int (never a bool), as Hermes' writer check wants it
    writer_start_time: Any = None  # as written: Hermes' own liveness check coerces it
    queued: bool = False

    @classmethod
    def read(cls, raw: object) -> Marker:
        """The typed view of ``raw`` (anything a marker file holds under a session key). Never raises."""
        if not isinstance(raw, dict):
            return cls(raw, attempts=None, hermes_started=None)
        attempts = as_int(raw.get("attempts") or 0)
        try:
            prompt = str(raw.get("prompt") or "")
        except ValueError:  # an integer too long to print: Hermes cannot read it as text either
            prompt = ""
        started_raw = raw.get("started_at") or 0
        interrupted = strict_finite(raw.get("interrupted_at"))
        pid = json_int(raw.get("writer_pid"))
        return cls(raw, None if attempts is None else capped_int(max(0, attempts), 0, INT_CAP),
                   as_float(started_raw), finite(started_raw), prompt, bool(raw.get("auto_continue", True)),
                   interrupted if interrupted is not None and interrupted > 0 else None,
                   pid if pid is not None and pid > 0 else None, raw.get("writer_start_time"),
                   bool(raw.get("queued")))

    @classmethod
    def known(cls, started_at: float, attempts: int = 0) -> Marker:
        """A turn known without its marker entry (a WebUI turn): when it started and how often it was tried."""
        return cls(None, attempts, started_at, started_at)

    @property
    def is_entry(self) -> bool:
        """An entry Hermes' reader looks at (a JSON object), not junk."""
        return isinstance(self.raw, dict)

    @property
    def entry(self) -> dict[str, Any] | None:
        """The entry as read, when it is one (a copy: the caller may keep or change it)."""
        return dict(self.raw) if isinstance(self.raw, dict) else None

    @property
    def started_at(self) -> float:
        """:attr:`started`, else 0: every record names a junk-valued turn alike."""
        return self.started if self.started is not None else 0.0

    @property
    def tries(self) -> int:
        """:attr:`attempts`, 0 where unreadable: how often the turn was continued, as records and journals say it."""
        return self.attempts or 0

    @property
    def writer_start(self) -> float | None:
        """``writer_start_time`` when it is a JSON number (a start time to compare), else None."""
        return json_number(self.writer_start_time)

    @property
    def reference_time(self) -> float | None:
        """When the freshness window starts: :attr:`interrupted_at`, else ``started_at`` as Hermes converts it."""
        return self.interrupted_at if self.interrupted_at is not None else self.hermes_started

    @property
    def excerpt_source(self) -> str:
        """The prompt the user reads: only a prompt that is text (Hermes also takes a number there as text)."""
        prompt = self.raw.get("prompt") if isinstance(self.raw, dict) else None
        return prompt if isinstance(prompt, str) else ""

    def same_entry(self, other: object) -> bool:
        """``other`` (an entry read again) is this very entry: nothing changed since it was read."""
        return isinstance(self.raw, dict) and isinstance(other, dict) and dict(other) == self.raw


class TurnKey(NamedTuple):
    """Which session's waiting turn, in which home: what the shell goes by. Compared and hashed only."""

    home: HomePath
    key: SessionKey

    @classmethod
    def of(cls, home: Path | str, key: object) -> TurnKey:
        """The door for a turn named from outside (a History row, a journal line): ``key`` checked."""
        return cls(home_path(home), session_key(key))


class TurnId(NamedTuple):
    """One interruption (home, session, ``started_at``, ``attempts``): its one key everywhere. A new
    interruption of the same session is a new ``TurnId`` (its :class:`TurnKey` stays)."""

    home: HomePath
    key: SessionKey
    started_at: float
    attempt: int

    @property
    def id(self) -> TurnKey:
        return TurnKey(self.home, self.key)

    def __repr__(self) -> str:
        return f"TurnId({str(self.home)!r}, {self.key!r}, {self.started_at!r}, {self.attempt})"


class Turn(NamedTuple):
    """One interrupted turn: its home, its session and its marker as the user was shown it."""

    home: HomePath
    key: SessionKey
    marker: Marker

    @classmethod
    def of(cls, home: Path | str, key: object, entry: object) -> Turn:
        """The door: ``key`` checked, ``home`` made canonical, ``entry`` typed."""
        return cls(home_path(home), session_key(key), Marker.read(entry))

    @property
    def id(self) -> TurnKey:
        """The turn's key in the shell: its home and session (a new interruption of the session keeps it)."""
        return TurnKey(self.home, self.key)

    @property
    def ident(self) -> TurnId:
        """This interruption (a new one of the session has a new start or attempt count)."""
        return TurnId(self.home, self.key, self.marker.started_at, self.marker.tries)

    @property
    def path(self) -> Path:
        return Path(self.home)

    @property
    def started_at(self) -> float:
        return self.marker.started_at

    @property
    def attempts(self) -> int:
        return self.marker.tries

    def __repr__(self) -> str:  # identity only: a turn that lands in a log must not carry its prompt
        return f"Turn(home={str(self.home)!r}, key={self.key!r}, started_at={self.started_at!r})"
