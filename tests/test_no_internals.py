"""No internals where users read: every sentence the command line and the windows can print, checked for
errno text, exception class names, temp-file names, library names, raw floats and timing keys.

Before: "turn-marker file is corrupt (JSONDecodeError)", "[Errno 22] …", "[Errno 30] Read-only file system:
'…/.config.yaml.14114.ef9ac8ca.tmp'", ``history`` printing ``started_at=1796389916.12 · t_active_list=0.003``,
History saying "via desktop-notifier", a malformed entry shown "20791 days ago" with a number as its prompt.
Those belong to the log and ``--json``; the human text says what happened and what to do.

The sentences are collected, not listed by hand: every string of :mod:`hermes_tray.words` (its catalogue and
History's event words), and what each command prints (stdout and stderr, without ``--json``) over a set of
states built on disk: no home; a home with waiting, held, running, stale and exhausted turns; a corrupt marker
file, one whose top level is not an object, one that is a directory; malformed entries; a config.yaml that is
not YAML and one that is a directory; a state.db that is not SQLite; tray settings that are not TOML; a journal
holding a run's timings; a home on a read-only file system (a read-only bind mount, where this user may mount).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fixture_homes import FixtureHome, marker_entry, own_writer
from tests.support.word_catalogue import catalogue

INTERNALS = (
    ("errno", re.compile(r"errno", re.I)),
    ("exception class", re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|Traceback")),
    ("temp file", re.compile(r"\.tmp\b|\.[0-9a-f]{8}\.tmp")),
    ("library", re.compile(r"desktop[-_]notifier|dbus[-_]fast|jeepney|ruamel|psutil|PySide6", re.I)),
    ("raw float", re.compile(r"(?<![\w.])\d+\.\d{3,}(?![\w.])|(?<![\w.])\d{9,}(?:\.\d+)?(?![\w.])")),
    ("timing key", re.compile(r"(?<![\w.])t_[a-z_]+\b")),
    ("python repr", re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|'\}")),
    ("impossible age", re.compile(r"\d{4,} days ago")),
)


def internals(text: str) -> list[str]:
    return [f"{name}: {m.group(0)!r}" for name, rx in INTERNALS for m in rx.finditer(text)]


def test_the_check_catches_what_the_issue_quoted() -> None:
    for said in ("turn-marker file is corrupt (JSONDecodeError)", "[Errno 22] Invalid argument",
                 "[Errno 30] Read-only file system: '/h/.config.yaml.14114.ef9ac8ca.tmp'",
                 "dispatched s1 · started_at=1796389916.12 · t_active_list=0.003", "via desktop-notifier",
                 "stale  20791 days ago  0  unknown  s-num  12345"):
        assert internals(said), said
    for fine in ("Hermes 0.22.2.post1", "pid 4242", "interrupted 4 min ago", "2026-12-03 14:02:05",
                 "session 20261203_140205_ab12cd", "freshness_minutes = 15", "continuation_idle_timeout = 600"):
        assert not internals(fine), fine


# -- the states -------------------------------------------------------------------------------------------------

def _turns(home: FixtureHome) -> None:
    now = time.time()
    home.add_session("s-wait", title="Fix the flaky test")
    home.add_session("s-untitled")
    home.write_markers({
        "s-wait": marker_entry("make test_upload stop timing out on CI", started_at=now - 90),
        "s-untitled": marker_entry("refactor the parser", started_at=now - 30),
        "s-live": marker_entry("still going", writer=own_writer()),
        "s-old": marker_entry("ancient", started_at=now - 5 * 3600),
        "s-spent": marker_entry("tried twice", attempts=2, started_at=now - 60),
        "s-hermes": marker_entry("its own", auto_continue=False),
    })
    home.close()


def _malformed(home: FixtureHome) -> None:
    home.write_markers({"s-num": {"prompt": 12345, "started_at": 0, "attempts": 0, "auto_continue": True},
                        "s-str": {"prompt": "x", "started_at": "yesterday", "attempts": "two"},
                        "s-neg": {"prompt": "y", "started_at": -1e300, "attempts": -3}})


def _corrupt(home: FixtureHome) -> None:
    home.marker_file.parent.mkdir(parents=True)
    home.marker_file.write_text("{not json")


def _not_an_object(home: FixtureHome) -> None:
    home.marker_file.parent.mkdir(parents=True)
    home.marker_file.write_text("[1, 2]")


def _marker_dir(home: FixtureHome) -> None:
    home.marker_file.mkdir(parents=True)


def _bad_yaml(home: FixtureHome) -> None:
    _turns(home)
    home.write_config("desktop: [unclosed\n  auto_continue: {")


def _config_dir(home: FixtureHome) -> None:
    (home.path / "config.yaml").mkdir()


def _bad_state_db(home: FixtureHome) -> None:
    home.write_markers({"s-wait": marker_entry("x")})
    (home.path / "state.db").write_bytes(b"this is not sqlite" * 100)


def _bad_settings(home: FixtureHome) -> None:
    _turns(home)
    path = Path(os.environ["HERMES_TRAY_CONFIG_DIR"]) / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("mode = [unclosed\n")


def _journal_with_timings(home: FixtureHome) -> None:
    from tests.support import book

    _turns(home)
    t0 = time.time() - 600
    d = book
    d.record("notified", home=str(home.path), session_key="s-wait", started_at=t0 + 0.123456, via="desktop-notifier")
    d.record("approved", home=str(home.path), session_key="s-wait", started_at=t0 + 0.123456, via="tray-menu")
    d.record("dispatched", home=str(home.path), session_key="s-wait", started_at=t0 + 0.123456, attempt=1,
             ran_in="running-backend", backend_pid=4242, t_find_backend=0.016, t_active_list=0.003, t_resume=0.079)
    d.record("completed", home=str(home.path), session_key="s-wait", started_at=t0 + 0.123456,
             where="in your running Hermes (pid 4242)", t_first_frame=1.25)
    d.record_config_change(home=str(home.path), key="freshness_minutes", old=15, new=30.5, by="cli")


STATES = {"no home": None, "turns": _turns, "malformed entries": _malformed, "corrupt markers": _corrupt,
          "markers not an object": _not_an_object, "markers a directory": _marker_dir, "config not YAML": _bad_yaml,
          "config a directory": _config_dir, "state.db not SQLite": _bad_state_db, "settings not TOML": _bad_settings,
          "journal with timings": _journal_with_timings}

#: every command, as a user would type it (``{home}`` is the state's home)
COMMANDS = (
    ("status",), ("doctor",), ("history",), ("history", "--session", "s-wait"), ("config", "show"),
    ("config", "get", "enabled"), ("config", "get", "mode"),
    ("config", "set", "continuation_idle_timeout", "0"), ("config", "set", "continuation_idle_timeout", "abc"),
    ("config", "set", "hermes_command", ""), ("config", "set", "hermes_command", "'unclosed"),
    ("config", "set", "mode", "sometimes"), ("config", "set", "freshness_minutes", "-1"),
    ("config", "set", "max_attempts", "many"), ("config", "set", "homes", "/nowhere/at/all"),
    ("config", "set", "enabled", "false"), ("config", "set", "notify", "perhaps"), ("config", "unset", "mode"),
    ("config", "set", "nonsense", "1"), ("enable",), ("disable",),
    ("skip", "s-wait", "--started-at", "123"), ("skip", "s-live"), ("skip", "nope"), ("skip", "../evil"),
    ("skip", "s-num"), ("skip", "s-old"), ("snooze", "s-wait", "--for", "2h"), ("snooze", "nope"), ("snooze", "s-live"), ("resume", "nope"), ("resume", "s-live"), ("resume", "s-hermes"),
    ("resume", "s-old"), ("resume", "s-num"), ("autostart", "status"), ("history", "--limit", "0"),
)


def _run(argv: list[str]) -> str:
    from hermes_tray.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit:  # argparse's usage errors
            pass
        except Exception as exc:  # what a user would see: a traceback
            return f"Traceback … {type(exc).__name__}: {exc}"
    return out.getvalue() + err.getvalue()


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[bool]:
    """``path`` on a read-only file system (a read-only bind mount) where this user may mount."""
    try:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        yield False
        return
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True, capture_output=True, timeout=10)
        yield True
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, timeout=10)


def cli_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(where, what was printed) for every command over every state."""
    for n, (state, build) in enumerate(STATES.items()):
        home = FixtureHome(tmp_path / f"state-{n}" / "hermes") if build else None
        if home is not None and build is not None:
            build(home)
        monkeypatch.setenv("HERMES_HOME", str(home.path) if home else str(tmp_path / "no-such-home"))
        for argv in COMMANDS:
            yield f"{state}: {' '.join(argv)}", _run(list(argv))
        settings = Path(os.environ["HERMES_TRAY_CONFIG_DIR"]) / "config.toml"
        settings.unlink(missing_ok=True)
    home = FixtureHome(tmp_path / "read-only" / "hermes")
    _turns(home)
    monkeypatch.setenv("HERMES_HOME", str(home.path))
    with _read_only(home.path) as mounted:
        if mounted:
            for argv in (("config", "set", "enabled", "false"), ("disable",), ("skip", "s-wait"), ("status",),
                         ("doctor",)):
                yield f"read-only home: {' '.join(argv)}", _run(list(argv))


def word_sentences() -> Iterator[tuple[str, str]]:
    yield from catalogue()


def test_no_sentence_a_user_reads_holds_internals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said = [*word_sentences(), *cli_sentences(tmp_path, monkeypatch)]
    assert len(said) > 400  # the states and commands did run
    bad = {f"{where}: {line}": found for where, text in said for line in text.splitlines()
           if (found := internals(line))}
    assert not bad, "\n".join(f"{k}\n    {v}" for k, v in bad.items())


def test_the_sentences_the_issue_quoted_now_say_what_happened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = FixtureHome(tmp_path / "hermes")
    _turns(home)
    monkeypatch.setenv("HERMES_HOME", str(home.path))
    wrong = _run(["skip", "s-wait", "--started-at", "123"])  # the value given is wrong; nothing changed
    assert "The --started-at given is not when the turn now waiting in s-wait started" in wrong, wrong
    assert "changed" not in wrong, wrong
    assert "from 1 to 86400" in _run(["config", "set", "continuation_idle_timeout", "0"])  # the range allowed
    empty = _run(["config", "set", "hermes_command", ""])
    assert "hermes-tray config unset hermes_command" in empty, empty  # names the command that removes the key
    _run(["config", "set", "hermes_command", "/opt/hermes/bin/python"])
    assert _run(["config", "get", "hermes_command"]).strip() == "/opt/hermes/bin/python"
    assert "the default" in _run(["config", "unset", "hermes_command"])
    assert _run(["config", "get", "hermes_command"]).strip() == "(unset)"
    assert "Not skipped          s-wait  the --started-at given is not this turn's" in _run(["history"])
    assert "give it a value" in _run(["config", "unset", "enabled"])  # Hermes' own keys are set, never unset

    _malformed(home)
    rows = {m.group(1): line for line in _run(["status"]).splitlines()
            if line.startswith(("stale", "not-ours")) and (m := re.search(r"\s(s-\w+)\s", line))}
    assert set(rows) == {"s-num", "s-str", "s-neg"}, rows
    assert rows["s-num"].split("s-num", 1)[1].strip() == "A turn", rows["s-num"]  # no number as its prompt
    assert "at an unknown time" in rows["s-num"] and "days ago" not in rows["s-num"]

    from tests.support import book

    book.record("dispatched", home=str(home.path), session_key="s-wait", started_at=1.5e9,
                                       via="tray-menu", attempt=1, t_active_list=0.003)
    # (history first settles that run from Hermes' facts: a "Cleared by Hermes" line comes above it)
    said = next(x for x in _run(["history", "--session", "s-wait"]).splitlines() if "Sent to Hermes" in x)
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  Sent to Hermes +s-wait  from the menu · attempt 1$", said.strip()), said
