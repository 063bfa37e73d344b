"""What the command line says about turns is private, true, and in the tray's own words.

- ``show_prompts = false`` hides a title Hermes made of the prompt (``state.db`` ``title_source = 'derived'``) in
  ``status`` and ``status --json``, as it hides the prompt; a title a model or the user gave stays.
- ``status`` names turns as the menu and the notes do (alike ones by the part that differs), says when each was
  interrupted only when that is known, shows a reminder, and counts as resumable only what ``resume`` would take.
- A read-only home is said to be read-only, in one clean line, by ``skip``, ``disable``, ``config set`` and
  ``doctor``; ``history`` never says "Stopped" of the tray quitting, nor "You chose Resume" of auto mode.

Real homes (a real SQLite ``state.db`` laid out as Hermes 0.22 lays it out), the installed command in a child
process, a directory made read-only for real (``tests/support/readonly.py``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.support.fixture_homes import FixtureHome, env_for, gone_writer, marker_entry

LANDLORD = "SLOW: email my landlord about the broken boiler and ask when he can come"
SHARED = "Please refactor the configuration parser so that unknown keys warn instead of failing, and"
assert len(SHARED) > 80  # three prompts that share them read alike within any name's width


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], env=env_for(tmp_path), capture_output=True,
                          text=True, timeout=120)


def status(tmp_path: Path, home: FixtureHome) -> tuple[str, dict]:
    out = cli(tmp_path, "status", "--home", str(home.path))
    assert out.returncode == 0, out.stderr
    doc = cli(tmp_path, "status", "--json", "--home", str(home.path))
    return out.stdout, json.loads(doc.stdout)


def test_show_prompts_off_hides_a_title_hermes_made_of_the_prompt_in_status_and_its_json(tmp_path):
    now = time.time()
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s-derived", title=LANDLORD[:48], title_source="derived")  # Hermes 0.22's instant title
    home.add_session("s-named", title="Quarterly report", title_source="llm")
    home.write_markers({"s-derived": marker_entry(LANDLORD, started_at=now - 60, writer=gone_writer()),
                        "s-named": marker_entry("Summarise the Q3 numbers for the board", started_at=now - 30,
                                                writer=gone_writer())})
    home.close()
    shown, doc = status(tmp_path, home)
    assert "SLOW: email my landlord" in shown
    assert {t["session_key"]: t["title"] for t in doc["turns"]} == {"s-derived": LANDLORD[:48],
                                                                    "s-named": "Quarterly report"}

    assert cli(tmp_path, "config", "set", "show_prompts", "false").returncode == 0
    hidden, doc = status(tmp_path, home)
    for words in ("landlord", "boiler", "Q3 numbers"):
        assert words not in hidden and words not in json.dumps(doc), words
    turns = {t["session_key"]: t for t in doc["turns"]}
    assert turns["s-derived"]["title"] is None and turns["s-derived"]["prompt_excerpt"] is None
    assert turns["s-named"]["title"] == "Quarterly report" and turns["s-named"]["prompt_excerpt"] is None
    row = next(ln for ln in hidden.splitlines() if " s-derived " in ln)
    started = time.strftime("%H:%M", time.localtime(now - 60))
    assert row.rstrip().endswith(f"s-derived  Turn started {started}"), row  # its time names it, not its words
    assert "Quarterly report" in next(ln for ln in hidden.splitlines() if " s-named " in ln)


def test_status_names_alike_turns_by_the_part_that_differs_as_the_menu_does(tmp_path):
    from hermes_tray.notify.coalesce import turn_names
    from hermes_tray_core import Scanner, discover_homes

    now = time.time()
    home = FixtureHome(tmp_path / "hermes")
    endings = ("then run the tests", "then update the docs", "then open a pull request")
    home.write_markers({f"s{i}": marker_entry(f"{SHARED} {end}", started_at=now - 10 * (i + 1), writer=gone_writer())
                        for i, end in enumerate(endings)})
    shown, _doc = status(tmp_path, home)
    what = {f"s{i}": next(ln for ln in shown.splitlines() if f" s{i} " in ln).split(f" s{i} ", 1)[1].strip()
            for i in range(3)}
    assert len(set(what.values())) == 3, what  # before: three times "Please refactor the configuration parser…"
    for i, end in enumerate(endings):
        assert end.split()[-1] in what[f"s{i}"], what
    records = Scanner(discover_homes(explicit=[str(home.path)])).scan().turns
    assert sorted(what.values()) == sorted(turn_names(records, show_prompts=True))  # the menu's names, one rule


def test_status_says_interrupted_only_of_a_known_moment_and_shows_a_reminder(tmp_path):
    from tests.support import book

    now = time.time()
    home = FixtureHome(tmp_path / "hermes")
    home.write_markers({"s-seen": marker_entry("fix the flaky test", started_at=now - 2400, writer=gone_writer()),
                        "s-hermes": marker_entry("tidy", started_at=now - 2400, writer=gone_writer())
                        | {"interrupted_at": now - 120},
                        "s-started": marker_entry("write notes", started_at=now - 300, writer=gone_writer())})
    home.write_config("desktop:\n  auto_continue:\n    freshness_minutes: 60\n")
    home.close()
    # the tray saw s-seen's Hermes end 9 s ago (its witness records that moment)
    book.record("stopped", home=str(home.path), session_key="s-seen", started_at=now - 2400, attempts=0, pid=4242)
    assert cli(tmp_path, "snooze", "s-started", "--home", str(home.path), "--for", "2h").returncode == 0
    shown, doc = status(tmp_path, home)
    rows = {k: next(ln for ln in shown.splitlines() if f" {k} " in ln) for k in ("s-seen", "s-hermes", "s-started")}
    assert re.search(r"\binterrupted \d+ s ago\b", rows["s-seen"]), rows  # not "40 min ago", its start
    assert "interrupted 2 min ago" in rows["s-hermes"]
    assert "started 5 min ago" in rows["s-started"] and "interrupted" not in rows["s-started"]
    at = time.strftime("%H:%M", time.localtime(now + 7200))
    today = time.localtime(now + 7200).tm_yday == time.localtime(now).tm_yday
    assert (f"    reminder at {at}" if today else "    reminder ") in shown
    turns = {t["session_key"]: t for t in doc["turns"]}
    assert turns["s-started"]["reminder_at"] is not None and abs(turns["s-started"]["reminder_at"] - now - 7200) < 60
    assert turns["s-seen"]["reminder_at"] is None and turns["s-seen"]["interrupted_at"] is not None
    assert turns["s-hermes"]["interrupted_at"] == now - 120 and turns["s-started"]["interrupted_at"] is None


def test_a_read_only_home_is_said_read_only_in_one_clean_line_and_its_turns_are_not_counted_resumable(tmp_path):
    from tests.support.readonly import read_only

    now = time.time()
    home = FixtureHome(tmp_path / "hermes")
    home.write_config("model: {}\n")
    home.write_markers({"s1": marker_entry("fix it", started_at=now - 30, writer=gone_writer())})
    home.close()
    with read_only(home.path):
        shown, _doc = status(tmp_path, home)
        assert "turns can be resumed" not in shown and "1 turn can be resumed" not in shown
        assert "nothing to resume right now" in shown
        assert "cannot be resumed now: Hermes cannot write in " in shown
        resume = cli(tmp_path, "resume", "s1", "--home", str(home.path))
        assert resume.returncode == 1 and "Hermes cannot write in" in resume.stderr  # what status said, resume does
        for args in (("skip", "s1"), ("disable",), ("config", "set", "enabled", "false")):
            out = cli(tmp_path, *args, "--home", str(home.path))
            assert out.returncode == 1, out
            lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
            assert len(lines) == 1, (args, lines)
            for internal in ("Errno", ".tmp", ".lock", "Traceback"):
                assert internal not in lines[0], (args, lines)
            assert "read-only" in lines[0] or "permission" in lines[0], (args, lines)
        doctor = cli(tmp_path, "doctor", "--home", str(home.path)).stdout
        assert "marker writes: none, the home is read-only" in doctor
        assert f"{home.path} is read-only: " in doctor and "cannot swap two files" not in doctor
        assert "(s)" not in doctor


def test_history_says_who_ended_a_run_and_that_auto_mode_resumed_it(tmp_path):
    from tests.support import book as journal

    home = str(tmp_path / "hermes")
    for key, via, by in (("s-quit", "tray-menu", "shutdown"), ("s-stop", "tray-window", "you"),
                         ("s-auto", "tray-auto", "hermes")):
        journal.record("approved", home=home, session_key=key, started_at=100.0, attempts=0, via=via)
        journal.record("interrupted", home=home, session_key=key, started_at=100.0, attempts=0, attempt=1,
                       stopped_by=by, dispatched=True)
    lines = cli(tmp_path, "history").stdout.splitlines()

    def said(key: str, event: str) -> str:
        return next(ln for ln in lines if f" {key}" in ln and event in ln)

    assert said("s-quit", "Left waiting: the tray quit")
    assert said("s-stop", "Stopped by you")
    assert said("s-auto", "Resumed automatically") and said("s-auto", "Interrupted again in Hermes")
    assert not [ln for ln in lines if "s-quit" in ln and "Stopped" in ln]  # a quit is never the user's Stop
    assert not [ln for ln in lines if "s-auto" in ln and "You chose Resume" in ln]
    assert said("s-quit", "You chose Resume")  # chosen from the menu: that one was the user's
