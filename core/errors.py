"""The engine's errors: one family, each saying what happened in the user's words and keeping the rest for the
log.

Every error the engine raises on purpose derives from :class:`TrayError` (a caller shows ``user_message``, one
sentence without internals, and logs ``detail``), keeping a built-in base where callers catch by it. A
catch-all in the engine is a boundary, which says so on its line (``tests/test_errors.py`` counts them);
bookkeeping, which must never break a turn, goes through one door, :func:`bookkeeping`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["FALLBACK", "Bookkept", "TrayError", "bookkeeping"]

#: logging's levels, for :func:`bookkeeping`, without importing logging (``status`` logs nothing: core/lazy_log.py)
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40

#: said when an error carries no words of its own
FALLBACK = "something went wrong (the log has the details)"


class TrayError(Exception):
    """Base of the engine's errors: ``user_message`` for people, ``detail`` for the log and ``--json``."""

    def __init__(self, *args: object, detail: str | None = None) -> None:
        super().__init__(*args)
        self.extra_detail = detail

    @property
    def user_message(self) -> str:
        """One short sentence a person can act on (the message the error was raised with, by default)."""
        if isinstance(self, OSError) and type(self).__str__ is OSError.__str__:
            # "[Errno 40] refusing to follow a symlink: '/p'" is for the log; people read the words alone
            return str(self.strerror or FALLBACK)
        return str(self) or FALLBACK

    @property
    def detail(self) -> str:
        """Everything for the log: the class, the full message, what was kept aside, and the cause."""
        parts = [f"{type(self).__name__}: {self}"]
        if self.extra_detail:
            parts.append(self.extra_detail)
        cause = self.__cause__ if self.__cause__ is not None else (
            None if self.__suppress_context__ else self.__context__)
        if cause is not None:
            parts.append(f"caused by {type(cause).__name__}: {cause}")
        return "; ".join(parts)


@dataclass
class Bookkept:
    """What :func:`bookkeeping` saw: ``error`` is the exception it logged and swallowed, or None."""

    error: Exception | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


@contextmanager
def bookkeeping(logger: Any, what: str, *args: object,
                level: int = WARNING, trace: bool = True) -> Iterator[Bookkept]:
    """``with bookkeeping(log, "could not journal %s", key) as kept:`` — the body's failure is logged, never
    raised (records of a turn must never break one); ``kept.failed`` says whether the body ran through."""
    kept = Bookkept()
    try:
        yield kept
    except Exception as exc:  # boundary: bookkeeping never breaks a turn (the one door for it)
        kept.error = exc
        if trace:
            logger.log(level, what, *args, exc_info=True)
        else:
            logger.log(level, what + ": %s", *args, exc)
