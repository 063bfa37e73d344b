"""The Qt wiring between the turn model, the engine and the views: the model gets the scans, what it and the
user decide goes to the engine (blocking writes in order on one write worker, each continuation on a thread of
its own), results come back as signals. Quitting is never the user's Stop (:meth:`Controller.shutdown`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from functools import partial
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from hermes_tray import words
from hermes_tray.autostart.base import AutoStart
from hermes_tray.contract import Engine, Outcome, RunResult, ScanReport, SkipReply
from hermes_tray.model import settings as settings_model
from hermes_tray.model.notes import After
from hermes_tray.model.settings import SettingsSnapshot
from hermes_tray.model.turns import Run, TurnModel
from hermes_tray.model.viewstate import ViewState
from hermes_tray.notify.base import Notifier
from hermes_tray.notify.note import Note
from hermes_tray_core import (
    AskOnce,
    Progress,
    StopReason,
    TraySettings,
    TurnKey,
    TurnRecord,
    record_notified,
    remind_at,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = TurnKey
FAILURE_VERDICT_MS = 3000  # a failed continuation is said after the next scan, or this long after
QUIT_WAIT_S = 5.0  # how long quitting waits for runs to say how they were left (then it quits as a crash would)


class WriteWorker(QObject):
    """Every blocking write (skip, config, settings, start at login, journal) runs here, in order, on one thread
    off the GUI's: a locked state.db or lease store (10 s busy timeout) never freezes the UI. Each result is
    handed back to the GUI thread."""

    _written = Signal(object)  # (then, value)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tray-write")
        self.pending = 0  # submitted and not handed back yet
        self._quitting = threading.Event()  # set by shutdown: bookkeeping not started yet is dropped
        self._written.connect(self._on_written)

    def submit(self, work: Callable[[], T], then: Callable[[T], object], *, bookkeeping: bool = False) -> None:
        """Run ``work`` here; ``then(result)`` runs on the GUI thread afterwards. ``work`` must not raise (each
        caller turns exceptions into a result the user can read). ``bookkeeping``: a write nobody asked for (a
        journal note, a silent re-skip): dropped rather than started once the tray is quitting, so a stop
        request never waits for a storm's backlog."""
        self.pending += 1

        def run() -> None:
            if bookkeeping and self._quitting.is_set():
                log.info("quitting: a bookkeeping write was not started")
                self._written.emit((None, None))
                return
            try:
                value: Any = work()
            except Exception:  # boundary (the worker's top): a caller bug is logged; ``then`` gets no half result
                log.exception("background write failed")
                self._written.emit((None, None))
                return
            self._written.emit((then, value))

        try:
            self.pool.submit(run)
        except RuntimeError:  # quitting: the worker is shut down; nothing new is written
            self.pending -= 1
            log.info("not written: the tray is quitting")

    def _on_written(self, payload: tuple[Callable[[Any], object] | None, Any]) -> None:
        self.pending -= 1
        then, value = payload
        if then is not None:
            then(value)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait (blocking) until every write handed over is done; True if none is left."""
        done = self.pool.submit(lambda: None)
        try:
            done.result(timeout)
        except futures.TimeoutError:
            return False
        return True

    def shutdown(self) -> None:
        """Finish what the user asked for (a skip or a settings save is finished, not torn); drop bookkeeping."""
        self._quitting.set()
        self.pool.shutdown(wait=True)


def _let_go(runs: list[Run], wait: float) -> None:
    """Wait up to ``wait`` seconds for continuations told the tray quits to say how they were left (journalled
    ``detached``). One still busy after that is left as a crash would leave it: nothing of it is killed, its
    Hermes carries the turn on (a running backend, or a gateway behind its keeper), and the next scan reads
    how it ended from Hermes (``orphans``)."""
    log.info("leaving %s before quitting (at most %.0f s)", words.count(len(runs), "continuation"), wait)
    deadline = time.monotonic() + wait
    for run in runs:
        if run.thread is not None:
            run.thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [r for r in runs if r.thread is not None and r.thread.is_alive()]
    if stuck:
        log.warning("%s still busy after %.0f s: left to Hermes as they are", words.count(len(stuck), "continuation"), wait)


class Controller(QObject):
    state_changed = Signal(object)  # ViewState
    present_window = Signal(bool)  # activate (take focus)?
    answer_ready = Signal(str, str)  # title, answer text → prompt window
    rescan_requested = Signal(str)
    message = Signal(str)  # a one-line status for the user (errors of actions)
    scan_seen = Signal(object)  # ScanReport, after processing (helper --print-events, tests)
    skip_done = Signal(object, bool)  # turn key, skipped? (after the write worker ran it)
    applied = Signal(list)  # problems of a settings write (empty: all went through)
    _progress = Signal(object, object)
    _finished = Signal(object, object)

    def __init__(self, engine: Engine, notifier: Notifier, *, autostart: AutoStart | None = None,
                 quiet: Callable[[], bool] = lambda: False, role: str = "tray", demo: bool = False,
                 parent: QObject | None = None) -> None:
        """``quiet``: another process (the tray) does the asking, so the helper stays silent; ``demo``: the demo's
        simulated Hermes has no app to finish a turn in."""
        super().__init__(parent)
        self.engine = engine
        self.notifier = notifier
        self.autostart = autostart
        # the helper has no window: its notes carry no "Show"/"Open" button that would do nothing
        self.model = TurnModel(notifier, AskOnce(engine.ledger), engine.settings(), quiet=quiet,
                               can_show=role != "helper", demo=demo)
        self._state = ViewState()
        self.writes = WriteWorker(self)
        notifier.activated.connect(self.on_note_activated)
        notifier.delivered.connect(self._on_delivered)
        self._progress.connect(self._on_progress)
        self._finished.connect(self._on_finished)
        self._ticker = QTimer(self)  # elapsed times move while a continuation runs
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._publish)
        self._recheck = QTimer(self)  # notes of turns that left the list: withdrawn once gone long enough
        self._recheck.setSingleShot(True)
        self._recheck.timeout.connect(lambda: self._recheck_in(self.model.withdraw_vanished()))
        self._remind = QTimer(self)  # a snoozed turn's time: look again (the scan brings its one reminder)
        self._remind.setSingleShot(True)
        self._remind.timeout.connect(lambda: self.rescan_requested.emit("reminder"))

    # --- reading ------------------------------------------------------------------------------
    @property
    def settings(self) -> TraySettings:
        return self.model.settings

    @property
    def state(self) -> ViewState:
        return self._state

    @property
    def report(self) -> ScanReport:
        return self.model.report

    def _reskip(self, key: Key, rec: TurnRecord) -> None:
        """A skipped turn that came back is skipped again, silently, on the write worker."""
        self.writes.submit(lambda: self._engine_skip(rec, "re-skip"),
                           lambda reply: self._skipped(key, rec, reply, again=True), bookkeeping=True)

    # --- scans and the view -------------------------------------------------------------------
    def on_scan(self, report: ScanReport) -> None:
        """A fresh scan: the model updates the lists and asks; skipped turns that came back are skipped again,
        auto mode resumes."""
        after = self.model.scan(report)
        for key, rec in after.reskip:
            self._reskip(key, rec)
        for key in after.resume:
            QTimer.singleShot(0, lambda k=key: self.resume(k, origin="auto"))
        self._recheck_in(after.recheck_in)
        self._arm_reminder()
        self._publish()
        self.scan_seen.emit(report)

    def _recheck_in(self, seconds: float | None) -> None:
        if seconds is not None and not self._recheck.isActive():
            self._recheck.start(max(0, int(seconds * 1000) + 10))

    def _arm_reminder(self) -> None:
        at = self.model.next_reminder()
        if at is None:
            self._remind.stop()
        else:
            self._remind.start(min(2**31 - 1, int(max(0.0, at - self.model.ask.wall_clock()) * 1000) + 50))

    def _publish(self) -> None:
        state = self._state = self.model.view(autostart=settings_model.autostart_state(self.autostart))
        if state.running and not self._ticker.isActive():
            self._ticker.start()
        elif not state.running:
            self._ticker.stop()
        self.state_changed.emit(state)

    def drain(self, timeout: float | None = None) -> bool:
        """:meth:`WriteWorker.drain`, for quitting and tools without an event loop (results still come as signals)."""
        return self.writes.drain(timeout)

    # --- acting -------------------------------------------------------------------------------
    def _engine_skip(self, rec: TurnRecord, origin: str) -> SkipReply:
        try:
            return self.engine.skip(rec, origin=origin)
        except Exception as exc:  # boundary: the engine's failure is a reply the user reads
            log.exception("engine call skip failed")
            return SkipReply(False, words.error_text(exc))

    def _skipped(self, key: Key, rec: TurnRecord, reply: SkipReply, *, again: bool = False) -> None:
        text = self.model.skipped(key, rec, reply, again=again)
        if text:
            self.message.emit(text)
        self._publish()
        if not again:
            self.skip_done.emit(key, reply.ok)
            self.rescan_requested.emit("skip")

    def skip(self, key: Key, *, origin: str = "menu", record: TurnRecord | None = None) -> bool:
        """Skip on the write worker; False if there is nothing to skip. The turn leaves the lists at
        once; :attr:`skip_done` (and a rescan) follow, and a refusal comes back with its reason."""
        rec = self.model.begin_skip(key, record)
        if rec is None:
            return False
        self._publish()
        self.writes.submit(lambda: self._engine_skip(rec, origin), lambda reply: self._skipped(key, rec, reply))
        return True

    def resume(self, key: Key, *, origin: str = "menu", record: TurnRecord | None = None) -> bool:
        """Start a continuation on a thread of its own; False if there is nothing to resume (``record``:
        :meth:`TurnModel.begin_resume`)."""
        run = self.model.begin_resume(key, origin=origin, record=record)
        if run is None:
            return False

        def work() -> None:
            try:
                out = self.engine.resume(run.record, origin=origin, on_progress=lambda p: self._progress.emit(key, p),
                                         stop=run.stop)
            except Exception as exc:  # boundary (the thread's top): the engine's bug must not kill the tray
                log.exception("resume failed")
                out = RunResult(Outcome.ERROR, f"Could not resume: {words.error_text(exc)}")
            self._finished.emit(key, out)

        run.thread = threading.Thread(target=work, name=f"resume-{run.record.session_key}", daemon=True)
        run.thread.start()
        self._publish()
        return True

    def resume_all(self, keys: Iterable[Key] | None = None, *, origin: str = "menu") -> int:
        return sum(self.resume(k, origin=origin) for k in list(keys if keys is not None else self.model.waiting_keys()))

    def snooze(self, key: Key, when: str = "1h", *, origin: str = "menu", record: TurnRecord | None = None) -> bool:
        """Remind me later (``when``: ``1h``, ``tomorrow``…): recorded on the write worker, never continued or
        skipped; False if the turn is not waiting."""
        rec = self.model.begin_snooze(key, record)
        if rec is None:
            return False
        until = remind_at(when, self.model.ask.wall_clock())

        def then(error: str | None) -> None:
            if text := self.model.snoozed(key, rec, until, error):
                self.message.emit(text)
            self._arm_reminder()
            self._publish()

        self.writes.submit(lambda: self._engine_snooze(rec, until, origin), then)
        return True

    def _engine_snooze(self, rec: TurnRecord, until: float, origin: str) -> str | None:
        try:
            self.engine.snooze(rec, until, origin=origin)
        except Exception as exc:  # boundary: the user is told the snooze did not take
            log.exception("engine call snooze failed")
            return words.error_text(exc)
        return None

    def stop(self, key: Key) -> None:
        if self.model.stop(key):
            self._publish()

    def _on_progress(self, key: Key, progress: Progress) -> None:
        if self.model.progress(key, progress):
            self._publish()

    def _on_finished(self, key: Key, out: RunResult) -> None:
        if self.model.finished(key, out) is After.LATER:  # said after the scan this finish triggers, or then
            QTimer.singleShot(FAILURE_VERDICT_MS, partial(self._say_failure, key))
        self._publish()
        self.rescan_requested.emit("resume-finished")

    def _say_failure(self, key: Key) -> None:
        self.model.say_failure(key)
        self._publish()

    # --- notification answers -----------------------------------------------------------------
    def on_note_activated(self, note_key: str, action: str) -> None:
        pressed = self.model.pressed(note_key, action)
        if pressed.answer is not None:
            self.answer_ready.emit(*pressed.answer)
        if pressed.present:
            self.present_window.emit(True)
        for key, rec in pressed.resume:
            self.resume(key, origin="notification", record=rec)
        for key, rec in pressed.skip:
            self.skip(key, origin="notification", record=rec)
        for key, rec in pressed.snooze:
            self.snooze(key, origin="notification", record=rec)
        if pressed.disable:
            self.set_backend_enabled(False, pressed.disable)
        if pressed.message:
            self.message.emit(pressed.message)

    def _on_delivered(self, note: Note, ok: bool) -> None:
        new = self.model.delivered(note, ok)
        if new:
            via, ledger = self.notifier.name, self.model.ask.ledger()  # the ledger of now, not of when it runs
            self.writes.submit(lambda: record_notified(new, via=via, ledger=ledger), lambda _none: None,
                               bookkeeping=True)

    # --- settings (the dialog's model, the menu's switches) ------------------------------------
    def set_backend_enabled(self, enabled: bool, home_paths: Sequence[str] | None = None) -> None:
        """Turn Hermes' auto-continue on or off (on the write worker; problems come as messages)."""
        homes = list(home_paths) if home_paths is not None else settings_model.existing_homes(self.report.homes)

        def then(problems: list[str]) -> None:
            for p in problems:
                self.message.emit(p)
            self.rescan_requested.emit("backend-config")

        self.writes.submit(lambda: settings_model.write_backend(self.engine, homes, {"enabled": enabled}), then)

    def disable_for(self, key: Key) -> None:
        rec = self.model.records.get(key)
        if rec is not None:
            self.set_backend_enabled(False, [str(rec.home)])

    def set_mode(self, mode: str) -> None:
        self.apply_tray_settings({"mode": mode})

    def apply_tray_settings(self, changes: dict[str, Any]) -> None:
        """Write the tray's own settings on the write worker; the new values apply when it is done."""
        self.writes.submit(lambda: settings_model.write_settings(self.engine, changes), self._settings_written)

    def _settings_written(self, result: TraySettings | str) -> str | None:
        if isinstance(result, str):
            self.message.emit(result)
            return result
        self.model.settings = result
        self._publish()
        return None

    def set_autostart(self, enabled: bool) -> None:
        def then(err: str | None) -> None:
            if err:
                self.message.emit(err)
            self._publish()

        self.writes.submit(lambda: settings_model.write_autostart(self.autostart, enabled), then)

    def snapshot(self) -> SettingsSnapshot:
        return settings_model.snapshot(self.engine, self.report.homes, self.model.settings, self.autostart)

    def apply(self, backend: dict[str, dict[str, Any]], tray: dict[str, Any], autostart: bool | None,
              on_done: Callable[[list[str]], None] | None = None) -> None:
        """Write the dialog's changes on the write worker; ``on_done(problems)`` and :attr:`applied`
        follow on the GUI thread (problems empty when all went through)."""

        def then(result: tuple[list[str], TraySettings | str | None, str | None]) -> None:
            problems, written, login_error = result
            if written is not None and (err := self._settings_written(written)):
                problems.append(err)
            if login_error:
                self.message.emit(login_error)
                problems.append(login_error)
            self._publish()
            self.rescan_requested.emit("settings")
            self.applied.emit(problems)
            if on_done is not None:
                on_done(problems)

        self.writes.submit(lambda: settings_model.write_all(self.engine, self.autostart, backend, tray, autostart), then)

    # --- quitting -----------------------------------------------------------------------------
    def shutdown(self, wait: float | None = None) -> None:
        """Finish queued writes, let go of running continuations and wait. Quitting (Quit, logout, SIGTERM,
        SIGHUP, an update) is never the user's Stop: each continuation is left as it would be without the tray
        (``StopReason.SHUTDOWN``), nothing is recorded as stopped by you and nothing is killed (:func:`_let_go`)."""
        runs = self.model.runs()
        for run in runs:
            run.stop.request(StopReason.SHUTDOWN)
        self.writes.shutdown()
        if runs:
            _let_go(runs, QUIT_WAIT_S if wait is None else wait)


__all__ = ["QUIT_WAIT_S", "Controller", "WriteWorker"]
