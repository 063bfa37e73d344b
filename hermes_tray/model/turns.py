"""The turns as this process holds them, Qt-free: each turn's phase here, what to ask and when, and which note
to show for how it ended (docs/architecture.md, "What the shell shows about a turn"). Its methods return values
(the view state, what to do after a scan or a press on a note); the controller wires them to Qt, and tests drive
it without an event loop. Turns go by opaque keys (:func:`~hermes_tray.contract.key_of`), never taken apart.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

from hermes_tray import words
from hermes_tray.contract import Outcome, RunResult, ScanReport, SkipReply, key_of
from hermes_tray.model import notes
from hermes_tray.model.viewstate import (
    RecentItem,
    RunningItem,
    TurnItem,
    ViewState,
    recent_items,
    turn_item,
    view_problems,
)
from hermes_tray.notify.coalesce import InterruptionNotices, ListedNames, turn_identity, turn_names
from hermes_tray.notify.note import Note, NoteSink
from hermes_tray_core import (
    AskOnce,
    Progress,
    StopReason,
    StopRequest,
    TraySettings,
    TurnId,
    TurnKey,
    TurnRecord,
    waiting,
)

log = logging.getLogger(__name__)

Key = TurnKey
#: a turn whose marker vanished keeps its notification this long: a writer rewriting the file continuously makes
#: a marker flicker (gone in one scan, back in the next), and withdrawing and showing again is a notification each
VANISHED_GRACE = 5.0
RECENT_KEPT = 20  # endings Recent lists
ANSWERS_KEPT = 20  # finished continuations whose answer a click on their note still shows

_RUN_ORDER = itertools.count()  # continuations are listed in the order they started


class Phase(Enum):
    """What this process is doing about one turn. The scan says what Hermes has; the phase says what the
    tray does with it. A turn that is only listed is ``IDLE``."""

    IDLE = "idle"
    WAITING = "waiting"  # the last scan found it waiting for an answer
    SKIPPING = "skipping"  # a skip is on the write worker
    RUNNING = "running"  # a continuation of ours runs (``_Turn.run``)


@dataclass
class Run:
    """One continuation of ours: the turn as the user saw it, how to stop it, what it is doing."""

    key: Key
    title: str
    started: float  # time.monotonic()
    stop: StopRequest
    record: TurnRecord
    origin: str = "menu"
    status: str = "starting…"
    thread: threading.Thread | None = None  # the controller's: it runs the engine's resume
    order: int = field(default_factory=lambda: next(_RUN_ORDER))


@dataclass
class _Failure:
    """A continuation that failed. What to say waits for the scan after it: only then is it known whether
    Hermes' retry budget is used up ("gave up", one note, not two)."""

    note_key: str
    title: str
    result: RunResult
    run: Run | None
    order: int  # failures are said in the order they happened


@dataclass
class _Turn:
    """Everything this process holds about one turn (:class:`Phases`, by key)."""

    phase: Phase = Phase.IDLE
    run: Run | None = None  # while RUNNING
    failure: _Failure | None = None  # not said yet; the turn may be WAITING, or RUNNING again, meanwhile
    continued: bool = False  # this process continued it: if Hermes gives up on it, this process says so, once

    @property
    def empty(self) -> bool:
        return self.phase is Phase.IDLE and self.failure is None and not self.continued


class Phases(dict[Key, _Turn]):
    """What this process does about each turn, by key (a turn only listed has no entry: ``IDLE``)."""

    def phase(self, key: Key) -> Phase:
        turn = self.get(key)
        return Phase.IDLE if turn is None else turn.phase

    def of(self, key: Key) -> _Turn:
        return self.setdefault(key, _Turn())

    def set(self, key: Key, phase: Phase, run: Run | None = None) -> None:
        turn = self.of(key)
        turn.phase, turn.run = phase, run
        self.tidy(key)

    def tidy(self, key: Key) -> None:
        turn = self.get(key)
        if turn is not None and turn.empty:
            del self[key]

    def run_of(self, key: Key) -> Run | None:
        turn = self.get(key)
        return turn.run if turn is not None and turn.phase is Phase.RUNNING else None

    def runs(self) -> list[Run]:
        """The continuations running now, in the order they started."""
        return sorted((t.run for t in self.values() if t.phase is Phase.RUNNING and t.run is not None),
                      key=lambda r: r.order)

    def forget_continued(self, key: Key) -> None:
        turn = self.get(key)
        if turn is not None:
            turn.continued = False
            self.tidy(key)

    def take_failure(self, key: Key) -> _Failure | None:
        """The failure not said yet about ``key``, now in the caller's hands (said once)."""
        turn = self.get(key)
        if turn is None or turn.failure is None:
            return None
        failure, turn.failure = turn.failure, None
        self.tidy(key)
        return failure


@dataclass
class AfterScan:
    """What a scan leaves the controller to do. ``reskip``: skipped turns that reappeared, skipped again on the
    write worker; ``recheck_in``: seconds until :meth:`TurnModel.withdraw_vanished` is due."""

    reskip: list[tuple[Key, TurnRecord]] = field(default_factory=list)
    resume: list[Key] = field(default_factory=list)
    recheck_in: float | None = None


@dataclass
class Pressed:
    """What a press on a notification asks for, of the turns it showed that are still those turns."""

    present: bool = False
    answer: tuple[str, str] | None = None  # (title, text)
    resume: list[tuple[Key, TurnRecord]] = field(default_factory=list)
    skip: list[tuple[Key, TurnRecord]] = field(default_factory=list)
    snooze: list[tuple[Key, TurnRecord]] = field(default_factory=list)
    disable: list[str] = field(default_factory=list)
    message: str = ""


#: a continuation's phase (the engine's ``Progress``) and its last frame, as a person watching reads them
PHASE_TEXT = {"waiting-for-backend": "waiting for your Hermes to start…",
              "waiting-for-release": "waiting for your Hermes to let go of the session…",
              "starting": "starting Hermes…", "resuming": "resuming the session…", "running": "working",
              "stopping": "stopping…", "finishing": "finishing…"}
FRAME_TEXT = {"status.update": "resuming", "message.start": "answering", "message.delta": "writing the answer",
              "thinking.delta": "thinking", "reasoning.delta": "thinking", "message.complete": "finishing"}


def progress_text(progress: Progress) -> str:
    """What a running continuation is doing, in a few words."""
    phase = progress.phase or ""
    status = PHASE_TEXT.get(phase, phase)
    frame = str(progress.last_frame or "")
    if frame and phase == "running":
        frames = progress.frames or 0
        doing = "using tools" if frame.startswith("tool") else FRAME_TEXT.get(frame, "working")
        status = f"{doing} · {words.count(frames, 'update')}"
    return status


class _Vanished:
    """Turns settled elsewhere (another process, Hermes) leave the list: their notes are withdrawn once they stayed
    away :data:`VANISHED_GRACE` seconds. One that comes back as the same interruption was only flickering (its note
    stays as it was); as a new one, the note that showed the old one goes at once."""

    def __init__(self, notices: InterruptionNotices) -> None:
        self.notes = notices
        self.since: dict[Key, tuple[float, TurnId]] = {}  # since when (time.monotonic()), which interruption it was

    def saw(self, gone: set[Key], pending: dict[Key, TurnRecord], previous: dict[Key, TurnRecord]) -> None:
        now = time.monotonic()
        for key in gone:
            rec = previous.get(key)
            if rec is not None:
                self.since.setdefault(key, (now, rec.turn.ident))
        for key in [k for k in self.since if k in pending]:
            _at, was = self.since.pop(key)
            if pending[key].turn.ident != was:
                self.notes.resolved({key})

    def withdraw(self) -> float | None:
        now = time.monotonic()
        due = {k for k, (at, _was) in self.since.items() if now - at >= VANISHED_GRACE}
        for key in due:
            del self.since[key]
        if due:
            self.notes.resolved(due)
        if not self.since:
            return None
        return max(0.0, min(at for at, _was in self.since.values()) + VANISHED_GRACE - now)


class TurnModel:
    """The turns of the last scan and what this process does about each (see the module's docstring)."""

    def __init__(self, sink: NoteSink, ask: AskOnce, settings: TraySettings, *,
                 quiet: Callable[[], bool] = lambda: False, can_show: bool = True, demo: bool = False) -> None:
        """``quiet``: another process (the tray) does the asking, so the helper stays silent; ``demo``: the demo's
        simulated Hermes has no app to finish a turn in."""
        self.sink = sink
        self.ask = ask
        self.settings = settings
        self.quiet = quiet
        self.can_show = can_show
        self.in_app = not demo
        self.demo = demo
        self.notes = InterruptionNotices(sink, show_prompts=lambda: bool(self.settings.show_prompts),
                                         can_open=can_show, name=self.label)
        self.report = ScanReport()
        self.records: dict[Key, TurnRecord] = {}  # the last scan's turns, by key, in its order
        self._names = ListedNames()  # what tells each of them apart from the others
        self._turns = Phases()  # what this process does about each turn
        self._recent: list[RecentItem] = []  # how this process's continuations and skips ended (newest last)
        self._answers: dict[str, tuple[str, str]] = {}  # a "finished" note's key → (title, answer)
        self._outcomes = 0
        # the rows of the last view, by key: a record that did not change is not re-worded (a storm of
        # 10,000 turns made every publish cost 0.4 s of the GUI thread)
        self._items: dict[Key, tuple[TurnRecord, bool, float, TurnItem]] = {}
        self._vanished = _Vanished(self.notes)  # turns that left the list, until their notes are withdrawn
        self._reminders: dict[Key, float] = {}  # waiting turns snoozed, as the last review read them: until when
        self._lapsed: dict[Key, TurnId] = {}  # snoozes that ended after their turn stopped waiting
        # what auto mode did about each listed interruption: "resumed", or "declined" (asked or answered before)
        self._auto: dict[TurnId, str] = {}

    # --- each turn's phase --------------------------------------------------------------------
    def phase(self, key: Key) -> Phase:
        return self._turns.phase(key)

    def run_of(self, key: Key) -> Run | None:
        return self._turns.run_of(key)

    def runs(self) -> list[Run]:
        """The continuations running now, in the order they started."""
        return self._turns.runs()

    def waiting_keys(self) -> list[Key]:
        """The turns waiting for an answer, in the scan's order."""
        return [k for k in self.records if self.phase(k) is Phase.WAITING]

    # --- a scan -------------------------------------------------------------------------------
    def scan(self, report: ScanReport) -> AfterScan:
        """A fresh scan: update the lists, ask about turns that are new, say failures the scan settles."""
        self.report = report
        records: list[TurnRecord] = list(report.records)
        previous = self.records
        self.records = {key_of(r): r for r in records}
        self._names.refresh(self.records, bool(self.settings.show_prompts))
        pending = waiting(records, running=[r.key for r in self.runs()])
        for key, turn in list(self._turns.items()):
            if turn.phase is Phase.WAITING and key not in pending:
                self._turns.set(key, Phase.IDLE)
        for key in pending:
            if self.phase(key) is Phase.IDLE:
                self._turns.set(key, Phase.WAITING)
        review = self.ask.review(pending, self.settings.mode,
                                 others=[r for k, r in self.records.items() if k not in pending])
        self._reminders = dict(review.snoozed)
        self._lapsed.update((key_of(r), r.turn.ident) for r in review.lapsed)
        for key in [k for k, i in self._lapsed.items() if k not in self.records or self.records[k].turn.ident != i]:
            del self._lapsed[key]
        listed = {r.turn.ident for r in records}
        self._auto = {i: w for i, w in self._auto.items() if i in listed} | {
            self.records[k].turn.ident: w for keys, w in ((review.resume, "resumed"), (review.declined, "declined"))
            for k in keys if k in self.records}
        if review.replaced:
            # a new interruption of the same session replaced the one a notification shows: withdraw
            # that notification (its buttons would act on a turn it never showed); the new one is asked
            self.notes.resolved(set(review.replaced))
        self._vanished.saw(review.gone, pending, previous)  # before asking: a new interruption is asked below
        if self.settings.notify and (pending or any(r.writer == "alive" for r in records)):
            self.sink.prepare()  # a turn is running (or waiting): be ready to speak at once
        for key, _rec in review.reskip:
            self._turns.set(key, Phase.SKIPPING)
        if (review.ask or review.remind) and self.settings.notify and not self.quiet():
            self._announce(list(review.ask), list(review.remind))
        failed = sorted((t.failure.order, k) for k, t in self._turns.items()
                        if t.failure is not None and t.phase is not Phase.RUNNING)
        for _order, key in failed:
            self.say_failure(key)
        for key, rec in self.records.items():
            held = self._turns.get(key)
            if held is not None and held.continued and rec.verdict == "exhausted" and held.phase is not Phase.RUNNING:
                self._gave_up(rec)  # says it once: the turn is no longer marked as continued here
        return AfterScan(list(review.reskip), list(review.resume), self.withdraw_vanished())

    def _announce(self, ask: list[TurnRecord], remind: list[TurnRecord]) -> None:
        """Ask about new turns; one still waiting after our continuation failed gets ONE note, the ask itself,
        saying why; one whose snooze ended gets one reminder of its own. A turn whose note could not be made is
        not counted as asked: the next scan asks again."""
        for rec in remind:
            self._ask([rec], title=words.REMINDER_WHAT, lead=words.REMINDER_LEAD)
        for rec in list(ask):
            failure = self._turns.take_failure(key_of(rec))
            if failure is not None:
                ask.remove(rec)
                e = notes.ending(failure.result, stopped=False, in_app=self.in_app)
                self._ask([rec], title=e.what, lead=e.why)
        if ask:
            self._ask(ask)  # journalled as "notified" once delivered (delivered())

    def _ask(self, recs: list[TurnRecord], **wording: str) -> None:
        try:
            self.notes.announce(recs, **wording)
        except Exception:  # boundary: never "seen" without having been asked: the next scan asks again
            log.exception("could not announce %d interrupted turn(s)", len(recs))
            self.ask.not_announced(recs)

    def next_reminder(self) -> float | None:
        """When the next snoozed turn is due (wall clock), None when none is: the controller looks again then."""
        now = self.ask.wall_clock()
        return min((until for until in self._reminders.values() if until > now), default=None)

    def withdraw_vanished(self) -> float | None:
        """Withdraw the notes of turns gone long enough; seconds until the next one is due (None: none left)."""
        return self._vanished.withdraw()

    # --- what the views render ----------------------------------------------------------------
    def view(self, *, autostart: bool | None = None) -> ViewState:
        show = bool(self.settings.show_prompts)
        self._names.refresh(self.records, show)
        scanned = self.report.finished or time.time()  # the records' ages are as of their scan
        now_wall = self.ask.wall_clock()
        items = {k: self._item(k, r, show, scanned, self.reminder_of(r, now_wall)) for k, r in self.records.items()}
        self._items = {k: (self.records[k], show, scanned, i) for k, i in items.items()}
        pending = tuple(items[k] for k in self.waiting_keys())
        others = tuple(i for k, i in items.items() if self.phase(k) is Phase.IDLE)
        now = time.monotonic()
        running = tuple(RunningItem(r.key, r.title, now - r.started, r.status, at=now) for r in self.runs())
        extra = self.report.extra
        return ViewState(
            pending=pending,
            others=others,
            running=running,
            backend_enabled=extra.backend_enabled,
            mode=self.settings.mode,
            autostart=autostart,
            show_prompts=show,
            problems=view_problems(self.report.problems, extra.problem_details, homes_found=extra.homes_found),
            homes_found=extra.homes_found,
            watching=extra.watching,
            recent=recent_items(others, self._recent, in_app=self.in_app, lapsed=self._lapsed),
            in_app=self.in_app,
            demo=self.demo,
        )

    def auto_choice(self, rec: TurnRecord) -> str | None:
        """What auto mode did about this interruption of the turn: "resumed", "declined" (it was asked about or
        answered before), or None (not in auto mode, or not yet)."""
        return self._auto.get(rec.turn.ident)

    def reminder_of(self, rec: TurnRecord, now: float | None = None) -> float | None:
        """When a snoozed waiting turn is announced again (wall clock), None when it is not snoozed."""
        until = self._reminders.get(key_of(rec))
        return until if until is not None and until > (self.ask.wall_clock() if now is None else now) else None

    def label(self, rec: TurnRecord) -> str:
        """What the user calls this turn: the name it is listed under."""
        return self._names.get(key_of(rec)) or turn_names([rec], show_prompts=bool(self.settings.show_prompts))[0]

    def _item(self, key: Key, rec: TurnRecord, show: bool, scanned: float, reminder: float | None) -> TurnItem:
        """The row of ``rec``, reused from the last view when nothing it says has changed."""
        last = self._items.get(key)
        name = self._names.get(key)
        if last is not None and last[0] is rec and last[1] == show and last[2] == scanned \
                and last[3].title == name and last[3].reminder == reminder:
            return last[3]
        return turn_item(rec, show_prompts=show, now=scanned, name=name, reminder=reminder)

    # --- the user's choices -------------------------------------------------------------------
    def begin_resume(self, key: Key, *, origin: str, record: TurnRecord | None = None) -> Run | None:
        """A continuation of ``key`` starts (None: nothing to resume). ``record``: the turn as the user saw it
        (a notification); the engine compares the marker against *its* entry. Default: as last scanned."""
        rec = record if record is not None else self.records.get(key)
        if rec is None or self.phase(key) in (Phase.RUNNING, Phase.SKIPPING):
            return None
        run = Run(key, self.label(rec), time.monotonic(), StopRequest(), rec, origin=origin)
        self._turns.set(key, Phase.RUNNING, run)
        self._turns.of(key).continued = True
        self.notes.resolved({key})
        return run

    def begin_skip(self, key: Key, record: TurnRecord | None = None) -> TurnRecord | None:
        """A skip of ``key`` goes to the write worker (None: nothing to skip); the turn leaves the lists at once."""
        rec = record if record is not None else self.records.get(key)
        if rec is None or self.phase(key) in (Phase.SKIPPING, Phase.RUNNING):
            return None
        self._turns.set(key, Phase.SKIPPING)
        return rec

    def skipped(self, key: Key, rec: TurnRecord, reply: SkipReply, *, again: bool = False) -> str:
        """A skip came back: the turn is settled, or waits again if the scan says so. The line to show the user
        ("" for none; a silent re-skip, ``again``, says nothing)."""
        if self.phase(key) is Phase.SKIPPING:
            last = self.records.get(key)
            waits = not reply.ok and last is not None and key in waiting([last])
            self._turns.set(key, Phase.WAITING if waits else Phase.IDLE)
        if again:
            log.info("skipped turn reappeared, removed again: %s (%s)", turn_identity(rec), reply.message or "ok")
            return ""
        if not reply.ok:
            return reply.message or "Could not skip this turn."
        self.notes.resolved({key})
        held = words.held("skipped")
        self._add_recent(RecentItem(key, self.label(rec), held.what, held.why, "", time.time(), str(rec.home),
                                    session_key=rec.session_key))
        return ""

    def stop(self, key: Key) -> bool:
        """The user's Stop: the run ends for good (the engine reads why from its ``StopRequest``)."""
        run = self.run_of(key)
        if run is None:
            return False
        run.stop.set()
        run.status = "stopping…"
        return True

    def begin_snooze(self, key: Key, record: TurnRecord | None = None) -> TurnRecord | None:
        """Remind me later about a waiting turn (None: it is not waiting). The snooze is journalled on the write
        worker (:meth:`snoozed` follows); it continues and skips nothing."""
        rec = record if record is not None else self.records.get(key)
        return rec if rec is not None and self.phase(key) is Phase.WAITING else None

    def snoozed(self, key: Key, rec: TurnRecord, until: float, error: str | None) -> str:
        """The snooze was journalled (or not: ``error``): its note goes until then. The line to show the user."""
        if error is not None:
            log.warning("snooze of %s not journalled: %s", turn_identity(rec), error)
            return words.SNOOZE_NOT_KEPT
        self._reminders[key] = until
        self.notes.resolved({key})
        self.ask.not_announced([rec])  # looked at afresh: the journal's snooze holds it until ``until``
        return ""

    # --- a continuation's progress and end ----------------------------------------------------
    def progress(self, key: Key, progress: Progress) -> bool:
        """A continuation reports what it is doing; False when it is no longer ours to show."""
        run = self.run_of(key)
        if run is None:
            return False
        if not run.stop.is_set():
            run.status = progress_text(progress)
        return True

    def finished(self, key: Key, out: RunResult) -> notes.After:
        """A continuation ended: Recent says how, and a note now — or, for a failure, after the next scan."""
        run = self.run_of(key)
        if run is not None:
            self._turns.set(key, Phase.IDLE)  # until the next scan says otherwise
        title = run.title if run else "Hermes turn"
        if out.outcome is Outcome.GAVE_UP and out.attempts is None and run is not None:
            out = replace(out, attempts=run.record.attempts)  # refused at the budget: the tries the turn had
        stopped = run is not None and run.stop.is_set() and run.stop.reason is StopReason.USER \
            and out.outcome is not Outcome.COMPLETED
        rec = run.record if run is not None else self.records.get(key)
        self._remember(key, rec, title, out, stopped=stopped)
        who = turn_identity(rec) if rec is not None else "an unknown turn"
        self._outcomes += 1
        note_key = f"outcome-{self._outcomes}"
        after, note = notes.outcome_note(note_key, title, out, who, stopped=stopped,
                                         auto=run is not None and run.origin == "auto",
                                         show_answer=bool(self.settings.show_prompts), in_app=self.in_app,
                                         can_show=self.can_show)
        if out.outcome is Outcome.COMPLETED:
            self._answers[note_key] = (title, out.answer)
            for old in [k for k in self._answers if k != note_key][:-ANSWERS_KEPT]:
                del self._answers[old]
        if out.outcome is Outcome.GAVE_UP or (stopped and out.outcome is not Outcome.REFUSED):
            self._turns.forget_continued(key)  # said here: the scan that follows does not say it again
        if after is notes.After.LATER:
            self._turns.of(key).failure = _Failure(note_key, title, out, run, self._outcomes)
        elif after is notes.After.NOTHING:
            log.info("no note for %s: %s (%s)", who, out.outcome.value, out.message)
        if note is not None:
            self._show(note, auto=run is not None and run.origin == "auto")
        return after

    def say_failure(self, key: Key) -> None:
        """One note for a continuation that failed, worded after the scan that followed it: the last
        attempt of the budget is "gave up" (never also "can be continued again"), else "failed"."""
        failure = self._turns.take_failure(key)
        if failure is None:
            return
        rec = self.records.get(key)
        if rec is not None and rec.verdict == "exhausted":
            self._gave_up(rec, failure.note_key)
            return
        run = failure.run
        who = turn_identity(run.record) if run is not None else "an unknown turn"
        self._show(notes.failure_note(failure.note_key, failure.title, failure.result, who, in_app=self.in_app,
                                      can_show=self.can_show), auto=run is not None and run.origin == "auto")

    def _gave_up(self, rec: TurnRecord, note_key: str | None = None) -> None:
        """A turn we continued died again and reached Hermes' retry budget: stop, and say so once."""
        self._turns.forget_continued(key_of(rec))
        if note_key is None:
            self._outcomes += 1
            note_key = f"outcome-{self._outcomes}"
        self._show(notes.gave_up_note(note_key, self.label(rec), rec, turn_identity(rec), in_app=self.in_app,
                                      can_show=self.can_show), auto=True)

    def _show(self, note: Note, *, auto: bool) -> None:
        """Show ``note`` unless notes are off, or it is about what the tray says too while the helper keeps quiet
        (``auto``: not an answer to a press on the helper's own note)."""
        if self.settings.notify and not (auto and self.quiet()):
            self.sink.show(note)

    def _add_recent(self, item: RecentItem) -> None:
        """The newest word on a turn replaces the older ones (a skip after "Not resumed" says "Skipped")."""
        self._recent = [r for r in self._recent if r.key != item.key][-(RECENT_KEPT - 1):]
        self._recent.append(item)

    def _remember(self, key: Key, rec: TurnRecord | None, title: str, out: RunResult, *, stopped: bool) -> None:
        """Recent: how this continuation ended, in words, with why; the engine's own sentence is the details."""
        e = notes.ending(out, stopped=stopped, in_app=self.in_app)
        self._add_recent(RecentItem(key, title, e.what, e.why, e.can_do, time.time(),
                                    str(rec.home) if rec is not None else "", details=out.message,
                                    session_key=rec.session_key if rec is not None else ""))

    # --- notifications ------------------------------------------------------------------------
    def pressed(self, note_key: str, action: str) -> Pressed:
        """A button or a click on a note: act on the turns the note showed, and only while each is still that
        turn — a newer interruption of the same session is a different question, never answered by this note."""
        if note_key.startswith("outcome-"):
            answer = self._answers.get(note_key)
            return Pressed(present=True, answer=answer if answer is not None and answer[1] else None)
        turns = self.notes.turns_for(note_key)
        self.notes.answered(note_key)  # pressed, it is gone (the notifier closes it): a later turn gets a new note
        if action in ("default", "open"):
            return Pressed(present=True)
        if action == "disable":
            return Pressed(disable=sorted({str(t.home) for t in turns}))
        if action not in ("resume", "resume-all", "skip", "skip-all", "snooze"):
            return Pressed()
        if not turns:  # withdrawn already (its turn was settled or replaced): a late press
            log.info("answer to a withdrawn notification %s ignored", note_key)
            return Pressed(message=words.OUT_OF_DATE)
        out, changed = Pressed(), []
        for t in turns:
            key, current = key_of(t), self.records.get(key_of(t))
            if current is None or current.turn.ident != t.turn.ident:
                changed.append(t)
            else:
                (out.resume if action.startswith("resume") else out.snooze if action == "snooze"
                 else out.skip).append((key, t))
        if changed:
            log.info("notification answered for turns that changed since: %s",
                     ", ".join(turn_identity(t) for t in changed))
            out.message = f"{', '.join(self.label(t) for t in changed[:3])} {words.CHANGED_SINCE}"
        return out

    def delivered(self, note: Note, ok: bool) -> list[TurnRecord]:
        """A turn note reached the user (the turns to journal as asked, never again) or went nowhere (ask
        again). Exactly the turns that version of the note showed first (a coalesced note grows between shows)."""
        if not note.key.startswith("interrupted-"):
            return []
        subjects = self.notes.newly_shown(note.key, note.subjects) if ok else list(note.subjects)
        new = self.ask.delivered(subjects, ok)
        if ok:
            for t in subjects:
                self._reminders.pop(key_of(t), None)
        if not ok and not new:
            log.info("notification %s was not shown; its turns will be asked about again", note.key)
        return new


__all__ = ["VANISHED_GRACE", "AfterScan", "Phase", "Pressed", "Run", "TurnModel", "progress_text"]
