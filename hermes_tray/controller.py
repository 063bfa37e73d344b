"""The coordinator between the engine and the views (tray, window, notifications, helper).

It turns scan reports into a :class:`ViewState`, decides what to *ask* (never what a turn's
verdict is — that is ``core.policy``), and carries out what the user chose through the engine:

* ask at most once per interrupted turn (the decision journal remembers across restarts);
* ``ask`` notifies and waits, ``auto`` resumes at once and notifies after, ``off`` only lists;
* a skipped turn that reappears (a non-locking writer resurrected it) is skipped again silently;
* continuations run on worker threads; their progress and outcome come back as signals.

Views never call the engine; the engine never sees Qt widgets.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from hermes_tray.app.format import first_line, short_path
from hermes_tray.app.settings_model import BackendValues, SettingsSnapshot
from hermes_tray.app.viewstate import RunningItem, TurnItem, ViewState, turn_item, turn_key, view_problems
from hermes_tray.notify.base import Action, Note, Notifier
from hermes_tray.notify.coalesce import InterruptionNotices, turn_identity, turn_label
from hermes_tray.watch.detector import ScanReport

log = logging.getLogger(__name__)

_ROUTINE_REFUSALS = ("claimed-elsewhere", "gone")
UNSHOWN_RETRY_SECONDS = 30.0  # a turn note that reached nobody is tried again after this


def stop_budget() -> float:
    """How long stopping a continuation may take at worst, by ``core.gateway``'s own timeouts:
    the interrupt's grace, then close stdin → wait, terminate → wait, kill → wait (10 s), plus
    the reader join and a margin."""
    try:
        from hermes_tray_core.gateway import GatewayOptions

        o = GatewayOptions()
        return float(o.stop_grace) + 2 * float(o.shutdown_grace) + 10.0 + 2.0 + 3.0
    except Exception:
        return 40.0


@dataclass
class Outcome:
    """How a resume ended, as the controller needs it (adapted from the engine's result)."""

    outcome: str  # completed | interrupted | error | crashed | timed-out | refused | gave-up
    message: str
    answer: str = ""  # the continuation's answer, when the engine has it
    attempts: int | None = None
    # why a refusal happened, when it is routine: "claimed-elsewhere" (another hermes-tray process
    # is resuming it), "gone" (no longer marked: someone else dealt with it)
    reason: str = ""


class Engine(Protocol):
    """What the controller needs from ``core`` (implemented by :class:`hermes_tray.engine.CoreEngine`)."""

    def homes(self) -> list[Any]: ...
    def scan(self, homes: Sequence[Any]) -> tuple[Sequence[Any], Sequence[str], dict[str, Any]]: ...
    def watch_plan(self, homes: Sequence[Any]) -> tuple[list[Any], list[Any]]: ...
    def writers(self, homes: Sequence[Any], records: Sequence[Any]) -> list[tuple[int, float | None]]: ...
    def skip(self, record: Any, *, origin: str) -> tuple[bool, str]: ...
    def resume(
        self, record: Any, *, origin: str, on_progress: Callable[[Any], None], stop: threading.Event
    ) -> Outcome: ...
    def set_backend(self, home_paths: Sequence[str], **changes: Any) -> list[str]: ...
    def backend_values(self, home_path: str) -> BackendValues: ...
    def asked_before(self, record: Any) -> bool: ...
    def skipped_before(self, record: Any) -> bool: ...
    def record(self, event: str, record: Any, **fields: Any) -> None: ...
    def history(self, limit: int = 500) -> list[Any]: ...
    def settings(self) -> Any: ...
    def update_settings(self, changes: dict[str, Any]) -> Any: ...


@dataclass
class _Run:
    key: str
    title: str
    started: float
    stop: threading.Event
    status: str = "starting…"
    wall_started: float = field(default_factory=time.time)
    thread: threading.Thread | None = None
    record: Any = None
    origin: str = "menu"


@dataclass
class _Answer:
    title: str
    text: str
    extra: dict[str, Any] = field(default_factory=dict)


def _ident(record: Any) -> tuple[str, str, Any, Any]:
    """One interrupted turn: a new interruption of the same session has a new start or attempt count."""
    return (
        str(getattr(record, "home", "")),
        str(getattr(record, "session_key", "")),
        getattr(record, "started_at", None),
        getattr(record, "attempts", None),
    )


def _end_descendants(*, since: float, grace: float = 2.0) -> None:
    """Terminate, then kill, this process's descendants created at ``since`` or later."""
    import psutil

    try:
        procs = [p for p in psutil.Process().children(recursive=True) if p.create_time() >= since]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)
    for p in procs:
        log.warning("ended process %s left by a continuation", p.pid)


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
    _progress = Signal(str, object)
    _finished = Signal(str, object)

    def __init__(
        self,
        engine: Engine,
        notifier: Notifier,
        *,
        autostart: Any = None,
        quiet: Callable[[], bool] = lambda: False,
        role: str = "tray",
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.notifier = notifier
        self.autostart = autostart
        self.quiet = quiet  # True: another process (the tray) does the asking; the helper stays silent
        self.role = role
        self._settings = engine.settings()
        self.notes = InterruptionNotices(notifier, show_prompts=lambda: bool(self._settings.show_prompts))
        self._records: dict[str, Any] = {}
        self._pending_keys: list[str] = []
        self._seen: set[tuple[str, str, Any, Any]] = set()
        self._pending_idents: dict[str, tuple[str, str, Any, Any]] = {}
        self._runs: dict[str, _Run] = {}
        self._answers: dict[str, _Answer] = {}
        self._outcomes = 0
        self._report = ScanReport()
        self._state = ViewState()
        self._resumed: set[str] = set()  # turn keys this process continued: their budget is ours to report
        self._notified: set[tuple[str, str, Any, Any]] = set()  # journalled as notified by us
        self._unshown: set[tuple[str, str, Any, Any]] = set()  # notes that reached nobody: ask again…
        self._unshown_retry = 0.0  # …from this time.monotonic() on (the notifier re-probes as often)
        notifier.activated.connect(self.on_note_activated)
        notifier.delivered.connect(self._on_delivered)
        self._progress.connect(self._on_progress)
        self._finished.connect(self._on_finished)
        self._ticker = QTimer(self)
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._publish)

    # --- reading ------------------------------------------------------------------------------
    @property
    def settings(self) -> Any:
        return self._settings

    @property
    def state(self) -> ViewState:
        return self._state

    def record_for(self, key: str) -> Any:
        return self._records.get(key)

    def on_scan(self, report: ScanReport) -> None:
        """A fresh scan: update the lists, ask about turns that are new, act in auto mode."""
        self._report = report
        records = list(report.records)
        self._records = {turn_key(str(getattr(r, "home", "")), str(getattr(r, "session_key", ""))): r for r in records}
        pending_before = set(self._pending_keys)
        pending = [
            k
            for k, r in self._records.items()
            if getattr(r, "verdict", None) == "actionable"
            and getattr(r, "source", "desktop") == "desktop"
            and k not in self._runs
        ]
        self._pending_keys = pending
        # a turn that left the list and comes back (a non-locking writer resurrected a skipped
        # marker) is looked at afresh: skipped again, or — if it was asked about — not re-asked
        for key in pending_before - set(pending):
            self._seen.discard(self._pending_idents.pop(key, None))  # type: ignore[arg-type]
        # a new interruption of the same session replaced the one a notification shows: withdraw
        # that notification (its buttons would act on a turn it never showed); the new one is asked
        replaced = {k for k in pending if k in self._pending_idents and self._pending_idents[k] != _ident(self._records[k])}
        self._pending_idents = {k: _ident(self._records[k]) for k in pending}
        self._notified &= set(self._pending_idents.values())
        if self._unshown and time.monotonic() >= self._unshown_retry:
            self._seen -= self._unshown
            self._unshown.clear()
        if replaced:
            self.notes.resolved({_split_key(k) for k in replaced})
        if self._settings.notify and (pending or any(getattr(r, "writer", None) == "alive" for r in records)):
            self.notifier.prepare()  # a turn is running (or waiting): be ready to speak at once
        to_ask: list[Any] = []
        mode = self._settings.mode
        for key in list(pending):
            rec = self._records[key]
            ident = _ident(rec)
            if ident in self._seen:
                continue
            self._seen.add(ident)
            if self._safe(self.engine.skipped_before, rec, default=False):
                ok, why = self._safe_pair(self.engine.skip, rec, origin="re-skip")
                log.info("skipped turn reappeared, removed again: %s (%s)", turn_identity(rec), why or "ok")
                if ok:
                    self._pending_keys.remove(key)
                continue
            if mode == "auto":
                # never continue a turn someone already asked about, decided, or that ran to an end
                # (this or another tray before a restart, the helper, the CLI): the journal says so.
                # Unreadable journal: do not act on a guess; the turn stays in the menu.
                if self._safe(self.engine.asked_before, rec, default=True):
                    log.info("auto mode: not resuming %s: the journal has it asked or answered",
                             turn_identity(rec))
                    continue
                QTimer.singleShot(0, lambda k=key: self.resume(k, origin="auto"))
                continue
            if mode in ("list", "off"):
                continue
            if self._safe(self.engine.asked_before, rec, default=False):
                continue
            to_ask.append(rec)
        if to_ask and self._settings.notify and not self.quiet():
            try:
                self.notes.announce(to_ask)  # journalled as "notified" once delivered (_on_delivered)
            except Exception:  # never "seen" without having been asked: the next scan asks again
                log.exception("could not announce %d interrupted turn(s)", len(to_ask))
                self._seen -= {_ident(r) for r in to_ask}
        for key, rec in self._records.items():
            if key in self._resumed and getattr(rec, "verdict", None) == "exhausted" and key not in self._runs:
                self._resumed.discard(key)  # say it once
                self._gave_up(rec)
        gone = pending_before - set(pending)
        if gone:
            self.notes.resolved({_split_key(k) for k in gone})
        self._publish()
        self.scan_seen.emit(report)

    def _publish(self) -> None:
        show = bool(self._settings.show_prompts)
        scanned = self._report.finished or time.time()  # the records' ages are as of their scan
        items = {k: turn_item(r, show_prompts=show, now=scanned) for k, r in self._records.items()}
        pending = tuple(items[k] for k in self._pending_keys if k in items)
        others = tuple(i for k, i in items.items() if k not in self._pending_keys and k not in self._runs)
        running = tuple(
            RunningItem(r.key, r.title, time.monotonic() - r.started, r.status, at=time.monotonic())
            for r in self._runs.values()
        )
        extra = self._report.extra or {}
        found = extra.get("homes_found", True)
        state = ViewState(
            pending=pending,
            others=others,
            running=running,
            backend_enabled=extra.get("backend_enabled", True),
            mode=self._settings.mode,
            autostart=self._autostart_state(),
            show_prompts=show,
            problems=view_problems(self._report.problems, extra.get("problem_details"), homes_found=found),
            homes_found=bool(found),
            watching=tuple(extra.get("watching") or ()),
        )
        if running and not self._ticker.isActive():
            self._ticker.start()
        elif not running:
            self._ticker.stop()
        self._state = state
        self.state_changed.emit(state)

    def _autostart_state(self) -> bool | None:
        if self.autostart is None:
            return None
        try:
            return bool(self.autostart.is_enabled())
        except Exception:
            return None

    # --- acting -------------------------------------------------------------------------------
    def resume(self, key: str, *, origin: str = "menu", record: Any = None) -> bool:
        """Start a continuation on a worker thread; False if there is nothing to resume.

        ``record``: the turn as the user saw it (a notification); the engine compares the marker
        against *its* entry. Default: the turn as last scanned.
        """
        rec = record if record is not None else self._records.get(key)
        if rec is None or key in self._runs:
            return False
        run = _Run(key, turn_label(rec), time.monotonic(), threading.Event(), record=rec, origin=origin)
        self._runs[key] = run
        self._resumed.add(key)
        if key in self._pending_keys:
            self._pending_keys.remove(key)
        self.notes.resolved({(str(getattr(rec, "home", "")), str(getattr(rec, "session_key", "")))})

        def work() -> None:
            try:
                out = self.engine.resume(
                    rec, origin=origin, on_progress=lambda p: self._progress.emit(key, p), stop=run.stop
                )
            except Exception as exc:  # the engine's bug must not kill the tray
                log.exception("resume failed")
                out = Outcome("error", f"Could not resume: {type(exc).__name__}")
            self._finished.emit(key, out)

        run.thread = threading.Thread(target=work, name=f"resume-{getattr(rec, 'session_key', '')}", daemon=True)
        run.thread.start()
        self._publish()
        return True

    def resume_all(self, keys: Iterable[str] | None = None, *, origin: str = "menu") -> int:
        return sum(self.resume(k, origin=origin) for k in list(keys if keys is not None else self._pending_keys))

    def skip(self, key: str, *, origin: str = "menu", record: Any = None) -> bool:
        rec = record if record is not None else self._records.get(key)
        if rec is None:
            return False
        ok, why = self._safe_pair(self.engine.skip, rec, origin=origin)
        if ok:
            if key in self._pending_keys:
                self._pending_keys.remove(key)
            self.notes.resolved({(str(getattr(rec, "home", "")), str(getattr(rec, "session_key", "")))})
        else:
            self.message.emit(why or "Could not skip this turn")
        self._publish()
        self.rescan_requested.emit("skip")
        return ok

    def skip_all(self, keys: Iterable[str] | None = None, *, origin: str = "menu") -> int:
        return sum(self.skip(k, origin=origin) for k in list(keys if keys is not None else self._pending_keys))

    def stop(self, key: str) -> None:
        run = self._runs.get(key)
        if run is not None:
            run.stop.set()
            run.status = "stopping…"
            self._publish()

    def set_backend_enabled(self, enabled: bool, home_paths: Sequence[str] | None = None) -> list[str]:
        if home_paths is not None:
            homes = list(home_paths)
        else:  # every watched home that exists (the default root may not, before Hermes first runs)
            homes = [str(getattr(h, "path", h)) for h in self._report.homes if os.path.isdir(getattr(h, "path", h))]
        problems = self.engine.set_backend(homes, enabled=enabled)
        for p in problems:
            self.message.emit(p)
        self.rescan_requested.emit("backend-config")
        return problems

    def disable_for(self, key: str) -> None:
        rec = self._records.get(key)
        if rec is not None:
            self.set_backend_enabled(False, [str(getattr(rec, "home", ""))])

    def set_mode(self, mode: str) -> None:
        self.apply_tray_settings({"mode": mode})

    def apply_tray_settings(self, changes: dict[str, Any]) -> str | None:
        try:
            self._settings = self.engine.update_settings(changes)
        except Exception as exc:
            self.message.emit(str(exc))
            return str(exc)
        self._publish()
        return None

    def set_autostart(self, enabled: bool) -> str | None:
        if self.autostart is None:
            return "Start at login is not available here"
        try:
            self.autostart.set_enabled(enabled)
        except Exception as exc:
            self.message.emit(str(exc))
            self._publish()
            return str(exc)
        self._publish()
        return None

    def shutdown(self, wait: float | None = None) -> None:
        """Stop running continuations (they retire their markers as a confirmed Stop) and wait.

        The wait is what the engine itself may need to stop a run (:func:`stop_budget`); a run
        still going after that has its processes (this process's descendants started since it
        began) terminated, then killed: quitting never leaves a Hermes child behind.
        """
        runs = list(self._runs.values())
        if not runs:
            return
        for run in runs:
            run.stop.set()
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
                run.thread.join(2.0)  # type: ignore[union-attr]

    # --- notification answers -----------------------------------------------------------------
    def on_note_activated(self, note_key: str, action: str) -> None:
        if note_key.startswith("outcome-"):
            answer = self._answers.get(note_key)
            if answer is not None and answer.text:
                self.answer_ready.emit(answer.title, answer.text)
            self.present_window.emit(True)
            return
        turns = self.notes.turns_for(note_key)
        if action in ("default", "open"):
            self.present_window.emit(True)
            return
        self.notes.answered(note_key)
        if action in ("resume", "resume-all", "skip", "skip-all"):
            # act on the turns the note showed, and only while each is still that turn: a newer
            # interruption of the same session is a different question, never answered by this button
            if not turns:  # withdrawn already (its turn was settled or replaced): a late press
                log.info("answer to a withdrawn notification %s ignored", note_key)
                self.message.emit("That notification is out of date (its turn changed or was settled); "
                                  "nothing was done. Look at the menu for what is waiting.")
                return
            changed = []
            for t in turns:
                key = turn_key(str(getattr(t, "home", "")), str(getattr(t, "session_key", "")))
                current = self._records.get(key)
                if current is None or _ident(current) != _ident(t):
                    changed.append(t)
                elif action.startswith("resume"):
                    self.resume(key, origin="notification", record=t)
                else:
                    self.skip(key, origin="notification", record=t)
            if changed:
                log.info("notification answered for turns that changed since: %s",
                         ", ".join(turn_identity(t) for t in changed))
                names = ", ".join(turn_label(t) for t in changed[:3])
                self.message.emit(f"{names}: changed since the notification was shown; nothing was done. "
                                  "Look at it again in the menu.")
        elif action == "disable":
            homes = sorted({str(getattr(t, "home", "")) for t in turns})
            self.set_backend_enabled(False, homes)

    def _on_delivered(self, note: Note, ok: bool) -> None:
        """A turn note reached the user (journal: asked, never again) or went nowhere (ask again).

        Exactly the turns that version of the note showed (a coalesced note grows between shows).
        """
        note_key = note.key
        if not note_key.startswith("interrupted-"):
            return
        turns = list(note.subjects)
        if ok:
            for t in turns:
                ident = _ident(t)
                if ident not in self._notified:
                    self._notified.add(ident)
                    self._safe(self.engine.record, "notified", t, via=self.notifier.name)
            return
        # nobody saw it: the turn stays unasked; a scan after the retry delay asks again (the
        # notifier probes for its server again by then)
        self._unshown |= {_ident(t) for t in turns} - self._notified
        self._unshown_retry = time.monotonic() + UNSHOWN_RETRY_SECONDS
        log.info("notification %s was not shown; its turns will be asked about again", note_key)

    def _gave_up(self, rec: Any) -> None:
        """A turn we continued died again and reached Hermes' retry budget: stop, and say so."""
        attempts = getattr(rec, "attempts", 0)
        self._outcomes += 1
        note = Note(f"outcome-{self._outcomes}", "Hermes gave up on a turn",
                    f"{turn_label(rec)}: interrupted again after {attempts} automatic "
                    f"continuation{'s' if attempts != 1 else ''}; it will not be continued again.",
                    (Action("default", "Show"),), urgent=True, log_line=f"gave up: {turn_identity(rec)}")
        if self._settings.notify and not self.quiet():
            self.notifier.show(note)

    # --- continuation progress/outcome (GUI thread) ---------------------------------------------
    def _on_progress(self, key: str, progress: Any) -> None:
        run = self._runs.get(key)
        if run is None:
            return
        phase = getattr(progress, "phase", "") or ""
        frame = getattr(progress, "last_frame", None)
        frames = getattr(progress, "frames", 0) or 0
        status = {"starting": "starting Hermes…", "resuming": "resuming the session…",
                  "running": "working", "stopping": "stopping…", "finishing": "finishing…"}.get(phase, phase)
        if frame and phase == "running":
            status = f"{_frame_text(str(frame))} · {frames} update{'s' if frames != 1 else ''}"
        if not run.stop.is_set():
            run.status = status
        self._publish()

    def _on_finished(self, key: str, out: Outcome) -> None:
        run = self._runs.pop(key, None)
        title = run.title if run else "Hermes turn"
        self._outcomes += 1
        note_key = f"outcome-{self._outcomes}"
        outcome = out.outcome
        if outcome == "completed":
            line = first_line(out.answer, 160) if (out.answer and self._settings.show_prompts) else ""
            body = f"{title}\n{line}" if line else f"{title} finished."
            note = Note(note_key, "Hermes turn finished", body, (Action("default", "Show"),),
                        log_line=f"finished: {turn_identity(run.record) if run else key}")
            self._answers[note_key] = _Answer(title, out.answer)
        elif outcome == "gave-up":
            note = Note(note_key, "Hermes gave up on a turn", f"{title}: {out.message}", urgent=True,
                        log_line=f"gave up: {turn_identity(run.record) if run else key}")
        elif outcome == "refused" and run is not None and run.origin == "auto" and out.reason in _ROUTINE_REFUSALS:
            # tray and helper both in auto mode: the other one won the claim (or already finished).
            # Normal operation, not a failure: the log and the journal (core records the refusal) say so.
            log.info("auto resume of %s left to another process: %s", turn_identity(run.record), out.message)
            note = None
        elif outcome == "refused":
            note = Note(note_key, "Turn not resumed", f"{title}: {out.message}",
                        log_line=f"refused: {turn_identity(run.record) if run else key}")
        elif run is not None and run.stop.is_set():
            note = Note(note_key, "Continuation stopped", f"{title}: stopped as you asked.",
                        log_line=f"stopped: {turn_identity(run.record)}")
        else:
            note = Note(note_key, "Hermes turn failed again", f"{title}: {out.message}", urgent=True,
                        log_line=f"failed ({outcome}): {turn_identity(run.record) if run else key}")
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
        homes = [(str(getattr(h, "path", h)), short_path(getattr(h, "label", h))) for h in self._report.homes]
        backend = {}
        for path, _label in homes:
            backend[path] = self._safe(self.engine.backend_values, path, default=BackendValues(error="unreadable"))
        s = self._settings
        return SettingsSnapshot(
            homes=homes,
            backend=backend,
            mode=s.mode,
            notify=bool(s.notify),
            show_prompts=bool(s.show_prompts),
            autostart=self._autostart_state(),
            hermes_command=list(s.hermes_command) if s.hermes_command else None,
        )

    def apply(self, backend: dict[str, dict[str, Any]], tray: dict[str, Any], autostart: bool | None) -> list[str]:
        problems: list[str] = []
        for path, changes in backend.items():
            problems += self.engine.set_backend([path], **changes)
        if tray:
            err = self.apply_tray_settings(tray)
            if err:
                problems.append(err)
        if autostart is not None:
            err = self.set_autostart(autostart)
            if err:
                problems.append(err)
        self.rescan_requested.emit("settings")
        return problems

    # --- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _safe(fn: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception:
            log.exception("engine call %s failed", getattr(fn, "__name__", fn))
            return default

    @staticmethod
    def _safe_pair(fn: Callable[..., tuple[bool, str]], *args: Any, **kwargs: Any) -> tuple[bool, str]:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            log.exception("engine call %s failed", getattr(fn, "__name__", fn))
            return False, f"{type(exc).__name__}: {exc}"


__all__ = ["Controller", "Engine", "Outcome", "TurnItem"]
