"""The policy table: every scheduling case of Hermes' test_auto_continue.py, plus the order rules."""

from __future__ import annotations

import pytest

from hermes_tray_core.policy import VERDICTS, AutoContinueConfig, decide

NOW = 1_800_000_000.0
DEFAULT = AutoContinueConfig()


def marker(**over):
    entry = {"attempts": 0, "prompt": "fix the flaky test", "started_at": NOW - 10, "auto_continue": True,
             "writer_pid": 4242, "writer_start_time": 1.0}
    entry.update(over)
    return entry


# (id, marker, kwargs, expected verdict, words the reason must contain)
CASES = [
    # Hermes: test_fresh_marker_schedules_continuation
    ("fresh-dead-writer", marker(), {}, "actionable", "continuation 1 of 2"),
    # Hermes: test_hosted_room_marker_is_left_to_the_driver
    ("hosted-bot-room", marker(), {"source": "bot_room"}, "not-ours", "bot_room"),
    # Hermes: test_stale_marker_is_cleared_not_continued (clock +3600 s, default 15 min window)
    ("stale-default-window", marker(started_at=NOW - 3600), {}, "stale", "15 min"),
    # Hermes: test_config_widens_freshness_window (120 min window, +3600 s)
    ("widened-window", marker(started_at=NOW - 3600),
     {"config": AutoContinueConfig(freshness_minutes=120)}, "actionable", "continuation 1"),
    # Hermes: test_exhausted_attempts_break_the_loop
    ("exhausted-at-budget", marker(attempts=2), {}, "exhausted", "budget is 2"),
    ("one-attempt-left", marker(attempts=1), {}, "actionable", "continuation 2 of 2"),
    # Hermes: test_disabled_by_config
    ("disabled", marker(), {"config": AutoContinueConfig(enabled=False)}, "disabled", "disabled"),
    # Hermes: test_no_marker_means_no_continuation (read_turn_marker drops prompt-less entries)
    ("no-prompt", marker(prompt=""), {}, "not-ours", "no prompt"),
    ("whitespace-prompt", marker(prompt="  \n"), {}, "not-ours", "no prompt"),
    ("queued-variant", marker(prompt="", queued=True), {}, "not-ours", "queued"),
    # Hermes: test_running_session_wins_over_continuation (here: a live lease / live owner)
    ("live-lease", marker(), {"lease": "live", "activity_detail": "holder pid=77"}, "running", "pid=77"),
    ("live-owner", marker(), {"owner": "alive"}, "running", "live Hermes process"),
    # Hermes: test_second_backend_defers_to_a_live_marker_writer (alive, then dead)
    ("live-writer", marker(), {"writer": "alive"}, "running", "pid 4242"),
    # Hermes: test_marker_writer_state_rejects_a_recycled_pid (recycled pid reads dead)
    ("recycled-pid-is-dead", marker(), {"writer": "dead"}, "actionable", "continuation 1"),
    # auto_continue false: another mechanism owns recovery
    ("auto-continue-false", marker(auto_continue=False), {"writer": "alive"}, "not-ours", "auto_continue is off"),
    # unknown writer: Hermes leaves the marker alone, and we say so
    ("unknown-writer", marker(), {"writer": "unknown"}, "running", "as Hermes does when unsure"),
    ("pidless-old-backend", marker(writer_pid=None), {"writer": "unknown"}, "running", "older backend"),
    ("unknown-writer-beats-stale", marker(started_at=NOW - 7200), {"writer": "unknown"}, "running", "unsure"),
    # writer dead but lease/owner unreadable: never actionable while unsure
    ("unknown-lease", marker(), {"lease": "unknown"}, "running", "cannot read"),
    ("unknown-owner", marker(), {"owner": "unknown"}, "running", "owner process"),
    ("unknown-lease-but-stale", marker(started_at=NOW - 7200), {"lease": "unknown"}, "stale", "freshness"),
    ("unknown-lease-but-disabled", marker(), {"lease": "unknown", "config": AutoContinueConfig(enabled=False)},
     "disabled", "disabled"),
    # order: first match wins
    ("not-ours-beats-running", marker(auto_continue=False), {"lease": "live"}, "not-ours", "auto_continue"),
    ("running-beats-disabled", marker(), {"writer": "alive", "config": AutoContinueConfig(enabled=False)},
     "running", "still running"),
    ("disabled-beats-stale", marker(started_at=NOW - 7200), {"config": AutoContinueConfig(enabled=False)},
     "disabled", "disabled"),
    ("stale-beats-exhausted", marker(started_at=NOW - 7200, attempts=5), {}, "stale", "ago"),
    # interrupted_at (newer variant) restarts the freshness window
    ("interrupted-at-fresh", marker(started_at=NOW - 7200, interrupted_at=NOW - 60, interrupted_by="shutdown"),
     {}, "actionable", "60 s ago"),
    ("interrupted-at-stale", marker(started_at=NOW - 60, interrupted_at=NOW - 7200), {}, "stale", "interrupted"),
    ("zero-budget", marker(), {"config": AutoContinueConfig(max_attempts=0)}, "exhausted", "budget is 0"),
    ("malformed-attempts", marker(attempts="many"), {}, "not-ours", "malformed"),
    ("malformed-started-at", marker(started_at="yesterday"), {}, "not-ours", "malformed"),
    ("diagnostic-is-still-a-turn", marker(notification_category="diagnostic"), {}, "actionable", "continuation"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_policy_table(case):
    _id, entry, kwargs, expected, words = case
    kwargs = {"config": DEFAULT, "writer": "dead", "now": NOW, **kwargs}
    decision = decide(entry, **kwargs)
    assert decision.verdict == expected, decision.reason
    assert words in decision.reason
    assert "\n" not in decision.reason and len(decision.reason) < 160
    assert decision.actionable == (expected == "actionable")


def test_every_verdict_is_reachable_and_unsure_is_never_actionable():
    seen = set()
    for _id, entry, kwargs, _expected, _words in CASES:
        d = decide(entry, **{"config": DEFAULT, "writer": "dead", "now": NOW, **kwargs})
        seen.add(d.verdict)
        if d.unsure:
            assert d.verdict != "actionable"
    assert seen == set(VERDICTS)


def test_reason_never_contains_the_prompt():
    secret = "my password is hunter2"
    for writer in ("alive", "dead", "unknown"):
        d = decide(marker(prompt=secret), config=DEFAULT, writer=writer, now=NOW)
        assert "hunter2" not in d.reason


def test_freshness_boundary_is_inclusive():
    at_edge = marker(started_at=NOW - 15 * 60)
    assert decide(at_edge, config=DEFAULT, writer="dead", now=NOW).verdict == "actionable"
    assert decide(at_edge, config=DEFAULT, writer="dead", now=NOW + 1).verdict == "stale"
