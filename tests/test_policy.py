"""The policy table: every scheduling case of Hermes' test_auto_continue.py, plus the order rules."""

from __future__ import annotations

import pytest

from hermes_tray_core.deciding import policy
from hermes_tray_core.deciding.policy import VERDICTS, AutoContinueConfig, Seen
from hermes_tray_core.turn import Marker

NOW = 1_800_000_000.0
DEFAULT = AutoContinueConfig()


def decide(entry, *, config, now, **seen):
    """The policy on a raw entry, as the scanner calls it: the entry typed, what else was seen bundled."""
    return policy.decide(Marker.read(entry), config=config, now=now, seen=Seen(**seen))


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
    # unknown writer (no writer_pid, as older backends write; junk pids): Hermes' scheduler blocks only
    # "alive", so it falls through to the disabled / stale / exhausted / continue checks ...
    ("unknown-writer", marker(), {"writer": "unknown"}, "actionable", "continuation 1 of 2"),
    ("pidless-old-backend", marker(writer_pid=None), {"writer": "unknown"}, "actionable", "older backend"),
    ("unknown-writer-stale", marker(started_at=NOW - 7200), {"writer": "unknown"}, "stale", "freshness"),
    ("unknown-writer-exhausted", marker(attempts=2, writer_pid=None), {"writer": "unknown"}, "exhausted", "budget"),
    ("unknown-writer-disabled", marker(writer_pid=None), {"writer": "unknown",
                                                          "config": AutoContinueConfig(enabled=False)},
     "disabled", "disabled"),
    # ... unless the tray sees a live Hermes process serving the home: then it may be running there.
    ("unknown-writer-live-backend", marker(writer_pid=None),
     {"writer": "unknown", "backend": "live", "backend_detail": "pid 77 (hermes dashboard)"},
     "running", "pid 77 (hermes dashboard)"),
    ("unknown-writer-live-backend-beats-stale", marker(writer_pid=None, started_at=NOW - 7200),
     {"writer": "unknown", "backend": "live", "backend_detail": "pid 77 (hermes chat)"}, "running", "pid 77"),
    ("unknown-writer-unreadable-processes", marker(writer_pid="junk"),
     {"writer": "unknown", "backend": "unknown"}, "running", "cannot be read"),
    ("dead-writer-ignores-live-backend", marker(), {"backend": "live", "backend_detail": "pid 77"},
     "actionable", "continuation 1"),
    ("unknown-writer-live-lease", marker(writer_pid=None), {"writer": "unknown", "lease": "live"},
     "running", "turn lease"),
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
     {}, "actionable", "interrupted 1 min ago"),
    ("interrupted-at-stale", marker(started_at=NOW - 60, interrupted_at=NOW - 7200), {}, "stale", "interrupted"),
    ("zero-budget", marker(), {"config": AutoContinueConfig(max_attempts=0)}, "exhausted", "budget is 0"),
    ("malformed-attempts", marker(attempts="many"), {}, "not-ours", "malformed"),
    # attempts as Hermes counts them: max(0, int(attempts or 0))
    ("negative-attempts", marker(attempts=-3), {"config": AutoContinueConfig(max_attempts=1)},
     "actionable", "continuation 1 of 1"),
    ("float-attempts", marker(attempts=1.9), {}, "actionable", "continuation 2 of 2"),
    ("string-attempts", marker(attempts=" 1 "), {}, "actionable", "continuation 2 of 2"),
    ("bool-attempts", marker(attempts=True), {}, "actionable", "continuation 2 of 2"),
    ("huge-attempts", marker(attempts=10**400), {}, "exhausted", "budget is 2"),
    ("float-string-attempts", marker(attempts="1.0"), {}, "not-ours", "malformed"),
    ("infinite-attempts", marker(attempts=float("inf")), {}, "not-ours", "malformed"),
    ("huge-started-at", marker(started_at=10**400), {}, "not-ours", "malformed"),
    # only when it started is known: said of its start, never "interrupted" (Hermes' freshness still counts from it)
    ("string-started-at", marker(started_at=str(NOW - 60)), {}, "actionable", "started 1 min ago"),
    ("hermes-interrupted-at", marker(started_at=NOW - 600, interrupted_at=NOW - 60), {}, "actionable",
     "interrupted 1 min ago"),
    ("negative-interrupted-at", marker(started_at=NOW - 30, interrupted_at=-5), {}, "actionable", "30 s ago"),
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


# ── hostile numbers: never raise, always a verdict, and the age a reason states is the age reported ──

import math  # noqa: E402
import re  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hermes_tray_core.deciding.policy import age_text, marker_age  # noqa: E402

HOSTILE = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=10**300, max_value=10**400), st.integers(max_value=-1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), -5, 0, -0.0, 1e308, -1e308]),
    st.text(max_size=12), st.sampled_from(["1", " 2 ", "1.0", "1e400", "nan", "inf", "-7", "1_0", "", "0x10"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
NUMERIC_FIELDS = ("attempts", "started_at", "interrupted_at", "writer_pid", "writer_start_time")
_AGE = re.compile(r"(?:interrupted|started) (\d+ (?:s|min|h|days) ago)")


def agrees(decision) -> bool:
    """The age a reason states is exactly the formatted ``age_seconds`` (when the reason states one)."""
    m = _AGE.search(decision.reason)
    return m is None or m.group(1) == age_text(decision.age_seconds)


@settings(max_examples=400, deadline=None)
@given(field=st.sampled_from(NUMERIC_FIELDS), value=HOSTILE, writer=st.sampled_from(["alive", "dead", "unknown"]),
       backend=st.sampled_from(["none", "live", "unknown"]), fresh=st.sampled_from([0, 15, 1e9]),
       budget=st.sampled_from([0, 2, 2**53]))
def test_hostile_numbers_never_raise_and_age_agrees_with_reason(field, value, writer, backend, fresh, budget):
    entry = marker(**{field: value})
    config = AutoContinueConfig(freshness_minutes=fresh, max_attempts=budget)
    d = decide(entry, config=config, writer=writer, now=NOW, backend=backend)
    assert d.verdict in VERDICTS and d.code is not None
    assert "\n" not in d.reason and len(d.reason) < 200
    assert math.isfinite(d.age_seconds) and d.age_seconds >= 0
    assert agrees(d), (d.reason, d.age_seconds)
    assert d.age_seconds == marker_age(Marker.read(entry), NOW)
    if d.unsure:
        assert d.verdict != "actionable"


@settings(max_examples=200, deadline=None)
@given(started=HOSTILE, pid=HOSTILE, worker=st.sampled_from(["alive", "dead", "unknown"]),
       server=st.sampled_from(["none", "live", "unknown"]), pending=st.integers(min_value=1, max_value=5))
def test_webui_verdicts_never_raise_and_age_agrees_with_reason(started, pid, worker, server, pending):
    from hermes_tray_core.deciding.policy import decide_webui

    d = decide_webui({"started_at": started, "pid": pid}, worker=worker, now=NOW, server=server,
                     server_detail="pid 9", pending_turns=pending)
    assert d.verdict in VERDICTS and d.code is not None and "\n" not in d.reason and len(d.reason) < 200
    assert math.isfinite(d.age_seconds) and d.age_seconds >= 0
    m = re.search(r"interrupted (\d+ (?:s|min|h|days) ago)", d.reason)
    assert m is None or m.group(1) == age_text(d.age_seconds)
    assert (d.verdict == "running") == (worker == "alive" or (worker == "unknown" and server != "none"))
