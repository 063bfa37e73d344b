"""Numbers from files other programs wrote: one set of coercions, Hermes' semantics, always finite and
bounded.

Hermes reads its numbers with Python's own ``float(x)`` / ``int(x)``, so those conversions are the rule here
too; where Hermes would raise these return None and the caller says what Hermes does then. Results are finite
and integers capped at :data:`INT_CAP`, so a 400-digit ``attempts`` prints and serialises like any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["INT_CAP", "HermesRaises", "convert", "as_float", "as_int", "finite", "json_int", "json_number",
           "strict_finite", "capped_int"]

_N = TypeVar("_N", int, float)

INT_CAP = 2**53  # the largest integer every JSON reader keeps exactly


class HermesRaises(ValueError):
    """Python's conversion overflowed where Hermes' own code does not catch it (Hermes fails there)."""


def convert(kind: Callable[[Any], _N], value: Any) -> _N | None:
    """``kind(value)`` (``int`` or ``float``) as Python, and so Hermes, computes it; None where that raises
    TypeError/ValueError (Hermes falls back to a default); :class:`HermesRaises` on OverflowError."""
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None
    except OverflowError as exc:
        raise HermesRaises(f"{kind.__name__}() overflows on it") from exc


def as_float(value: Any) -> float | None:
    """``float(value)``, or None where that raises (an overflow too). May be NaN/inf."""
    try:
        return convert(float, value)
    except HermesRaises:
        return None


def as_int(value: Any) -> int | None:
    """``int(value)``, or None where that raises (NaN, inf, "3.0")."""
    try:
        return convert(int, value)
    except HermesRaises:
        return None


def finite(value: Any) -> float | None:
    """``float(value)`` when that is a finite number, else None."""
    f = as_float(value)
    return f if f is not None and math.isfinite(f) else None


def json_int(value: object) -> int | None:
    """``value`` when it is a JSON/SQLite integer (an ``int``, never a ``bool``), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_number(value: object) -> float | None:
    """A JSON/SQLite *number* (int or float, never bool or text) as a float, else None (NaN and ±inf kept; an
    integer too large for a float is None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return as_float(value)


def strict_finite(value: Any) -> float | None:
    """A finite JSON/SQLite *number* (int or float, never bool or text), else None: for fields Hermes
    itself type-checks (``writer_start_time``, journal times)."""
    number = json_number(value)
    return number if number is not None and math.isfinite(number) else None


def capped_int(value: int, lo: int = -INT_CAP, hi: int = INT_CAP) -> int:
    """``value`` clamped into ``[lo, hi]``: order is kept for every real-world value."""
    return lo if value < lo else hi if value > hi else value
