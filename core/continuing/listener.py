"""What a continuation tells whoever started it while it runs: one :class:`Listener`. In order: ``progress``
(throttled), ``connected`` (Hermes is up: bookkeeping may start beside it), ``submitting`` (an older Hermes:
the run's own marker, right before the note), ``dispatched``; how it ended is the return value. Called
through :class:`Heard`: a listener that raises is logged and the turn goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hermes_tray_core.continuing.results import ContinuationResult, Progress
from hermes_tray_core.lazy_log import get_logger

__all__ = ["Callbacks", "Heard", "Listener"]

logger = get_logger(__name__)


class Listener(Protocol):
    """What a continuation reports, as it goes (module doc)."""

    def progress(self, progress: Progress) -> None: ...
    def connected(self, gateway_pid: int | None) -> None: ...
    def submitting(self, marker: dict[str, Any]) -> None: ...
    def dispatched(self, result: ContinuationResult) -> None: ...


@dataclass(frozen=True)
class Callbacks:
    """A :class:`Listener` made of the functions given; an event without one is not listened to."""

    on_progress: Callable[[Progress], object] | None = None
    on_connected: Callable[[int | None], object] | None = None
    on_submitting: Callable[[dict[str, Any]], object] | None = None
    on_dispatched: Callable[[ContinuationResult], object] | None = None

    def progress(self, progress: Progress) -> None:
        if self.on_progress is not None:
            self.on_progress(progress)

    def connected(self, gateway_pid: int | None) -> None:
        if self.on_connected is not None:
            self.on_connected(gateway_pid)

    def submitting(self, marker: dict[str, Any]) -> None:
        if self.on_submitting is not None:
            self.on_submitting(marker)

    def dispatched(self, result: ContinuationResult) -> None:
        if self.on_dispatched is not None:
            self.on_dispatched(result)


class Heard(Callbacks):
    """A listener as the continuation tells it: none is nobody (falsy), and one that raises is logged, never the
    turn's end."""

    def __init__(self, listener: Listener | None = None) -> None:
        super().__init__(*(None if listener is None else _logged(getattr(listener, event), event)
                           for event in ("progress", "connected", "submitting", "dispatched")))

    def __bool__(self) -> bool:
        return self.on_progress is not None


def _logged(tell: Callable[[Any], object], event: str) -> Callable[[Any], None]:
    def told(arg: Any) -> None:
        try:
            tell(arg)
        except Exception:  # boundary: a callback into the shell (a listener that raises never ends the turn)
            logger.exception("the continuation's listener failed on %s", event)
    return told
