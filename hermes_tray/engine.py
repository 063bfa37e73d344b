"""The adapter the tray and the helper act through: a thin layer over ``hermes_tray_core``'s face, no engine logic.
Refusals are told apart by their reason codes, never by their text. Qt-free.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray.contract import BackendValues, Outcome, ProblemDetail, RunResult, ScanSummary, SkipReply
from hermes_tray.format import safe_text
from hermes_tray_core import (
    ExitWitness,
    Home,
    Scanner,
    SettingsError,
    TraySettings,
    TurnRecord,
    default_cache_file,
    discover_homes,
    ledger,
    load_settings,
)

if TYPE_CHECKING:
    from hermes_tray_core import Ledger, Progress, ResumeResult

log = logging.getLogger(__name__)


class CoreEngine:
    """Adapter from the shell's :class:`~hermes_tray.contract.Engine` protocol to ``hermes_tray_core``."""

    def __init__(self, explicit_homes: Sequence[str] | None = None) -> None:
        self.explicit_homes = list(explicit_homes) if explicit_homes else None
        self._scanner: Scanner | None = None
        self._scanner_homes: tuple[str, ...] = ()
        self._witness = ExitWitness()  # the detector thread's: why a watched writer died

    # --- homes and scanning (detector thread) -------------------------------------------------
    def homes(self) -> list[Home]:
        extra: Sequence[str] = ()
        try:
            extra = self.settings().homes
        except Exception:  # boundary: a settings file that cannot be read: the homes Hermes has still count
            pass
        return discover_homes(explicit=self.explicit_homes, extra=extra)

    def scan(self, homes: Sequence[Home]) -> tuple[Sequence[TurnRecord], Sequence[str], ScanSummary]:
        key = tuple(str(h.path) for h in homes)
        if self._scanner is None or key != self._scanner_homes:
            # the CLI's cache too: a warm start re-parses neither journals nor config.yaml
            self._scanner = Scanner(list(homes), cache_file=default_cache_file(), ask_running_hermes=True)
            self._scanner_homes = key
        result = self._scanner.scan()
        problems: list[str] = []
        details: list[ProblemDetail] = []  # the same problems, with where to look (the views' banner)
        enabled: list[bool] = []
        for report in result.homes:
            desktop = str(report.path / "desktop")
            for p in report.problems:  # shown as is in the menu and the windows: no control character from a path
                problems.append(safe_text(f"{report.profile}: {p}"))
                marker = report.markers in ("corrupt", "unreadable") and "interrupted_turns" in p
                details.append(ProblemDetail(problems[-1], folder=desktop if marker else
                                             (str(report.path) if report.exists else ""),
                                             attention=report.exists or not report.reachable,
                                             kind="markers" if marker else "", home=str(report.path)))
            for u in report.unsupported:
                problems.append(safe_text(f"{report.profile}: {u} (not supported yet)"))
                details.append(ProblemDetail(problems[-1], folder=desktop, attention=True, kind="markers",
                                             home=str(report.path)))
            if report.exists:
                enabled.append(bool(report.config.enabled))
        return result.turns, problems, ScanSummary(
            backend_enabled=True if all(enabled) else None if any(enabled) else False,  # None: homes disagree
            problem_details=tuple(details),
            homes_found=any(r.exists for r in result.homes),
            watching=tuple(str(r.path) for r in result.homes),
        )

    def watch_plan(self, homes: Sequence[Home]) -> tuple[list[Path], list[Path]]:
        """What to watch: every home that answers a (bounded) look. A home that cannot be read or does not
        answer is left out — watching it would fail or hang for every home — and its scan says why."""
        from hermes_tray_core import HomeAccess, look_at_homes

        dirs: list[Path] = []
        files: list[Path] = []
        looks = look_at_homes([h.path for h in homes])
        for h, seen in zip(homes, looks, strict=True):
            if seen.access in (HomeAccess.UNREADABLE, HomeAccess.NO_ANSWER):
                continue
            dirs += [h.path / "desktop", h.path / "profiles", h.webui_journal_dir]
            files += [h.marker_file, h.config_file]
        if self.explicit_homes is None:
            from hermes_tray_core import settings_file

            files.append(settings_file())  # homes added there (the CLI, another tray) are picked up
        return dirs, files

    def writers(self, homes: Sequence[Home], records: Sequence[TurnRecord]) -> list[tuple[int, float | None]]:
        """Live marker writers to watch for exit (from the entries the scanner read)."""
        out: dict[int, float | None] = {}
        for r in records:
            if r.holder is not None:  # a live Hermes backend holds an unknown-writer turn: its exit matters too
                out[r.holder[0]] = r.holder[1]
            pid = r.turn.marker.writer_pid
            if r.writer == "alive" and pid is not None:
                # The scan has just judged this pid to be the writer (through a wall-clock step, too: its
                # recorded start time may no longer match psutil's), so the watch takes the pid alone; at
                # worst a pid recycled since then wakes a rescan early.
                out[pid] = None
        self._witness.look(records)
        return list(out.items())

    def writer_exited(self, pid: int) -> None:
        """A watched writer exited: the moment its turns were interrupted, and whether the kernel ended it for lack
        of memory (journalled for its turns)."""
        self._witness.exited(pid)

    # --- actions (blocking: the controller's write worker, or a resume's own thread) --------------
    def skip(self, record: TurnRecord, *, origin: str) -> SkipReply:
        """Skip unless the entry changed or a resume holds the turn right now (``core.continuing.skip``)."""
        from hermes_tray_core import SkipOutcome, skip_turn

        # recorded inside the skip's claim: a resume after it finds the turn settled
        res = skip_turn(record.turn, via=f"tray-{origin}", profile=record.profile)
        if res.ok:
            return SkipReply(True)
        log.info("skip refused (%s): %s", res.outcome, record.session_key)
        if res.outcome == SkipOutcome.RESUMING:
            return SkipReply(False, "This turn is being resumed right now; it was not skipped.")
        if res.outcome == SkipOutcome.CHANGED:
            return SkipReply(False, "The turn changed since it was shown; it was left in place.")
        return SkipReply(False, res.message)

    def resume(self, record: TurnRecord, *, origin: str, on_progress: Callable[[Progress], None],
               stop: threading.Event) -> RunResult:
        """Runs on a worker thread; the engine claims, re-checks, dispatches and journals."""
        from hermes_tray_core import Callbacks, resume_turn

        result = resume_turn(record.turn, listener=Callbacks(on_progress=on_progress), stop=stop, via=f"tray-{origin}")
        return run_result(result)

    def snooze(self, record: TurnRecord, until: float, *, origin: str) -> None:
        """Remind me later: a ``snoozed`` decision in the ledger (``core.deciding.snooze``); it continues and
        skips nothing. Raises what the ledger raises."""
        from hermes_tray_core import snooze_turn

        snooze_turn(record, until, via=f"tray-{origin}")

    def set_backend(self, home_paths: Sequence[str], **changes: Any) -> list[str]:
        """Write Hermes' auto-continue keys (menu toggle, settings dialog); record each value that changed."""
        from hermes_tray_core import BackendConfigError, read_backend_config, write_auto_continue

        problems = []
        for home in home_paths:
            before = read_backend_config(home).auto_continue
            try:
                after = write_auto_continue(home, **changes).auto_continue
            except BackendConfigError as exc:
                problems.append(f"{home}: {exc}")
            except OSError as exc:
                problems.append(f"{home}: {exc.strerror or exc}")
            else:
                log.info("backend config of %s changed: %s", home, changes)
                for key in changes:
                    if changes[key] is not None:
                        self._record_config(home, key, getattr(before, key, None), getattr(after, key, None))
        return problems

    @staticmethod
    def _record_config(home: str | None, key: str, old: object, new: object) -> None:
        """A ``config-changed`` decision (by the tray) when the value really changed; bookkeeping never raises."""
        if old == new and type(old) is type(new):
            return
        try:
            ledger().record_config_change(home=home, key=key, old=old, new=new, by="tray")
        except Exception:  # boundary: bookkeeping never breaks a change
            log.warning("could not record the change of %s", key, exc_info=True)

    def backend_values(self, home_path: str) -> BackendValues:
        from hermes_tray_core import read_backend_config

        cfg = read_backend_config(home_path)
        ac = cfg.auto_continue
        return BackendValues(
            enabled=bool(ac.enabled),
            freshness_minutes=int(ac.freshness_minutes),
            max_attempts=int(ac.max_attempts),
            error=cfg.error,
            managed=tuple(ac.managed),
            managed_path=str(cfg.managed_path) if cfg.managed_path else None,
        )

    # --- settings -----------------------------------------------------------------------------
    def settings(self) -> TraySettings:
        try:
            return load_settings()
        except SettingsError as exc:
            log.warning("tray settings unusable, using defaults: %s", exc)
            return TraySettings()

    def update_settings(self, changes: dict[str, Any]) -> TraySettings:
        """Write the tray's own settings (menu, settings dialog); record each value that changed."""
        from hermes_tray_core import update_settings

        old = self.settings().to_dict()
        new = update_settings(changes)  # hermes_command=None unsets it
        now = new.to_dict()
        for key in changes:
            self._record_config(None, key, old.get(key), now.get(key))
        return new

    # --- the ledger ---------------------------------------------------------------------------
    def ledger(self) -> Ledger:
        """The ledger ask-once reads and writes (re-resolved: env overrides apply)."""
        return ledger()

    def history(self, limit: int = 500) -> list[dict[str, Any]]:
        """History's rows, newest first (``Ledger.turns``); with homes given (``--home``), only theirs."""
        return ledger().turns(limit, homes=self.explicit_homes)

    def history_files(self) -> list[Path]:
        path = ledger().path
        return [path, path.with_name(path.name + "-wal")]

    def session_titles(self, turns: Sequence[tuple[str, str]], *,
                       prompts: bool = True) -> dict[tuple[str, str], str]:  # blocking
        """Hermes' own titles (``state.db``, read-only) of these ``(home, session key)`` turns — History's
        rows for turns whose marker is gone. A session without a title, one whose title Hermes made of the prompt
        while ``prompts`` are hidden, or a home whose ``state.db`` cannot be read, is simply left out."""
        from hermes_tray_core import HomeState

        by_home: dict[str, list[str]] = {}
        for home, key in turns:
            by_home.setdefault(home, []).append(key)
        out: dict[tuple[str, str], str] = {}
        now = time.time()
        for home, keys in by_home.items():
            with closing(HomeState(Path(home), now)) as state:
                state.prefetch(keys)
                for key in keys:
                    info, _problem = state.session(key)
                    if info and info.title and (prompts or not state.title_from_prompt(key)):
                        out[(home, key)] = safe_text(info.title)
        return out


def run_result(result: ResumeResult) -> RunResult:
    """The controller's view of ``core.continuing.resume``'s result: the outcome as a typed word, the refusal's code."""
    cont = result.continuation
    outcome = Outcome.of(result.outcome)
    return RunResult(
        outcome=outcome,
        message=str(result.message or ""),
        answer=str((cont.answer if cont is not None else "") or ""),
        attempts=cont.attempt if cont is not None else None,
        code=(result.code or "") if outcome is Outcome.REFUSED else "",
        ran_in=str(cont.ran_in or "") if cont is not None and cont.dispatched else "",
        where=str(cont.where or "") if cont is not None and cont.dispatched else "",
        verdict=str(result.verdict or "") if outcome is Outcome.REFUSED else "",
        marker_left=str((cont.marker_left if cont is not None else "") or ""),
    )
