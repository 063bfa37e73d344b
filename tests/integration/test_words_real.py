"""History after a real continuation: one row per interrupted turn, whatever runs its continuations.

The real ``hermes dashboard`` (hermes-agent 0.19.0, no auto-continue) on a random loopback port and the mock
model: the tray continues the turn inside it and keeps a marker of its own for that run (a new
``started_at``), journalled as ``continuing``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from real_dashboard import running_dashboard
from real_session import SEED_PROMPT

from tests.support.product import product_env, tray_argv
from tests.support.sim_homes import plant_marker, settings_for

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX process table")


def test_a_resume_inside_the_real_dashboard_is_one_history_row(real_home, mock_llm, hermes_python: Path,
                                                                 user_dirs: dict[str, str], qtbot) -> None:
    """Issue 25.1. Before: after one Resume that ran inside the real dashboard and finished, History showed
    "2 interrupted turns": the real one and a phantom "running" row holding only the ``continuing`` event,
    stamped with the continuation's own start."""
    from hermes_tray.app.history_window import HistoryWindow
    from hermes_tray_core import decisions

    home, key = real_home
    settings_for(str(hermes_python), Path(user_dirs["HERMES_TRAY_CONFIG_DIR"]))
    with running_dashboard(hermes_python, home) as (dash, _port):
        plant_marker(home, key, SEED_PROMPT)
        p = subprocess.run(tray_argv("resume", key, "--home", home, "--wait", "--json"), env=product_env(),
                           capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["outcome"] == "completed" and result["ran_in"] == "running-backend"
    assert result["backend_pid"] == dash.pid
    events = [e for e in reversed(decisions.history(500)) if e.get("session_key") == key]
    names = [e["event"] for e in events]
    assert "continuing" in names and names[-1] == "completed", names
    assert len({e["started_at"] for e in events}) == 2, "the continuation's marker has a start of its own"

    win = HistoryWindow(lambda: decisions.history(500))
    qtbot.addWidget(win)
    assert win.tree.topLevelItemCount() == 1
    assert win.summary.text().startswith("1 interrupted turn")
    row = win.selected_turn()
    assert row is not None and row.session_key == key
    assert [str(e["event"]) for e in row.events] == names  # every event of the turn, in its row
    assert row.started_at == min(e["started_at"] for e in events)  # interrupted when the first run was
    assert row.outcome() == "resumed and finished"
