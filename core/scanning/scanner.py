"""All homes → interrupted-turn records the tray, the helper and ``status`` show and act on.

It never raises: a source it cannot read is a *problem* on its :class:`HomeReport` (with what to do about
it), never "nothing interrupted"; newer Hermes storage it does not understand is reported as unsupported.
Incremental: only files whose signature changed are re-read; the WebUI-journal and config.yaml summaries
(never prompt text) persist in ``cache_file``. Liveness is always judged fresh; verdicts come from
:mod:`hermes_tray_core.deciding.policy` only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.continuing.completion import settle_if_finished
from hermes_tray_core.continuing.facts import seen_now
from hermes_tray_core.deciding.policy import AutoContinueConfig, Decision, Facts, judge, marker_age
from hermes_tray_core.deciding.records import HomeReport, ScanResult, TurnRecord, prompt_excerpt
from hermes_tray_core.errors import DEBUG, bookkeeping
from hermes_tray_core.hermes import reach
from hermes_tray_core.hermes.config import sessions_elsewhere
from hermes_tray_core.hermes.homes import Home
from hermes_tray_core.hermes.state_db_batch import HomeState as _HomeState
from hermes_tray_core.keys import InvalidIdError, SessionKey, home_path, session_key
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.scanning.cache import ScanCache, default_cache_file
from hermes_tray_core.scanning.running import RunningNow
from hermes_tray_core.scanning.webui import webui_records
from hermes_tray_core.stores.fsutil import os_error_text
from hermes_tray_core.stores.ledger import NOTHING, UNREADABLE, TurnStatus
from hermes_tray_core.turn import Marker, Turn, TurnId
from hermes_tray_core.vocab import ReasonCode, StopCause, TurnSource, Verdict, WriterState

if TYPE_CHECKING:
    from hermes_tray_core.hermes.config import YamlMap
    from hermes_tray_core.hermes.processes import HermesProcesses
    from hermes_tray_core.hermes.progress import TurnProgress

ELSEWHERE = ("this Hermes keeps its sessions elsewhere ({}), so hermes-tray cannot see or resume its interrupted "
             "turns; continue them in Hermes")

__all__ = ["Scanner", "scan", "default_cache_file", "TurnRecord", "HomeReport", "ScanResult", "prompt_excerpt"]

logger = get_logger(__name__)
# Log levels as numbers, so that naming them does not import logging.
_WARNING, _ERROR = 30, 40

# The managed overlay, read once a scan: (path, mapping, warning, the signature the config cache compares).
_ManagedNow = tuple["Path | None", "YamlMap", "str | None", "list[object] | None"]
# A marker file as last read: (signature, entries or None, status, problem).
_MarkersRead = tuple[list[int], "dict[str, Any] | None", str, "str | None"]


def _sig(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


#: what a missing home's problem adds, by where the home came from
_MISSING_HINT = {"cli": "", "settings": " — remove it from the tray settings' homes "
                 "(hermes-tray config set homes …) or restore it"}


def _unreadable(home: Home, exists: bool, problem: str) -> HomeReport:
    return HomeReport(home.path, home.profile, home.origin, exists, "unreadable", 0, AutoContinueConfig(),
                      "unreadable", home.webui_journal_dir, 0, problems=(problem,), reachable=False)


class Scanner:
    """Incremental scanner over a fixed list of homes. Not thread-safe: one per thread."""

    def __init__(self, homes: Sequence[Home], *, cache_file: Path | None = None,
                 process_finder: Callable[[], HermesProcesses] | None = None, ask_running_hermes: bool = False,
                 read_progress: bool = True, home_timeout: float = reach.TIMEOUT) -> None:
        """``process_finder`` is asked at most once a scan. ``ask_running_hermes``: a session open in the
        running Hermes reads as a live owner, not as waiting for a Resume. ``read_progress``: how far each
        turn got and why it stopped (off for callers that act without showing). ``home_timeout``: for each
        home's first look."""
        self.homes = list(homes)
        self.home_timeout = home_timeout
        self.cache_file = cache_file
        self._cache = ScanCache(cache_file)  # WebUI journal summaries and config.yaml results
        self._markers: dict[str, _MarkersRead] = {}  # path -> (sig, entries, status, problem)  (memory only: prompts)
        self._managed_now: _ManagedNow | None = None  # the managed overlay, read once per scan
        self._process_finder = process_finder
        self._now = RunningNow(process_finder)  # what runs, looked at once per scan
        self._ask_app = ask_running_hermes
        self._read_progress = read_progress
        self._boot_time: tuple[float | None] | None = None  # this computer's boot time, read once per scan
        self._logged: set[tuple[str, str, str]] = set()

    def scan(self, now: float | None = None) -> ScanResult:
        now = time.time() if now is None else now
        self._managed_now = None
        self._now = RunningNow(self._process_finder)
        self._boot_time = None
        reports: list[HomeReport] = []
        turns: list[TurnRecord] = []
        seen_journal_dirs: set[str] = set()
        live_journals: set[str] = set()
        # One bounded look at every home first: a home that cannot be read (or hangs) is that home's problem.
        looks = reach.look([home.path for home in self.homes], timeout=self.home_timeout)
        for home, seen in zip(self.homes, looks, strict=True):
            if seen.access in (reach.Access.UNREADABLE, reach.Access.NO_ANSWER):
                reports.append(_unreadable(home, seen.exists, seen.problem))
                continue
            try:
                report, home_turns = self._scan_home(home, seen, now, seen_journal_dirs, live_journals)
            except Exception:  # boundary: one home never breaks the rest (its path is not touched again)
                logger.exception("%s: scanning this home failed", home.path)
                report = _unreadable(home, seen.exists, f"{home.path}: scanning this home failed unexpectedly "
                                     "(details in the log); please report it")
                home_turns = []
            reports.append(report)
            turns.extend(home_turns)
        self._cache.forget_journals(live_journals, seen_journal_dirs)
        self._cache.save()
        return ScanResult(reports, turns, now)

    def _config(self, home: Home) -> tuple[AutoContinueConfig, list[str]]:
        """Hermes' settings for ``home`` and its coercion warnings, and a config.yaml it cannot read (it then
        uses the defaults)."""
        from hermes_tray_core.hermes.config import read_backend_config

        managed, st = self._managed(), _stat(home.config_file)
        key, sig = str(home.config_file), [_sig(st) if st else None, managed[3]]
        cached = self._cache.config(key, sig)
        if cached is not None:
            return cached
        cfg = read_backend_config(home.path, managed=managed[:3])
        problems = [str(w) for w in cfg.warnings]
        if cfg.error:
            problems.append(f"{cfg.error} — Hermes falls back to the defaults; fix the file")
        self._cache.put_config(key, sig, cfg.auto_continue, problems)
        return cfg.auto_continue, problems

    def _managed(self) -> _ManagedNow:
        """The managed overlay, read once per scan: (path, mapping, warning, signature for the cache)."""
        if self._managed_now is None:
            from hermes_tray_core.hermes.paths import managed_config_file

            path = managed_config_file()
            st = _stat(path) if path is not None else None
            if st is None:
                self._managed_now = (None, {}, None, None)
            else:
                from hermes_tray_core.hermes.config import read_managed

                self._managed_now = (*read_managed(), [str(path), *_sig(st)])
        return self._managed_now

    def _read_markers(self, home: Home) -> tuple[dict[str, Any] | None, str, str | None]:
        """(entries or None, status, problem)."""
        path = home.marker_file
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.lexists(path):
                return None, "unreadable", f"{path} cannot be read (dangling link?)"
            self._markers.pop(str(path), None)
            return {}, "none", None
        except (OSError, ValueError) as exc:  # never "nothing interrupted" for a file that is there but unreadable
            return None, "unreadable", f"{path} cannot be read: {os_error_text(exc)}"
        sig = _sig(st)
        cached = self._markers.get(str(path))
        if cached and cached[0] == sig:
            return cached[1], cached[2], cached[3]
        from hermes_tray_core.markers.store import MarkerCorruptError, MarkerTooLargeError, list_turn_markers

        try:
            entries, status, problem = list_turn_markers(home.path), "ok", None
        except MarkerTooLargeError:
            from hermes_tray_core.markers.file import TOO_LARGE_WORDS

            entries, status = None, "unreadable"
            problem = (f"{path} is {TOO_LARGE_WORDS}; interrupted turns in this home cannot be seen. "
                       "Move it aside to keep it; Hermes then starts a new one")
        except MarkerCorruptError as exc:
            entries, status = None, "corrupt"
            problem = (f"{path} is corrupt: {exc.reason or 'it is not a JSON object'}. Interrupted turns in this "
                       "home cannot be seen. Hermes' next write will replace it; move it aside to keep it")
        except (OSError, ValueError) as exc:  # MarkerStoreError (unreadable), a path refused
            entries, status = None, "unreadable"
            problem = f"{path} cannot be read: {os_error_text(exc)}"
        self._markers[str(path)] = (sig, entries, status, problem)
        return entries, status, problem

    def _unsupported(self, home: Home, state: _HomeState) -> list[str]:
        found = []
        desk = home.path / "desktop"
        if os.path.isdir(desk / "interrupted_turns"):
            found.append(f"per-session marker files under {desk / 'interrupted_turns'}")
        try:
            migrated = [n for n in os.listdir(desk) if n.startswith("interrupted_turns.json.migrated")]
        except OSError:
            migrated = []
        if migrated:
            found.append(f"{desk / migrated[0]} (markers were migrated to newer storage)")
        if state.has_table("interrupted_turns"):
            found.append(f"an interrupted_turns table in {home.state_db}")
        return [f"newer Hermes storage not yet supported: {f}; update hermes-tray" for f in found]

    def _scan_home(self, home: Home, seen: reach.Reach, now: float, seen_dirs: set[str],
                   live_journals: set[str]) -> tuple[HomeReport, list[TurnRecord]]:
        problems: list[str] = []
        exists = seen.ok
        if seen.access is reach.Access.NOT_DIR:
            problems.append(f"{seen.problem}: not a Hermes home")
        elif seen.access is reach.Access.MISSING:
            problems.append(f"{home.path} does not exist"
                            + _MISSING_HINT.get(home.origin, " (Hermes has not run with this home yet)"))
        config, cfg_problems = self._config(home) if exists else (AutoContinueConfig(), [])
        problems.extend(cfg_problems)
        elsewhere = sessions_elsewhere(home.path) if exists else None
        if elsewhere:  # its marker file and state.db are not where its sessions are: neither is read
            report = HomeReport(home.path, home.profile, home.origin, exists, "elsewhere", 0, config, "elsewhere",
                                home.webui_journal_dir, 0, (ELSEWHERE.format(elsewhere),), tuple(problems))
            return report, []
        entries, mstatus, mproblem = self._read_markers(home) if exists else ({}, "none", None)
        if mproblem:
            problems.append(mproblem)
        made, unsafe = self._turns(home, entries) if entries else ([], [])
        if entries is not None:
            from hermes_tray_core.continuing.orphans import settle_orphaned_runs

            # a run of ours whose process is gone: its end, from Hermes' facts
            settle_orphaned_runs(home.path, entries)
        turns: list[TurnRecord] = []
        state = _HomeState(home.path, now) if exists else None
        try:
            unsupported = self._unsupported(home, state) if state else []
            if made:
                turns.extend(self._marker_records(home, made, config, state, now, problems))
            turns.extend(self._unsafe_record(home, key, entry, now) for key, entry in unsafe)
            db_status = state.status if state else "missing"
            if state and state.status == "unreadable" and state.problem:
                problems.append(f"{state.problem}: titles and Hermes' turn leases cannot be checked")
            elif state and state.status == "missing" and entries:
                problems.append(f"{state.problem}: session titles unavailable; without a state.db no Hermes turn "
                                "lease is held, so these turns are judged by their writers — is this really a "
                                "Hermes home?")
        finally:
            if state:
                state.close()
        jdir = home.webui_journal_dir
        nsessions = 0
        key = str(jdir)
        if key not in seen_dirs:
            seen_dirs.add(key)
            nsessions, webui_turns = webui_records(home, now, problems, live_journals, self._cache, self._now,
                                                   self._log_once)
            turns.extend(webui_turns)
        turns.sort(key=lambda t: -t.started_at)
        report = HomeReport(home.path, home.profile, home.origin, exists, mstatus,
                            len(entries or {}), config, db_status, jdir, nsessions,
                            tuple(unsupported), tuple(problems))
        return report, turns

    def _turns(self, home: Home, entries: dict[str, Any]) -> tuple[list[Turn], list[tuple[str, Any]]]:
        """The door: a :class:`Turn` per entry whose key is one Hermes writes; the others apart."""
        where = home_path(home.path)
        turns: list[Turn] = []
        unsafe: list[tuple[str, Any]] = []
        for key, entry in entries.items():
            try:
                turns.append(Turn(where, session_key(key), Marker.read(entry)))
            except InvalidIdError as exc:
                self._log_once(home, str(key)[:80], f"unsafe session key: {exc}")
                unsafe.append((str(key), entry))
        return turns, unsafe

    def _unsafe_record(self, home: Home, key: str, entry: Any, now: float) -> TurnRecord:
        """A marker under a key no Hermes session has: listed so the user sees it, ``not-ours`` (nothing can
        safely name it in a claim, a journal or an argv); its turn carries the key unchecked, for display
        only."""
        marker = Marker.read(entry)
        return TurnRecord(
            home=home.path, profile=home.profile, turn=Turn(home_path(home.path), SessionKey(key), marker),
            title=None, prompt_excerpt=prompt_excerpt(marker.excerpt_source),
            age_seconds=marker_age(marker, now), writer=WriterState.UNKNOWN, verdict=Verdict.NOT_OURS,
            reason="its session key is not one Hermes writes: it is left alone", source=TurnSource.DESKTOP,
            code=ReasonCode.MALFORMED_ENTRY)

    def _marker_records(self, home: Home, turns: list[Turn], config: AutoContinueConfig, state: _HomeState | None,
                        now: float, problems: list[str]) -> list[TurnRecord]:
        out = []
        title_problem = None
        if state:
            since: dict[str, float] | None = {t.key: t.marker.started for t in turns if t.marker.started is not None} \
                if self._read_progress else None
            state.prefetch([t.key for t in turns], since)
        from hermes_tray_core.stores.ledger import ledger

        known: dict[TurnId, TurnStatus] = {}
        with bookkeeping(logger, "cannot read the ledger for %s", home.path, level=DEBUG) as kept:
            known = ledger().statuses(t.ident for t in turns if t.marker.is_entry)
        if kept.error is not None:
            self._log_once(home, "", f"cannot read the tray's ledger ({type(kept.error).__name__})")
        unknown = UNREADABLE if kept.error is not None else NOTHING
        for turn in turns:
            try:
                record, tp = self._marker_record(home, turn, config, state, now, known.get(turn.ident, unknown))
            except Exception as exc:  # boundary: one hostile entry never hides its siblings
                self._log_once(home, turn.key, f"cannot judge this marker ({type(exc).__name__}: {exc})",
                               level=_ERROR)
                problems.append(f"marker {turn.key[:80]!r} cannot be judged; it is left alone — please report it "
                                "(details in the log)")
                continue
            title_problem = title_problem or tp
            if record.verdict in (Verdict.SKIPPED, Verdict.STOPPED, Verdict.FINISHED):
                from hermes_tray_core.continuing.claim import remove_settled

                remove_settled(turn)  # a stale write brought it back, or the home could not be written
                if record.verdict == Verdict.FINISHED:
                    continue  # never listed: Hermes' own session.resume would continue it a second time
            if record.code == ReasonCode.MALFORMED_ENTRY:
                self._log_once(home, record.session_key, record.reason)
            out.append(record)
        if title_problem and (not state or state.status == "ok"):
            problems.append(f"{title_problem}: session titles unavailable")
        return out

    def _marker_record(self, home: Home, turn: Turn, config: AutoContinueConfig, state: _HomeState | None,
                       now: float, known: TurnStatus) -> tuple[TurnRecord, str | None]:
        key, marker = turn.key, turn.marker
        info, tp = state.session(key) if state else (None, None)
        seen = seen_now(turn, info.source if info else None, info.conversation_generation if info else None,
                        ask_writer=lambda: self._now.writer_turn(home, turn),
                        lease=lambda: state.lease(key)[:2] if state else ("unknown", "no state.db"),
                        owner=lambda: self._now.owner(home, key), backend=lambda: self._now.backend(home))
        settled = settle_if_finished(turn)  # a continuation of ours, as state.db shows it
        decision: Decision = judge(marker, Facts(config, now, seen, known, settled.state if settled else None,
                                                 settled.reason if settled else ""))
        if self._ask_app and decision.verdict in (Verdict.DISABLED, Verdict.STALE, Verdict.EXHAUSTED,
                                                  Verdict.ACTIONABLE):
            pid = self._now.open_sessions(home).get(key)
            if pid is not None:  # open in the Hermes app: a live owner, as Hermes' registry would say
                detail = "; ".join(d for d in (seen.activity_detail, f"open in your running Hermes, pid {pid}") if d)
                decision = judge(marker, Facts(config, now, seen._replace(
                    owner="alive", activity_detail=detail, writer_turn="unknown", writer_turn_detail=""), known))
        holder = self._now.holder(home) if decision.code == ReasonCode.BACKEND_LIVE else None
        progress, cause, fact, stopped = (self._facts(home, turn, decision.verdict, seen.writer, state, now, known)
                                          if self._read_progress and marker.is_entry
                                          else (None, None, "", marker.interrupted_at))
        record = TurnRecord(
            home=home.path, profile=home.profile, turn=turn, title=info.title if info else None,
            prompt_excerpt=prompt_excerpt(marker.excerpt_source),
            age_seconds=decision.age_seconds, writer=seen.writer, verdict=decision.verdict, reason=decision.reason,
            source=TurnSource.DESKTOP, unsure=decision.unsure, code=decision.code, holder=holder,
            progress=progress, cause=cause, cause_fact=fact,
            title_from_prompt=bool(info and info.title and state and state.title_from_prompt(key)),
            interrupted_at=stopped,
        )
        return record, tp

    def _facts(self, home: Home, turn: Turn, verdict: Verdict, writer: WriterState, state: _HomeState | None,
               now: float, known: TurnStatus) -> tuple[TurnProgress | None, StopCause | None, str, float | None]:
        """``(progress, cause, fact, when)``: how far the turn got and, once it no longer runs, why and when
        it stopped (only from a fact)."""
        progress = state.progress(turn.key) if state else None
        if verdict == Verdict.RUNNING or writer == WriterState.ALIVE:
            return progress, None, "", None
        from hermes_tray_core.deciding.causes import stop_cause, stopped_at

        if self._boot_time is None:
            from hermes_tray_core.process.machine import boot_time

            self._boot_time = (boot_time(),)
        cause, fact = stop_cause(turn.marker, now=now, boot_time=self._boot_time[0], witnessed=known.witnessed,
                                 crashed=known.crashed)
        return progress, cause, fact, stopped_at(turn.marker, witnessed=known.witnessed, crashed=known.crashed)

    def _log_once(self, home: Home, key: str, what: str, level: int = _WARNING) -> None:
        """Once per scanner (the tray re-scans often): identity only."""
        tag = (str(home.path), key, what)
        if tag in self._logged:
            return
        if len(self._logged) > 10_000:
            self._logged.clear()
        self._logged.add(tag)
        logger.log(level, "%s: session %r: %s", home.path, key[:80], what)

def scan(homes: Sequence[Home], *, cache_file: Path | None = None, now: float | None = None) -> ScanResult:
    """One-shot scan (the CLI passes :func:`default_cache_file` for warm re-runs)."""
    return Scanner(homes, cache_file=cache_file).scan(now)
