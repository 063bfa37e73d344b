"""The last failed continuation is ONE notification with accurate words, and its gateway log holds
what the gateway said. Before: two notifications 3 ms apart that contradicted each other ("can be
continued again" / "after 2 automatic continuations" for two manual resumes) and an empty log.

Real tray, real notification server (the recorder), the demo's simulated Hermes crashing mid-turn.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import start_tray, wait_for


@pytest.fixture
def demo(tmp_path, monkeypatch):
    from hermes_tray.demo.home import create_demo
    from hermes_tray.demo.sim_backend import write_control

    d = create_demo(tmp_path / "demo", die_after=None, continuation_seconds=1.0)
    write_control(d.home, turn_seconds=1.0, die_mid_turn=True)  # every continuation crashes too
    for k, v in d.env.items():
        monkeypatch.setenv(k, v)
    yield d
    d.cleanup()


def _notes(desktop, after: float) -> list[dict]:
    return [n for n in desktop.notifications() if n["time"] >= after and n["app_name"] == "Hermes Tray"]


def test_two_failed_continuations_end_in_one_gave_up_note(desktop, demo, tmp_path) -> None:
    tray = start_tray(desktop, demo, tmp_path)

    def seen() -> str:
        notes = [(n["summary"], n["body"][:120]) for n in _notes(desktop, 0)]
        stderr = (tmp_path / "tray.stderr").read_text(errors="replace")[-1500:]
        return f"notifications {notes}; tray events {tray.events()[-8:]}; tray stderr {stderr!r}"

    try:
        tray.wait_event(lambda e: e["event"] == "tray-shown", what="tray icon")
        start = time.time()
        assert demo.crash_backend()
        (asked,) = wait_for(lambda: [n for n in _notes(desktop, start) if n["summary"].startswith("Interrupted: ")],
                            10, "interrupted notification", seen)
        desktop.click_action(asked["id"], "resume")  # attempt 1: crashes mid-turn
        (again,) = wait_for(lambda: [n for n in _notes(desktop, start) if n["summary"].startswith("Interrupted again: ")],
                            60, "failed-again notification (the ask, with its buttons)", seen)
        assert again["actions"].get("resume") == "Resume" and "Hermes exited before it finished." in again["body"]
        second = time.time()
        desktop.click_action(again["id"], "resume")  # attempt 2 of 2: crashes again
        (gave_up,) = wait_for(lambda: [n for n in _notes(desktop, second) if n["summary"] == "Hermes gave up on a turn"],
                              60, "gave-up notification", seen)
        time.sleep(1.0)  # anything else about this turn would have arrived by now
        after = [n["summary"] for n in _notes(desktop, second)]
        assert after == ["Hermes gave up on a turn"], after  # one notification, not two
        body = gave_up["body"]
        assert "Gave up after 2 tries" in body and "Finish it in Hermes by hand" in body
        assert "automatic" not in body and "can be continued again" not in body
        assert gave_up["hints"]["urgency"] == 2 and "gave-up" in gave_up["app_icon"]
    finally:
        assert tray.stop() == 0
    logs = sorted((Path(demo.env["HERMES_TRAY_LOG_DIR"]) / "gateway").glob("*.log"))
    assert len(logs) == 2, logs  # one per continuation
    for log in logs:  # the gateway's stderr, not an empty file
        text = log.read_text(errors="replace")
        assert "simulated crash: SIGKILL mid-turn" in text and "request session.resume" in text, log
