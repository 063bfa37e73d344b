"""Every command, on every kind of path, says one true line and exits as documented — never a traceback.

The exit codes come from the table in docs/cli.md ("Exit codes"), read here and run cell by cell. The paths
are the ones a user's day produces: a file, a missing folder, ``/proc``, a folder they may not read (an
unprivileged child: tests.support.unprivileged), a name too long for the file system, bytes that are not
UTF-8, and an empty ``--home`` (an unset variable), which must never mean the current directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fixture_homes import FixtureHome, env_for, marker_entry
from tests.support.unprivileged import locked_dir, no_file_privileges, unlock

REPO = Path(__file__).resolve().parents[1]


def run(env: dict, *args: str | bytes, cwd: Path | None = None, unprivileged: bool = False,
        timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, timeout=timeout, preexec_fn=no_file_privileges() if unprivileged else None)


def text(proc: subprocess.CompletedProcess) -> tuple[str, str]:
    return proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


# --- the exit-code table -----------------------------------------------------------------------------------


def _table() -> list[tuple[str, dict[str, str]]]:
    doc = (REPO / "docs" / "cli.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| (\S+) \| (\S+) \| (\S+) \|$", doc, re.M)
    assert len(rows) >= 10, "the exit-code table by command is gone from docs/cli.md"
    return [(cmd, {"no home": a, "unsafe key": b, "not found": c}) for cmd, a, b, c in rows]


CELLS = [(cmd, case, code) for cmd, cases in _table() for case, code in cases.items() if code != "–"]


@pytest.fixture()
def one_home(tmp_path):
    home = FixtureHome(tmp_path / "hermes")
    home.add_session("s1", title="A turn")
    home.write_markers({"s1": marker_entry("go on", started_at=time.time() - 30)})
    home.close()
    return home


@pytest.mark.parametrize(("command", "case", "code"), CELLS, ids=[f"{c}|{k}" for c, k, _ in CELLS])
def test_exit_codes_are_the_documented_ones(command, case, code, one_home, tmp_path):
    env = env_for(tmp_path, HERMES_HOME=str(one_home.path))
    words = command.split()
    session = "s1"
    if case == "no home":
        env["HERMES_HOME"] = str(tmp_path / "no-hermes-here")
    elif case == "unsafe key":
        session = "../x"
    args = [session if w == "SESSION" else w for w in words]
    if case == "not found":
        args += ["--home", str(tmp_path / "typo")]
    proc = run(env, *args)
    out, err = text(proc)
    assert proc.returncode == int(code), (args, out[-800:], err[-800:])
    assert "Traceback" not in out + err
    if case == "not found" and words[0] in ("resume", "skip", "snooze"):  # a home with no such turn: the same code
        proc = run(env, *[("nothing-here" if w == "SESSION" else w) for w in words])
        assert proc.returncode == int(code), text(proc)


# --- paths of every kind, to every command ---------------------------------------------------------------


@pytest.fixture()
def bad_paths(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("not a home\n")
    locked = locked_dir(tmp_path / "locked", content={"config.yaml": ""})
    paths = {
        "file": str(afile),
        "missing": str(tmp_path / "missing" / "dir"),
        "proc": "/proc",
        "proc-missing": "/proc/nope",
        "no-permission": str(locked),
        "too-long": str(tmp_path / ("x" * 300)),
        "not-utf8": os.fsencode(tmp_path) + b"/h\xff\xfeme",
    }
    yield paths
    unlock(locked)


COMMANDS = {
    "status": ["status"],
    "status --json": ["status", "--json"],
    "resume": ["resume", "s1"],
    "skip": ["skip", "s1"],
    "snooze": ["snooze", "s1"],
    "enable": ["enable"],
    "disable": ["disable"],
    "config show": ["config", "show"],
    "config get": ["config", "get", "enabled"],
    "config set": ["config", "set", "enabled", "false"],
    "doctor": ["doctor", "--no-probe"],
    "history": ["history"],
    "tray": ["tray"],
}
KINDS = ["file", "missing", "proc", "proc-missing", "no-permission", "too-long", "not-utf8"]


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    out, err = text(proc)
    assert "Traceback" not in out + err, err[-1500:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hermes-tray"), err
    return lines[0]


# Every command, in one unprivileged child per kind of path (the suite runs on two shared cores): the real
# entry point, and whatever escaped it printed as the program itself would print it.
DRIVER = r"""
import contextlib, io, json, sys, traceback
from hermes_tray.cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = None
    results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_on_every_path_says_one_line(kind, bad_paths, tmp_path):
    env = env_for(tmp_path, HERMES_HOME=str(tmp_path / "no-hermes-here"))
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):  # `tray` has no display: it refuses, starts nothing
        env.pop(var, None)
    path = bad_paths[kind]
    home = os.fsdecode(path) if isinstance(path, bytes) else path  # argv as Python decodes it
    argvs = [[*args, "--home", home] for args in COMMANDS.values()]
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argvs)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, preexec_fn=no_file_privileges())
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, res in zip(COMMANDS, json.loads(proc.stdout), strict=True):
        where = (name, kind, res["code"], res["out"][-600:], res["err"][-1500:])
        assert "Traceback" not in res["out"] + res["err"], where
        assert res["code"] in (1, 2), where
        if name == "doctor":  # a report, not a refusal: the home's problem is in it and counted
            assert "problem" in res["out"], where
        elif name == "status --json":  # the refusal as JSON, one line of words
            error = json.loads(res["out"])["error"]
            assert error and "\n" not in error, where
        elif name != "tray":  # the tray's refusal explains the missing display at length
            lines = [ln for ln in res["err"].splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith("hermes-tray: "), where
    said = {name: res["err"] for name, res in zip(COMMANDS, json.loads(proc.stdout), strict=True)}
    expected = {"file": "is not a directory", "missing": "does not exist", "proc": "is not a Hermes home",
                "proc-missing": "does not exist", "no-permission": "permission denied", "too-long": "too long",
                "not-utf8": "does not exist"}[kind]
    assert expected in said["status"], said["status"]  # the case really is what its name says


@pytest.mark.parametrize("kind", KINDS)
def test_demo_dir_on_every_path(kind, bad_paths, tmp_path):
    env = env_for(tmp_path)
    proc = run(env, "demo", "--no-tray", "--json", "--dir", bad_paths[kind], unprivileged=True)
    out, err = text(proc)
    assert "Traceback" not in out + err, err[-1500:]
    if proc.returncode == 0:  # a folder that could be made: a real demo, whose backend is ended here
        doc = json.loads(out)
        assert doc["ok"] and kind in ("missing", "not-utf8")
        os.kill(doc["backend_pid"], signal.SIGKILL)
        return
    assert proc.returncode == 1, (out, err)
    line = json.loads(out)["error"]
    assert line.startswith("cannot create the demo") and "\n" not in line


@pytest.mark.parametrize("kind", ["file", "too-long", "not-utf8", "no-permission"])
def test_the_helper_on_a_bad_home_runs_and_says_so(kind, bad_paths, tmp_path):
    """The helper watches on (a home may appear later); no traceback, the problem is said."""
    env = {**env_for(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    p = subprocess.Popen([sys.executable, "-m", "hermes_tray", "helper", "--no-notifications", "--home",
                          bad_paths[kind]], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=no_file_privileges())
    time.sleep(6)
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=30)[0].decode("utf-8", "replace")
    assert "Traceback" not in out, out[-2000:]
    assert p.returncode == 0, out[-2000:]
    assert "No Hermes home found" in out or "problem:" in out, out


# --- an empty --home, a folder that is not a Hermes home ------------------------------------------------


def _snapshot(*dirs: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for d in dirs for p in [d, *d.rglob("*")]}


@pytest.mark.parametrize("args", [["enable"], ["disable"], ["config", "set", "enabled", "false"],
                                  ["config", "set", "max_attempts", "3"], ["status"], ["resume", "s1"],
                                  ["skip", "s1"], ["config", "show"], ["history"]])
def test_an_empty_home_is_a_usage_error_and_writes_nothing(args, tmp_path):
    """`--home "$HERMES_HOME"` with the variable unset: exit 2, and no file anywhere (the current directory and
    HOME are where the old reading of "" wrote its config.yaml)."""
    cwd = tmp_path / "cwd"
    home = tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    env = env_for(tmp_path, HOME=str(home))
    before = _snapshot(cwd, home, tmp_path)
    proc = run(env, *args, "--home", "", cwd=cwd)
    assert proc.returncode == 2, text(proc)
    assert "--home is empty" in _one_line_error(proc)
    assert _snapshot(cwd, home, tmp_path) == before  # not one file or folder written, nowhere


@pytest.mark.parametrize("args", [["enable"], ["disable"], ["config", "set", "enabled", "false"]])
def test_a_folder_that_is_not_a_hermes_home_is_not_written_without_create(args, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    env = env_for(tmp_path)
    proc = run(env, *args, "--home", str(plain))
    assert proc.returncode == 1, text(proc)
    assert "is not a Hermes home" in _one_line_error(proc)
    assert list(plain.iterdir()) == []
    made = run(env, *args, "--home", str(plain), "--create")
    assert made.returncode == 0, text(made)
    assert "auto_continue" in (plain / "config.yaml").read_text()
    fresh = tmp_path / "new" / "home"  # --create on a folder that does not exist: made, private
    assert run(env, *args, "--home", str(fresh)).returncode == 1 and not fresh.exists()
    assert run(env, *args, "--home", str(fresh), "--create").returncode == 0
    assert (fresh / "config.yaml").is_file() and oct(fresh.stat().st_mode & 0o777) == "0o700"


def test_status_on_a_home_that_does_not_exist_says_so(tmp_path):
    proc = run(env_for(tmp_path), "status", "--home", str(tmp_path / "typo"))
    assert proc.returncode == 1
    line = _one_line_error(proc)
    assert line.endswith("typo does not exist") and "has not run" not in line


def test_config_set_homes_is_checked_and_doctor_counts_a_home_that_went_away(tmp_path, one_home):
    env = env_for(tmp_path, HERMES_HOME=str(one_home.path))
    missing = tmp_path / "gone"
    proc = run(env, "config", "set", "homes", str(missing))
    assert proc.returncode == 1 and "does not exist" in _one_line_error(proc)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run(env, "config", "set", "homes", str(plain)).returncode == 1
    assert run(env, "config", "set", "homes", str(plain), "--create").returncode == 0  # Hermes has not used it yet
    plain.rmdir()  # later, the folder goes away: doctor says so and counts it
    doctor = run(env, "doctor", "--no-probe", "--json")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1
    assert any(str(plain) in p and "does not exist" in p for p in report["problems"]), report["problems"]


@pytest.mark.parametrize("value", ["-3", "-0.5", "nan", "inf"])
def test_demo_refuses_a_crash_time_that_means_nothing(value, tmp_path):
    proc = run(env_for(tmp_path), "demo", "--no-tray", "--crash-after", value, "--dir", str(tmp_path / "demo"))
    assert proc.returncode == 2, text(proc)
    assert "--crash-after" in _one_line_error(proc)
    assert not (tmp_path / "demo").exists()  # refused before anything was made or started


def test_demo_with_no_crash_says_so(tmp_path):
    """0 means never: said as it is (before: "It is SIGKILLed a few seconds into its turn")."""
    import psutil

    proc = run(env_for(tmp_path), "demo", "--no-tray", "--crash-after", "0", "--dir", str(tmp_path / "demo"))
    out, _err = text(proc)
    pid = int(re.search(r"kill -9 (\d+)", out).group(1))
    try:
        assert proc.returncode == 0 and "its turn runs until you crash it" in out and "crashes" not in out
        time.sleep(3)
        assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # and indeed it runs on
    finally:
        os.kill(pid, signal.SIGKILL)


def test_demo_says_when_its_backend_crashes(tmp_path):
    import psutil

    proc = run(env_for(tmp_path), "demo", "--no-tray", "--crash-after", "2.5", "--dir", str(tmp_path / "demo"))
    out, _err = text(proc)
    assert proc.returncode == 0 and "its turn crashes 2.5 s in" in out
    pid = int(re.search(r"kill -9 (\d+)", out).group(1))
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the demo's backend did not crash when it said it would")
