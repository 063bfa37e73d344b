"""The coordinator between the engine and the views (tray, window, notifications, helper).

It turns scan reports into a :class:`ViewState`, decides what to *ask* (never what a turn's
verdict is — that is ``core.deciding.policy``), and carries out what the user chose through the engine:

* ask at most once per interrupted turn (the decision journal remembers across restarts);
* ``ask`` notifies and waits, ``auto`` resumes at once and notifies after, ``off`` only lists;
* a skipped turn that reappears (a non-locking writer resurrected it) is skipped again silently;
* continuations run on worker threads; their progress and outcome come back as signals.

Views never call the engine; the engine never sees Qt widgets.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from hermes_tray import words
from hermes_tray.autostart.base import AutoStart
from hermes_tray.contract import ROUTINE_REFUSALS, BackendValues, Engine, Outcome, RunResult, SkipReply
from hermes_tray.format import first_line, short_path
from hermes_tray.model.settings import SettingsSnapshot
from hermes_tray.model.viewstate import (
    RecentItem,
    RunningItem,
    TurnItem,
    ViewState,
    recent_items,
    turn_item,
    view_problems,
)
from hermes_tray.notify.base import Action, Note, Notifier
from hermes_tray.notify.coalesce import InterruptionNotices, turn_identity, turn_names
from hermes_tray.watch.detector import ScanReport
from hermes_tray_core import (
    AskOnce,
    Progress,
    StopReason,
    StopRequest,
    TraySettings,
    TurnRecord,
    ident,
    turn_key,
    waiting,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
FAILURE_VERDICT_MS = 3000  # a failed continuation is said after the next scan, or this long after
#: a turn whose marker vanished keeps its notification this long: a writer rewriting the file continuously makes
#: a marker flicker (gone in one scan, back in the next), and withdrawing and showing again is a notification each
VANISHED_GRACE = 5.0


def stop_budget() -> float:
    """How long stopping a continuation may take at worst, by ``core.continuing.gateway``'s own timeouts:
    the interrupt's grace, then close stdin → wait, terminate → wait, kill → wait (10 s), plus
    the reader join and a margin."""
    try:
        from hermes_tray_core import GatewayOptions

        o = GatewayOptions()
        return float(o.stop_grace) + 2 * float(o.shutdown_grace) + 10.0 + 2.0 + 3.0
    except Exception:
        return 40.0


_RUN_ORDER = itertools.count()  # continuations are listed in the order they started


@dataclass
class _Run:
    key: str
    title: str
    started: float
    stop: StopRequest
    status: str = "starting…"
    wall_started: float = field(default_factory=time.time)
    thread: threading.Thread | None = None
    record: TurnRecord | None = None
    origin: str = "menu"
    order: int = field(default_factory=lambda: next(_RUN_ORDER))


@dataclass
class _Answer:
    title: str
    text: str


class Phase(Enum):
    """What this process is doing about one turn. The scan says what Hermes has; the phase says what the
    tray does with it. A turn that is only listed is ``IDLE``."""

    IDLE = "idle"
    WAITING = "waiting"  # the last scan found it waiting for an answer
    SKIPPING = "skipping"  # a skip is on the write worker
    RUNNING = "running"  # a continuation of ours runs (``_Turn.run``)


@dataclass
class _Failure:
    """A continuation that failed. What to say waits for the scan after it: only then is it known whether
    Hermes' retry budget is used up ("gave up", one note, not two)."""

    note_key: str
    title: str
    result: RunResult
    run: _Run | None
    order: int  # failures are said in the order they happened


@dataclass
class _Turn:
    """Everything this process holds about one turn (:attr:`Controller._turns`, by turn key)."""

    phase: Phase = Phase.IDLE
    run: _Run | None = None  # while RUNNING
    failure: _Failure | None = None  # not said yet; the turn may be WAITING, or RUNNING again, meanwhile
    continued: bool = False  # this process continued it: if Hermes gives up on it, this process says so, once

    @property
    def empty(self) -> bool:
        return self.phase is Phase.IDLE and self.failure is None and not self.continued


def _end_descendants(*, since: float, grace: float = 2.0) -> None:
    """Kill this process's descendants created at ``since`` or later (a Hermes gateway a continuation started).

    SIGKILL, not SIGTERM: Hermes ends a running turn as interrupted and clears its marker on SIGTERM (the turn would
    be lost); killed, it leaves the marker, and the turn is offered again (``core.continuing.runstate``'s detach)."""
    import psutil

    try:
        procs = [p for p in psutil.Process().children(recursive=True) if p.create_time() >= since]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=grace)
    for p in procs:
        log.warning("ended process %s left by a continuation", p.pid)


def gave_up_text(label: str, rec: TurnRecord, *, in_app: bool = True) -> str:
    """The body of "Hermes gave up on a turn": after how many tries (the user's and automatic ones alike
    count against Hermes' budget), and what is left to do."""
    n = rec.attempts if isinstance(rec.attempts, int) and not isinstance(rec.attempts, bool) else 0
    e = words.ending(Outcome.GAVE_UP, attempts=n or None, in_app=in_app)
    return f"{label}\n{e.what}. {e.why} {e.can_do}".rstrip()


def _body(label: str, e: words.Ending) -> str:
    """A notification's body: the turn, then what happened and what is left to do, one fact a sentence."""
    what = "" if e.what in ("Not resumed", "Stopped") else f"{e.what}."
    return "\n".join(x for x in (label, " ".join(y for y in (what, e.why, e.can_do) if y)) if x)


def _split_key(key: str) -> tuple[str, str]:
    """(home, session key) of a :func:`turn_key`."""
    home, _, session = key.partition("\x1f")
    return home, session


def _frame_text(frame: str) -> str:
    """What the last gateway frame means to a person watching the progress line."""
    if frame.startswith("tool"):
        return "using tools"
    return {
        "status.update": "resuming",
        "message.start": "answering",
        "message.delta": "writing the answer",
        "thinking.delta": "thinking",
        "reasoning.delta": "thinking",
        "message.complete": "finishing",
    }.get(frame, "working")


class Controller(QObject):
    state_changed = Signal(object)  # ViewState
    present_window = Signal(bool)  # activate (take focus)?
    answer_ready = Signal(str, str)  # title, answer text → prompt window
    rescan_requested = Signal(str)
    message = Signal(str)  # a one-line status for the user (errors of actions)
    scan_seen = Signal(object)  # ScanReport, after processing (helper --print-events, tests)
    skip_done = Signal(str, bool)  # turn key, skipped? (after the write worker ran it)
    applied = Signal(list)  # problems of a settings write (empty: all went through)
    _progress = Signal(str, object)
    _finished = Signal(str, object)
    _written = Signal(object)  # (then, value): a write worker result, handed to the GUI thread

    def __init__(
        self,
        engine: Engine,
        notifier: Notifier,
        *,
        autostart: AutoStart | None = None,
        quiet: Callable[[], bool] = lambda: False,
        role: str = "tray",
        demo: bool = False,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.demo = demo  # the demo's simulated Hermes has no app: no "finish it in Hermes" there
        self.engine = engine
        self.notifier = notifier
        self.autostart = autostart
        self.quiet = quiet  # True: another process (the tray) does the asking; the helper stays silent
        self.role = role
        self._settings: TraySettings = engine.settings()
        # the helper has no window: its notes carry no "Show"/"Open" button that would do nothing
        self.can_show = role != "helper"
        self.notes = InterruptionNotices(notifier, show_prompts=lambda: bool(self._settings.show_prompts),
                                         can_open=self.can_show, name=self._label)
        self._recent: list[RecentItem] = []  # how this process's continuations ended (newest last)
        self.ask = AskOnce(engine.journal)
        self._records: dict[str, TurnRecord] = {}  # the last scan's turns, by turn key, in its order
        self._names: dict[str, str] = {}  # what tells each of them apart from the others (``turn_names``)
        self._named: tuple[dict[str, TurnRecord] | None, bool] = (None, False)  # the records, show_prompts named
        self._turns: dict[str, _Turn] = {}  # what this process does about each turn (none: IDLE)
        self._answers: dict[str, _Answer] = {}
        self._outcomes = 0
        self._report = ScanReport()
        self._state = ViewState()
        # Every blocking write (skip, config, settings, autostart, journal) runs here, in order, off
        # the GUI thread: a locked state.db or lease store (10 s busy timeout) never freezes the UI.
        self._writer = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tray-write")
        self._writes = 0  # submitted and not handed back yet
        self._quitting = threading.Event()  # set by shutdown: bookkeeping not started yet is dropped
        # the rows of the last publish, by turn key: a record that did not change is not re-worded (a storm of
        # 10,000 turns made every publish cost 0.4 s of the GUI thread)
        self._items: dict[str, tuple[TurnRecord, bool, float, TurnItem]] = {}
        notifier.activated.connect(self.on_note_activated)
        notifier.delivered.connect(self._on_delivered)
        self._progress.connect(self._on_progress)
        self._finished.connect(self._on_finished)
        self._written.connect(self._on_written)
        self._ticker = QTimer(self)
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._publish)
        # turns that left the list, by turn key: since when, and which interruption the note showed
        self._vanished: dict[str, tuple[float, tuple[Any, ...]]] = {}
        self._vanish_check = False  # a look at them is due (one pending timer at a time)

    # --- reading ------------------------------------------------------------------------------
    @property
    def settings(self) -> TraySettings:
        return self._settings

    @property
    def state(self) -> ViewState:
        return self._state

    @property
    def busy_writing(self) -> bool:
        """A write handed to the worker has not come back yet."""
        return self._writes > 0

    def record_for(self, key: str) -> TurnRecord | None:
        return self._records.get(key)

    # --- each turn's phase --------------------------------------------------------------------
    def phase(self, key: str) -> Phase:
        turn = self._turns.get(key)
        return Phase.IDLE if turn is None else turn.phase

    def _turn(self, key: str) -> _Turn:
        return self._turns.setdefault(key, _Turn())

    def _set_phase(self, key: str, phase: Phase, run: _Run | None = None) -> None:
        turn = self._turn(key)
        turn.phase, turn.run = phase, run
        self._tidy(key)

    def _tidy(self, key: str) -> None:
        turn = self._turns.get(key)
        if turn is not None and turn.empty:
            del self._turns[key]

    def _run_of(self, key: str) -> _Run | None:
        turn = self._turns.get(key)
        return turn.run if turn is not None and turn.phase is Phase.RUNNING else None

    def _runs(self) -> list[_Run]:
        """The continuations running now, in the order they started."""
        runs = [t.run for t in self._turns.values() if t.phase is Phase.RUNNING and t.run is not None]
        return sorted(runs, key=lambda r: r.order)

    def _waiting_keys(self) -> list[str]:
        """The turns waiting for an answer, in the scan's order."""
        return [k for k in self._records if self.phase(k) is Phase.WAITING]

    def _scan_says_waiting(self, key: str) -> bool:
        rec = self._records.get(key)
        return rec is not None and key in waiting([rec])

    def _forget_continued(self, key: str) -> None:
        turn = self._turns.get(key)
        if turn is not None:
            turn.continued = False
            self._tidy(key)

    def on_scan(self, report: ScanReport) -> None:
        """A fresh scan: update the lists, ask about turns that are new, act in auto mode."""
        self._report = report
        records: list[TurnRecord] = list(report.records)
        previous = self._records
        self._records = {turn_key(r.home, r.session_key): r for r in records}
        self._rename()
        pending = waiting(records, running=[r.key for r in self._runs()])
        for key, turn in list(self._turns.items()):
            if turn.phase is Phase.WAITING and key not in pending:
                self._set_phase(key, Phase.IDLE)
        for key in pending:
            if self.phase(key) is Phase.IDLE:
                self._set_phase(key, Phase.WAITING)
        review = self.ask.review(pending, self._settings.mode)
        if review.replaced:
            # a new interruption of the same session replaced the one a notification shows: withdraw
            # that notification (its buttons would act on a turn it never showed); the new one is asked
            self.notes.resolved({_split_key(k) for k in review.replaced})
        self._note_vanished(review.gone, pending, previous)  # before asking: a new interruption is asked below
        if self._settings.notify and (pending or any(r.writer == "alive" for r in records)):
            self.notifier.prepare()  # a turn is running (or waiting): be ready to speak at once
        for key, rec in review.reskip:
            self._skip_again(key, rec)
        for key in review.resume:
            QTimer.singleShot(0, lambda k=key: self.resume(k, origin="auto"))
        ask = list(review.ask)
        if ask and self._settings.notify and not self.quiet():
            # still waiting after our continuation failed: ONE note, the ask itself, saying why
            for rec in list(ask):
                failure = self._take_failure(turn_key(rec.home, rec.session_key))
                if failure is None:
                    continue
                ask.remove(rec)
                try:
                    e = self._ending(failure.result, stopped=False)
                    self.notes.announce([rec], title=e.title or words.FAILED_AGAIN_TITLE, lead=e.why)
                except Exception:
                    log.exception("could not announce a failed continuation")
                    self.ask.not_announced([rec])
            try:
                if ask:
                    self.notes.announce(ask)  # journalled as "notified" once delivered (_on_delivered)
            except Exception:  # never "seen" without having been asked: the next scan asks again
                log.exception("could not announce %d interrupted turn(s)", len(ask))
                self.ask.not_announced(ask)
        failed = sorted((t.failure.order, k) for k, t in self._turns.items()
                        if t.failure is not None and t.phase is not Phase.RUNNING)
        for _order, key in failed:
            self._say_failure(key, self._records.get(key))
        for key, rec in self._records.items():
            held = self._turns.get(key)
            if held is not None and held.continued and rec.verdict == "exhausted" and held.phase is not Phase.RUNNING:
                self._gave_up(rec)  # says it once: the turn is no longer marked as continued here
        self._publish()
        self.scan_seen.emit(report)

    def _note_vanished(self, gone: set[str], pending: dict[str, TurnRecord], previous: dict[str, TurnRecord]) -> None:
        """Turns settled elsewhere (another process, Hermes) leave the list: their notes are withdrawn once they
        stayed away :data:`VANISHED_GRACE` seconds. One that comes back as the same interruption was only
        flickering (its note stays as it was); as a new one, the note that showed the old one goes at once."""
        now = time.monotonic()
        for key in gone:
            rec = previous.get(key)
            if rec is not None:
                self._vanished.setdefault(key, (now, ident(rec)))
        for key in [k for k in self._vanished if k in pending]:
            _since, was = self._vanished.pop(key)
            if ident(pending[key]) != was:
                self.notes.resolved({_split_key(key)})
        self._withdraw_vanished()

    def _withdraw_vanished(self, *, timer: bool = False) -> None:
        if timer:
            self._vanish_check = False
        now = time.monotonic()
        due = {k for k, (since, _was) in self._vanished.items() if now - since >= VANISHED_GRACE}
        for key in due:
            del self._vanished[key]
        if due:
            self.notes.resolved({_split_key(k) for k in due})
        if self._vanished and not self._vanish_check:
            self._vanish_check = True
            first = min(since for since, _was in self._vanished.values())
            QTimer.singleShot(max(0, int((first + VANISHED_GRACE - now) * 1000) + 10),
                              lambda: self._withdraw_vanished(timer=True))

    def _publish(self) -> None:
        show = bool(self._settings.show_prompts)
        self._rename()
        scanned = self._report.finished or time.time()  # the records' ages are as of their scan
        items = {k: self._item(k, r, show, scanned) for k, r in self._records.items()}
        self._items = {k: (self._records[k], show, scanned, i) for k, i in items.items()}
        pending = tuple(items[k] for k in self._waiting_keys())
        others = tuple(i for k, i in items.items() if self.phase(k) is Phase.IDLE)
        running = tuple(
            RunningItem(r.key, r.title, time.monotonic() - r.started, r.status, at=time.monotonic())
            for r in self._runs()
        )
        extra = self._report.extra
        state = ViewState(
            pending=pending,
            others=others,
            running=running,
            backend_enabled=extra.backend_enabled,
            mode=self._settings.mode,
            autostart=self._autostart_state(),
            show_prompts=show,
            problems=view_problems(self._report.problems, extra.problem_details, homes_found=extra.homes_found),
            homes_found=extra.homes_found,
            watching=extra.watching,
            recent=recent_items(others, self._recent, in_app=not self.demo),
            in_app=not self.demo,
            demo=self.demo,
        )
        if running and not self._ticker.isActive():
            self._ticker.start()
        elif not running:
            self._ticker.stop()
        self._state = state
        self.state_changed.emit(state)

    def _rename(self) -> None:
        """Name the listed turns so that no two read alike (once per scan and show_prompts setting)."""
        show = bool(self._settings.show_prompts)
        if self._named[0] is not self._records or self._named[1] != show:
            self._named = (self._records, show)
            self._names = dict(zip(self._records, turn_names(list(self._records.values()), show_prompts=show),
                                   strict=True))

    def _label(self, rec: TurnRecord) -> str:
        """What the user calls this turn: the name it is listed under."""
        return self._names.get(turn_key(rec.home, rec.session_key)) or turn_names(
            [rec], show_prompts=bool(self._settings.show_prompts))[0]

    def _item(self, key: str, rec: TurnRecord, show: bool, scanned: float) -> TurnItem:
        """The row of ``rec``, reused from the last publish when nothing it says has changed."""
        last = self._items.get(key)
        name = self._names.get(key, "")
        if last is not None and last[0] is rec and last[1] == show and last[2] == scanned and last[3].title == name:
            return last[3]
        return turn_item(rec, show_prompts=show, now=scanned, name=name)

    def _autostart_state(self) -> bool | None:
        if self.autostart is None:
            return None
        try:
            return bool(self.autostart.is_enabled())
        except Exception:
            return None

    # --- the write worker ---------------------------------------------------------------------
    def _off_thread(self, work: Callable[[], T], then: Callable[[T], object], *, bookkeeping: bool = False) -> None:
        """Run ``work`` on the write worker; ``then(result)`` runs on the GUI thread afterwards.
        ``work`` must not raise (each caller turns exceptions into a result the user can read).
        ``bookkeeping``: a write nobody asked for (a journal note, a silent re-skip): dropped rather than
        started once the tray is quitting, so a stop request never waits for a storm's backlog."""
        self._writes += 1

        def run() -> None:
            if bookkeeping and self._quitting.is_set():
                log.info("quitting: a bookkeeping write was not started")
                self._written.emit((None, None))
                return
            try:
                value: Any = work()
            except Exception:  # a caller bug: logged; ``then`` is not called with a half result
                log.exception("background write failed")
                self._written.emit((None, None))
                return
            self._written.emit((then, value))

        try:
            self._writer.submit(run)
        except RuntimeError:  # quitting: the worker is shut down; nothing new is written
            self._writes -= 1
            log.info("not written: the tray is quitting")

    def _on_written(self, payload: tuple[Callable[[Any], object] | None, Any]) -> None:
        self._writes -= 1
        then, value = payload
        if then is not None:
            then(value)

    def _engine_skip(self, rec: TurnRecord, origin: str) -> SkipReply:
        try:
            return self.engine.skip(rec, origin=origin)
        except Exception as exc:
            log.exception("engine call skip failed")
            return SkipReply(False, words.error_text(exc))

    def _skip_again(self, key: str, rec: TurnRecord) -> None:
        """A skipped turn reappeared (a non-locking writer resurrected it): skip it again, silently."""
        self._set_phase(key, Phase.SKIPPING)

        def then(reply: SkipReply) -> None:
            self._skip_returned(key, reply)
            log.info("skipped turn reappeared, removed again: %s (%s)", turn_identity(rec), reply.message or "ok")
            self._publish()

        self._off_thread(lambda: self._engine_skip(rec, "re-skip"), then, bookkeeping=True)

    def _skip_returned(self, key: str, reply: SkipReply) -> None:
        """A skip came back from the write worker: the turn is settled, or waits again if the scan says so."""
        if self.phase(key) is not Phase.SKIPPING:
            return
        waits = not reply.ok and self._scan_says_waiting(key)
        self._set_phase(key, Phase.WAITING if waits else Phase.IDLE)

    # --- acting -------------------------------------------------------------------------------
    def resume(self, key: str, *, origin: str = "menu", record: TurnRecord | None = None) -> bool:
        """Start a continuation on a worker thread; False if there is nothing to resume.

        ``record``: the turn as the user saw it (a notification); the engine compares the marker
        against *its* entry. Default: the turn as last scanned.
        """
        rec = record if record is not None else self._records.get(key)
        if rec is None or self.phase(key) in (Phase.RUNNING, Phase.SKIPPING):
            return False
        run = _Run(key, self._label(rec), time.monotonic(), StopRequest(), record=rec, origin=origin)
        self._set_phase(key, Phase.RUNNING, run)
        self._turn(key).continued = True
        self.notes.resolved({(str(rec.home), rec.session_key)})

        def work() -> None:
            try:
                out = self.engine.resume(
                    rec, origin=origin, on_progress=lambda p: self._progress.emit(key, p), stop=run.stop
                )
            except Exception as exc:  # the engine's bug must not kill the tray
                log.exception("resume failed")
                out = RunResult(Outcome.ERROR, f"Could not resume: {words.error_text(exc)}")
            self._finished.emit(key, out)

        run.thread = threading.Thread(target=work, name=f"resume-{rec.session_key}", daemon=True)
        run.thread.start()
        self._publish()
        return True

    def resume_all(self, keys: Iterable[str] | None = None, *, origin: str = "menu") -> int:
        return sum(self.resume(k, origin=origin) for k in list(keys if keys is not None else self._waiting_keys()))

    def skip(self, key: str, *, origin: str = "menu", record: TurnRecord | None = None) -> bool:
        """Skip on the write worker; False if there is nothing to skip. The turn leaves the lists at
        once; :attr:`skip_done` (and a rescan) follow, and a refusal comes back with its reason."""
        rec = record if record is not None else self._records.get(key)
        if rec is None or self.phase(key) in (Phase.SKIPPING, Phase.RUNNING):
            return False
        self._set_phase(key, Phase.SKIPPING)
        self._publish()

        def then(reply: SkipReply) -> None:
            self._skip_returned(key, reply)
            if reply.ok:
                self.notes.resolved({(str(rec.home), rec.session_key)})
                held = words.held("skipped")
                self._add_recent(RecentItem(key, self._label(rec), held.what, held.why, "", time.time(),
                                            str(rec.home), session_key=rec.session_key))
            else:
                self.message.emit(reply.message or "Could not skip this turn.")
            self._publish()
            self.skip_done.emit(key, reply.ok)
            self.rescan_requested.emit("skip")

        self._off_thread(lambda: self._engine_skip(rec, origin), then)
        return True

    def skip_all(self, keys: Iterable[str] | None = None, *, origin: str = "menu") -> int:
        return sum(self.skip(k, origin=origin) for k in list(keys if keys is not None else self._waiting_keys()))

    def stop(self, key: str) -> None:
        run = self._run_of(key)
        if run is not None:
            run.stop.set()
            run.status = "stopping…"
            self._publish()

    def _write_backend(self, homes: Sequence[str], changes: dict[str, Any]) -> list[str]:
        try:
            return self.engine.set_backend(homes, **changes)
        except Exception as exc:
            log.exception("engine call set_backend failed")
            return [words.error_text(exc)]

    def set_backend_enabled(self, enabled: bool, home_paths: Sequence[str] | None = None) -> None:
        """Turn Hermes' auto-continue on or off (on the write worker; problems come as messages)."""
        if home_paths is not None:
            homes = list(home_paths)
        else:  # every watched home that exists (the default root may not, before Hermes first runs)
            homes = [str(h.path) for h in self._report.homes if os.path.isdir(h.path)]

        def then(problems: list[str]) -> None:
            for p in problems:
                self.message.emit(p)
            self.rescan_requested.emit("backend-config")

        self._off_thread(lambda: self._write_backend(homes, {"enabled": enabled}), then)

    def disable_for(self, key: str) -> None:
        rec = self._records.get(key)
        if rec is not None:
            self.set_backend_enabled(False, [str(rec.home)])

    def set_mode(self, mode: str) -> None:
        self.apply_tray_settings({"mode": mode})

    def _write_settings(self, changes: dict[str, Any]) -> TraySettings | str:
        try:
            return self.engine.update_settings(changes)
        except Exception as exc:
            return str(exc)

    def _settings_written(self, result: TraySettings | str) -> str | None:
        if isinstance(result, str):
            self.message.emit(result)
            return result
        self._settings = result
        self._publish()
        return None

    def apply_tray_settings(self, changes: dict[str, Any]) -> None:
        """Write the tray's own settings on the write worker; the new values apply when it is done."""
        self._off_thread(lambda: self._write_settings(changes), self._settings_written)

    def _write_autostart(self, enabled: bool) -> str | None:
        if self.autostart is None:
            return "Start at login is not available here"
        try:
            self.autostart.set_enabled(enabled)
        except Exception as exc:
            return str(exc)
        return None

    def _autostart_written(self, err: str | None) -> None:
        if err:
            self.message.emit(err)
        self._publish()

    def set_autostart(self, enabled: bool) -> None:
        self._off_thread(lambda: self._write_autostart(enabled), self._autostart_written)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait (blocking) until every write handed to the worker is done; True if none is left.
        For quitting and for tools without an event loop; results still arrive as signals."""
        done = self._writer.submit(lambda: None)
        try:
            done.result(timeout)
        except futures.TimeoutError:
            return False
        return True

    def shutdown(self, wait: float | None = None) -> None:
        """Finish queued writes, let go of running continuations and wait.

        Quitting (Quit, logout, SIGTERM, SIGHUP, an update) is never the user's Stop: each continuation is left as
        it would be without the tray (:class:`~hermes_tray_core.StopReason` ``SHUTDOWN``). In the user's running
        Hermes it goes on and the next start reads how it ended from Hermes; a separate Hermes process the tray
        started is killed, its turn left interrupted and offered again. Nothing is journalled as stopped by you.
        The wait is what the engine itself may need (:func:`stop_budget`); a run still going after that has its
        processes (this process's descendants started since it began) killed: quitting never leaves a Hermes child
        behind.
        """
        runs = self._runs()
        for run in runs:
            run.stop.request(StopReason.SHUTDOWN)
        self._quitting.set()
        self._writer.shutdown(wait=True)  # a skip or settings save the user asked for is finished, not torn
        if not runs:
            return
        wait = stop_budget() if wait is None else wait
        log.info("stopping %d continuation(s) before quitting (at most %.0f s)", len(runs), wait)
        deadline = time.monotonic() + wait
        for run in runs:
            if run.thread is not None:
                run.thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [r for r in runs if r.thread is not None and r.thread.is_alive()]
        if stuck:
            log.warning("%d continuation(s) did not stop in %.0f s: ending their processes", len(stuck), wait)
            _end_descendants(since=min(r.wall_started for r in stuck) - 1.0)
            for run in stuck:
                if run.thread is not None:
                    run.thread.join(2.0)

    # --- notification answers -----------------------------------------------------------------
    def on_note_activated(self, note_key: str, action: str) -> None:
        if note_key.startswith("outcome-"):
            answer = self._answers.get(note_key)
            if answer is not None and answer.text:
                self.answer_ready.emit(answer.title, answer.text)
            self.present_window.emit(True)
            return
        turns: list[TurnRecord] = self.notes.turns_for(note_key)
        if action in ("default", "open"):
            self.present_window.emit(True)
            return
        self.notes.answered(note_key)
        if action in ("resume", "resume-all", "skip", "skip-all"):
            # act on the turns the note showed, and only while each is still that turn: a newer
            # interruption of the same session is a different question, never answered by this button
            if not turns:  # withdrawn already (its turn was settled or replaced): a late press
                log.info("answer to a withdrawn notification %s ignored", note_key)
                self.message.emit(words.OUT_OF_DATE)
                return
            changed = []
            for t in turns:
                key = turn_key(t.home, t.session_key)
                current = self._records.get(key)
                if current is None or ident(current) != ident(t):
                    changed.append(t)
                elif action.startswith("resume"):
                    self.resume(key, origin="notification", record=t)
                else:
                    self.skip(key, origin="notification", record=t)
            if changed:
                log.info("notification answered for turns that changed since: %s",
                         ", ".join(turn_identity(t) for t in changed))
                names = ", ".join(self._label(t) for t in changed[:3])
                self.message.emit(f"{names} {words.CHANGED_SINCE}")
        elif action == "disable":
            homes = sorted({str(t.home) for t in turns})
            self.set_backend_enabled(False, homes)

    def _on_delivered(self, note: Note, ok: bool) -> None:
        """A turn note reached the user (journal: asked, never again) or went nowhere (ask again).

        Exactly the turns that version of the note showed (a coalesced note grows between shows).
        """
        if not note.key.startswith("interrupted-"):
            return
        new = self.ask.delivered(list(note.subjects), ok)
        if new:
            via, journal = self.notifier.name, self.ask.journal()  # the journal of now, not of when it runs
            self._off_thread(lambda: self.ask.journal_notified(new, via=via, journal=journal), lambda _none: None,
                             bookkeeping=True)
        elif not ok:
            log.info("notification %s was not shown; its turns will be asked about again", note.key)

    def _ending(self, out: RunResult, *, stopped: bool) -> words.Ending:
        e = words.ending(out.outcome, code=out.code, verdict=out.verdict, stopped=stopped, attempts=out.attempts,
                         ran_in=out.ran_in, in_app=not self.demo)
        if stopped and out.marker_left:  # your Stop holds, but Hermes' own file still names the turn: say so
            e = replace(e, can_do=words.stop_not_written(out.marker_left))
        return e

    def _add_recent(self, item: RecentItem) -> None:
        """The newest word on a turn replaces the older ones (a skip after "Not resumed" says "Skipped")."""
        self._recent = [r for r in self._recent if r.key != item.key][-19:]
        self._recent.append(item)

    def _remember(self, key: str, title: str, out: RunResult, *, stopped: bool) -> None:
        """The turns window's "Recent" section: how this continuation ended, in words, with why; the
        engine's own sentence is the details."""
        e = self._ending(out, stopped=stopped)
        home, session = _split_key(key)
        self._add_recent(RecentItem(key, title, e.what, e.why, e.can_do, time.time(), home,
                                    details=out.message, session_key=session))

    def _show_actions(self) -> tuple[Action, ...]:
        return (Action("default", "Show"),) if self.can_show else ()

    def _gave_up(self, rec: TurnRecord, note_key: str | None = None) -> None:
        """A turn we continued died again and reached Hermes' retry budget: stop, and say so once."""
        self._forget_continued(turn_key(rec.home, rec.session_key))
        if note_key is None:
            self._outcomes += 1
            note_key = f"outcome-{self._outcomes}"
        note = Note(note_key, words.ending(Outcome.GAVE_UP).title,
                    gave_up_text(self._label(rec), rec, in_app=not self.demo), self._show_actions(),
                    log_line=f"gave up: {turn_identity(rec)}", kind="gave-up")
        if self._settings.notify and not self.quiet():
            self.notifier.show(note)

    def _say_failure(self, key: str, rec: TurnRecord | None) -> None:
        """One note for a continuation that failed, worded after the scan that followed it: the last
        attempt of the budget is "gave up" (never also "can be continued again"), else "failed"."""
        failure = self._take_failure(key)
        if failure is None:
            return
        note_key, title, out, run = failure.note_key, failure.title, failure.result, failure.run
        if rec is not None and rec.verdict == "exhausted":
            self._gave_up(rec, note_key)
            return
        who = turn_identity(run.record) if run is not None and run.record is not None else key
        e = self._ending(out, stopped=False)
        note = Note(note_key, e.title or words.FAILED_AGAIN_TITLE, _body(title, e), self._show_actions(),
                    log_line=f"failed ({out.outcome.value}): {who}", kind=e.kind)
        if self._settings.notify and not (self.quiet() and run is not None and run.origin == "auto"):
            self.notifier.show(note)

    def _take_failure(self, key: str) -> _Failure | None:
        """The failure not said yet about ``key``, now in the caller's hands (said once)."""
        turn = self._turns.get(key)
        if turn is None or turn.failure is None:
            return None
        failure, turn.failure = turn.failure, None
        self._tidy(key)
        return failure

    # --- continuation progress/outcome (GUI thread) ---------------------------------------------
    def _on_progress(self, key: str, progress: Progress) -> None:
        run = self._run_of(key)
        if run is None:
            return
        phase = progress.phase or ""
        frame = progress.last_frame
        frames = progress.frames or 0
        status = {"waiting-for-backend": "waiting for your Hermes to start…",
                  "waiting-for-release": "waiting for your Hermes to let go of the session…",
                  "starting": "starting Hermes…",
                  "resuming": "resuming the session…", "running": "working", "stopping": "stopping…",
                  "finishing": "finishing…"}.get(phase, phase)
        if frame and phase == "running":
            status = f"{_frame_text(str(frame))} · {frames} update{'s' if frames != 1 else ''}"
        if not run.stop.is_set():
            run.status = status
        self._publish()

    def _on_finished(self, key: str, out: RunResult) -> None:
        run = self._run_of(key)
        if run is not None:
            self._set_phase(key, Phase.IDLE)  # until the next scan says otherwise
        title = run.title if run else "Hermes turn"
        if out.outcome is Outcome.GAVE_UP and out.attempts is None and run is not None and run.record is not None:
            out = replace(out, attempts=run.record.attempts)  # refused at the budget: the tries the turn had
        stopped = run is not None and run.stop.is_set() and run.stop.reason is StopReason.USER \
            and out.outcome is not Outcome.COMPLETED
        self._remember(key, title, out, stopped=stopped)
        who = turn_identity(run.record) if run is not None and run.record is not None else key
        self._outcomes += 1
        note_key = f"outcome-{self._outcomes}"
        outcome = out.outcome
        e = self._ending(out, stopped=stopped)
        note: Note | None
        if outcome is Outcome.COMPLETED:
            line = first_line(out.answer, 160) if (out.answer and self._settings.show_prompts) else ""
            body = "\n".join(x for x in (f"{title} finished.", e.why, line) if x)
            note = Note(note_key, e.title, body, self._show_actions(), log_line=f"finished: {who}", kind=e.kind)
            self._answers[note_key] = _Answer(title, out.answer)
        elif outcome is Outcome.GAVE_UP:
            note = Note(note_key, e.title, _body(title, e), self._show_actions(), log_line=f"gave up: {who}",
                        kind=e.kind)
            self._forget_continued(key)  # said here: the scan that follows does not say it again
        elif outcome is Outcome.REFUSED and run is not None and run.origin == "auto" and out.code in ROUTINE_REFUSALS:
            # tray and helper both in auto mode: the other one won the claim (or already finished).
            # Normal operation, not a failure: the log and the journal (core records the refusal) say so.
            log.info("auto resume of %s left to another process: %s", who, out.message)
            note = None
        elif outcome is Outcome.REFUSED:
            note = Note(note_key, e.title, _body(title, e), log_line=f"refused: {who}", kind=e.kind)
        elif stopped:
            note = Note(note_key, e.title, _body(title, e), log_line=f"stopped: {who}", kind=e.kind)
            self._forget_continued(key)
        elif outcome is Outcome.DETACHED:  # left running in Hermes as the tray quits: no failure to say
            log.info("left to Hermes: %s", who)
            note = None
        else:
            # said after the scan this finish triggers (or FAILURE_VERDICT_MS at the latest)
            self._turn(key).failure = _Failure(note_key, title, out, run, self._outcomes)
            QTimer.singleShot(FAILURE_VERDICT_MS, lambda k=key: self._say_failure(k, self._records.get(k)))
            note = None
        if note is not None and self._settings.notify and not (
            self.quiet() and run is not None and run.origin == "auto"
        ):
            self.notifier.show(note)
        del_keys = [k for k in self._answers if k != note_key][:-20]
        for k in del_keys:
            self._answers.pop(k, None)
        self._publish()
        self.rescan_requested.emit("resume-finished")

    # --- settings dialog model ------------------------------------------------------------------
    def snapshot(self) -> SettingsSnapshot:
        homes = [(str(h.path), short_path(h.label)) for h in self._report.homes]
        backend: dict[str, BackendValues] = {}
        for path, _label in homes:
            try:
                backend[path] = self.engine.backend_values(path)
            except Exception:
                log.exception("engine call backend_values failed")
                backend[path] = BackendValues(error="unreadable")
        s = self._settings
        return SettingsSnapshot(
            homes=homes,
            backend=backend,
            mode=s.mode,
            notify=bool(s.notify),
            show_prompts=bool(s.show_prompts),
            autostart=self._autostart_state(),
            hermes_command=list(s.hermes_command) if s.hermes_command else None,
            continuation_idle_timeout=float(s.continuation_idle_timeout),
        )

    def apply(self, backend: dict[str, dict[str, Any]], tray: dict[str, Any], autostart: bool | None,
              on_done: Callable[[list[str]], None] | None = None) -> None:
        """Write the dialog's changes on the write worker; ``on_done(problems)`` and :attr:`applied`
        follow on the GUI thread (problems empty when all went through)."""

        def work() -> tuple[list[str], TraySettings | str | None, str | None]:
            problems: list[str] = []
            for path, changes in backend.items():
                problems += self._write_backend([path], changes)
            written = self._write_settings(tray) if tray else None
            auto_err = self._write_autostart(autostart) if autostart is not None else None
            return problems, written, auto_err

        def then(result: tuple[list[str], TraySettings | str | None, str | None]) -> None:
            problems, written, auto_err = result
            if written is not None:
                err = self._settings_written(written)
                if err:
                    problems.append(err)
            if auto_err:
                self.message.emit(auto_err)
                problems.append(auto_err)
            self._publish()
            self.rescan_requested.emit("settings")
            self.applied.emit(problems)
            if on_done is not None:
                on_done(problems)

        self._off_thread(work, then)


__all__ = ["Controller", "Phase", "TurnItem"]
