"""The engine adapter against real homes and the real ledger: bookkeeping never undoes an action."""

from __future__ import annotations

from pathlib import Path

from fakes import RecordingNotifier

from hermes_tray.controller import Controller
from hermes_tray.engine import CoreEngine
from hermes_tray.watch.detector import ScanReport
from hermes_tray_core.hermes.homes import discover_homes
from hermes_tray_core.stores.ledger import ledger
from tests.support.fixture_homes import FixtureHome, marker_entry


def _full_disk(monkeypatch) -> list[str]:
    """The ledger's decisions cannot be written any more (the disk filled up after the claim was taken)."""
    import errno

    from hermes_tray_core.stores.ledger import Ledger

    tried: list[str] = []

    def full(self, event, turn, **fields):
        tried.append(str(event))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Ledger, "record", full)
    return tried


def test_skip_succeeds_even_when_the_ledger_cannot_be_written(qtbot, tmp_path: Path, monkeypatch) -> None:
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Fix the flaky test")
    home.write_markers({"s1": marker_entry()})
    engine = CoreEngine([str(home.path)])
    turns, _problems, _extra = engine.scan(discover_homes(explicit=[str(home.path)]))
    assert [t.session_key for t in turns] == ["s1"]
    tried = _full_disk(monkeypatch)

    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(records=tuple(turns)))
    messages: list[str] = []
    ctrl.message.connect(messages.append)
    key = ctrl.state.pending[0].key
    with qtbot.waitSignal(ctrl.skip_done, timeout=5000) as done:
        assert ctrl.skip(key) is True
    assert done.args == [key, True]
    assert messages == [], "a skip that happened must not be reported as 'could not skip'"
    assert not home.marker_file.exists() or "s1" not in home.read_markers()
    assert tried == ["skipped"]  # it was tried, and failed


class _SpyEngine(CoreEngine):
    """The real engine (real ledger, real settings) with resume recorded instead of run."""

    def __init__(self, homes) -> None:
        super().__init__(homes)
        self.resumed: list[tuple[str, float]] = []

    def resume(self, record, *, origin, on_progress, stop):
        from hermes_tray.contract import Outcome, RunResult

        self.resumed.append((record.session_key, record.started_at))
        return RunResult(Outcome.COMPLETED, "done")


def test_auto_mode_never_resumes_a_turn_the_ledger_has_answered(qtbot, tmp_path: Path) -> None:
    from hermes_tray_core.stores.settings import update_settings

    update_settings({"mode": "auto"})
    home = FixtureHome(tmp_path / "hermes")
    for sid in ("done", "asked", "fresh"):
        home.add_session(sid, title=sid)
    home.write_markers({sid: marker_entry() for sid in ("done", "asked", "fresh")})
    engine = _SpyEngine([str(home.path)])
    turns, _p, _e = engine.scan(discover_homes(explicit=[str(home.path)]))
    by_key = {t.session_key: t for t in turns}
    # an earlier tray (before a restart) resumed "done" to completion, and asked about "asked"
    book = ledger()
    book.record("approved", by_key["done"].turn.ident, via="auto")
    book.record("completed", by_key["done"].turn.ident)
    book.record("notified", by_key["asked"].turn.ident, via="desktop-notifier")

    ctrl = Controller(engine, RecordingNotifier())
    ctrl.on_scan(ScanReport(records=tuple(turns)))
    qtbot.waitUntil(lambda: bool(engine.resumed), timeout=2000)
    qtbot.wait(100)
    assert [k for k, _s in engine.resumed] == ["fresh"]
    qtbot.waitUntil(lambda: not ctrl.state.running, timeout=2000)


_HOLD_CLAIM = """
import sys, time
from hermes_tray_core.stores.lease import LeaseStore
from hermes_tray_core.stores.paths import ledger_db
from hermes_tray_core.continuing.claim import claim_name
lease = LeaseStore(ledger_db()).acquire(claim_name(sys.argv[1], sys.argv[2]), "pid=0:via=tray-auto", ttl=60, wait=0)
print("held" if lease else "not-held", flush=True)
time.sleep(60)
"""


def test_losing_the_resume_claim_to_another_process_is_silent_in_auto_mode(qtbot, tmp_path: Path) -> None:
    """Tray and helper both in auto mode: the one that loses the claim says nothing to the user
    (the winner reports the outcome); the refusal is in the ledger and the log."""
    import subprocess
    import sys

    from hermes_tray_core.stores.settings import update_settings

    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="Contested")
    home.write_markers({"s1": marker_entry()})
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_CLAIM, str(home.path), "s1"],
                              stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        engine = CoreEngine([str(home.path)])
        turns, _p, _e = engine.scan(discover_homes(explicit=[str(home.path)]))
        for mode, origin_silent in (("auto", True), ("ask", False)):
            update_settings({"mode": mode})
            notes = RecordingNotifier()
            ctrl = Controller(engine, notes)
            ctrl.on_scan(ScanReport(records=tuple(turns)))
            key = ctrl.state.pending[0].key if mode == "ask" else next(iter(ctrl.model.records))
            if mode == "ask":
                notes.shown.clear()
                ctrl.resume(key, origin="menu")
            with qtbot.waitSignal(ctrl.rescan_requested, timeout=10000):
                pass
            outcome_notes = [n for n in notes.shown if n.key.startswith("outcome-")]
            if origin_silent:
                assert outcome_notes == [], "the loser of the claim must not report a failure"
            else:
                assert outcome_notes and outcome_notes[-1].title == "Turn not resumed"
        # core.continuing.resume records the refusal (about the turn as it was shown)
        assert any(e.get("event") == "refused" and e.get("session_key") == "s1" for e in ledger().history(50))
    finally:
        holder.kill()
        holder.wait()
