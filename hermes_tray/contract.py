"""The contract between the Qt shell and the engine: the words they share, and :class:`Engine`, what the tray and
the helper may do to turns and homes (implemented by :class:`hermes_tray.engine.CoreEngine`; tests script it).
Qt-free and import-cheap: it imports nothing of ``hermes_tray`` (docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hermes_tray_core import Outcome

if TYPE_CHECKING:  # types only: the shell imports these modules when it first scans
    from hermes_tray_core import Home, Ledger, Progress, TraySettings, TurnKey, TurnRecord

__all__ = ["ROUTINE_REFUSALS", "BackendValues", "Engine", "Outcome", "ProblemDetail", "RunResult", "ScanReport",
           "ScanSummary", "SkipReply", "key_of"]


#: Refusal codes (``core.continuing.resume``) that are normal operation when two processes both act on a turn:
#: another one holds its claim, or it is no longer marked (someone else settled it).
ROUTINE_REFUSALS = frozenset({"claimed-elsewhere", "gone"})


@dataclass(frozen=True)
class RunResult:
    """How one resume ended, as the controller needs it (adapted from ``core.continuing.resume.ResumeResult``)."""

    outcome: Outcome
    message: str
    answer: str = ""  # the continuation's answer, when the engine has it
    attempts: int | None = None
    code: str = ""  # a refusal's reason code (core.continuing.resume: claimed-elsewhere, gone, changed, …)
    # Where the continuation ran: "running-backend" (the user's hermes dashboard) or "separate-process"; "" when
    # none ran. ``where`` says it for a user ("in your running Hermes (pid N)" / "in a separate Hermes process").
    ran_in: str = ""
    where: str = ""
    verdict: str = ""  # a ``not-actionable`` refusal's verdict (running, disabled, stale, unsure, settled)
    marker_left: str = ""  # Hermes' file could not be changed after the run: why, in plain words


@dataclass(frozen=True)
class SkipReply:
    """How a skip ended: ``ok``, else the line to show the user."""

    ok: bool
    message: str = ""


@dataclass(frozen=True)
class ProblemDetail:
    """One problem a scan found, with where to look (the views' banner and its "Open folder" button)."""

    text: str
    folder: str = ""  # "": nothing to open
    attention: bool = True  # False: a home that does not exist (yet); not a problem while no home exists
    kind: str = ""  # "markers": the turn-marker file itself
    home: str = ""


@dataclass(frozen=True)
class ScanSummary:
    """What a scan says beside its turns and problem lines."""

    backend_enabled: bool | None = True  # Hermes' auto-continue in the homes: None when they disagree
    problem_details: tuple[ProblemDetail, ...] | None = None  # None: only the problem lines are known
    homes_found: bool = True  # False: no Hermes home exists yet
    watching: tuple[str, ...] = ()  # the homes looked at


@dataclass(frozen=True)
class BackendValues:
    """Hermes' auto-continue keys of one home, as the settings dialog edits them."""

    enabled: bool = True
    freshness_minutes: int = 15
    max_attempts: int = 2
    error: str | None = None  # config.yaml unreadable: shown, and its home cannot be edited
    managed: tuple[str, ...] = ()  # keys the administrator's managed config pins: shown, never edited
    managed_path: str | None = None


@dataclass(frozen=True)
class ScanReport:
    """One scan as the detector hands it to the controller."""

    records: tuple[Any, ...] = ()
    problems: tuple[str, ...] = ()
    reason: str = "start"
    started: float = 0.0  # time.time() when the wake-up happened (for latency measurement)
    finished: float = 0.0
    homes: tuple[Any, ...] = ()
    extra: ScanSummary = field(default_factory=ScanSummary)  # what the scan says beside turns and problems


def key_of(record: TurnRecord) -> TurnKey:
    """The key a turn goes by in the shell: the engine's typed ``TurnKey`` (canonical home, checked session), made
    by the scan that found it; compared and hashed, never taken apart (a History row's comes from ``turn_key``)."""
    return record.turn.id


class Engine(Protocol):
    """What the shell needs from the engine. Calls marked *blocking* write files, take locks or wait on
    SQLite: the controller runs them on its write worker, never on the GUI thread."""

    def homes(self) -> list[Home]: ...
    def scan(self, homes: Sequence[Home]) -> tuple[Sequence[TurnRecord], Sequence[str], ScanSummary]:
        """(turns, problems to show, what else the scan says)."""
    def watch_plan(self, homes: Sequence[Home]) -> tuple[list[Path], list[Path]]: ...
    def writers(self, homes: Sequence[Home], records: Sequence[TurnRecord]) -> list[tuple[int, float | None]]: ...
    def writer_exited(self, pid: int) -> None:
        """A watched writer exited (the detector thread): witness the moment (``ExitWitness``)."""
    def skip(self, record: TurnRecord, *, origin: str) -> SkipReply: ...  # blocking
    def resume(self, record: TurnRecord, *, origin: str, on_progress: Callable[[Progress], None],
               stop: threading.Event) -> RunResult: ...  # blocking (minutes): a thread of its own
    def set_backend(self, home_paths: Sequence[str], **changes: Any) -> list[str]: ...  # blocking
    def snooze(self, record: TurnRecord, until: float, *, origin: str) -> None:  # blocking
        """Record "remind me later" for ``record`` until the wall-clock time ``until``; raises when the ledger
        cannot be written (the snooze did not take)."""
    def backend_values(self, home_path: str) -> BackendValues: ...
    def ledger(self) -> Ledger: ...
    def history(self, limit: int = 500) -> list[dict[str, Any]]:
        """History's rows (``Ledger.turns``): one per interrupted turn, one per settings change."""
    def history_files(self) -> list[Path]:
        """The files :meth:`history` reads (History watches them)."""
    def session_titles(self, turns: Sequence[tuple[str, str]], *,
                       prompts: bool = True) -> dict[tuple[str, str], str]:  # blocking
        """Hermes' titles of these (home, session key) turns; ``prompts`` False leaves out those made of the prompt."""
    def settings(self) -> TraySettings: ...
    def update_settings(self, changes: dict[str, Any]) -> TraySettings: ...  # blocking
