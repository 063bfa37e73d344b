"""The command line end to end, in real subprocesses over real fixture homes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.fixture_homes import FixtureHome, env_for, marker_entry, own_writer

REPO = Path(__file__).resolve().parents[1]
TURN_KEYS = {"home", "profile", "session_key", "title", "prompt_excerpt", "started_at", "interrupted_at",
             "age_seconds", "attempts", "writer", "verdict", "reason", "reason_code", "source", "progress", "cause",
             "cause_fact", "reminder_at"}


def cli(tmp: Path, *args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_tray", *args], cwd=REPO, env=env or env_for(tmp),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def tree(tmp_path):
    root = FixtureHome(tmp_path / "hermes")
    work = FixtureHome(tmp_path / "hermes" / "profiles" / "work")
    root.add_session("s-dead", title="Crashed refactor")
    root.add_session("s-live")
    root.write_markers({
        "s-dead": marker_entry("refactor the parser\nsecret second line", started_at=time.time() - 90),
        "s-live": marker_entry("still going", writer=own_writer()),
        "s-old": marker_entry("ancient", started_at=time.time() - 5 * 3600),
    })
    work.write_config("# my notes\ndesktop:\n  auto_continue:\n    freshness_minutes: 15  # keep\nother: x\n")
    work.add_session("w-1")
    work.write_markers({"w-1": marker_entry("profile work", attempts=1)})
    root.close()
    work.close()
    env = env_for(tmp_path, HERMES_HOME=str(root.path))
    return root, work, env


def status_json(tmp, env, *extra) -> dict:
    proc = cli(tmp, "status", "--json", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_status_json_schema_and_verdicts(tmp_path, tree):
    root, work, env = tree
    doc = status_json(tmp_path, env)
    assert set(doc) == {"homes", "turns"}
    assert [h["path"] for h in doc["homes"]] == [str(root.path), str(work.path)]
    turns = {t["session_key"]: t for t in doc["turns"]}
    for t in doc["turns"]:
        assert set(t) == TURN_KEYS
        assert t["writer"] in ("alive", "dead", "unknown") and t["source"] in ("desktop", "webui")
        assert isinstance(t["started_at"], float) and isinstance(t["age_seconds"], float)
    assert {k: t["verdict"] for k, t in turns.items()} == {
        "s-dead": "actionable", "s-live": "running", "s-old": "stale", "w-1": "actionable"}
    dead = turns["s-dead"]
    assert (dead["title"], dead["prompt_excerpt"], dead["profile"], dead["attempts"]) == (
        "Crashed refactor", "refactor the parser", "default", 0)
    assert turns["w-1"]["profile"] == "work" and "continuation 2 of 2" in turns["w-1"]["reason"]
    # --home after the command replaces discovery
    only = status_json(tmp_path, env, "--home", str(work.path))
    assert [t["session_key"] for t in only["turns"]] == ["w-1"]


def test_status_table_and_problems_are_shown(tmp_path, tree):
    root, work, env = tree
    proc = cli(tmp_path, "status", env=env)
    assert proc.returncode == 0
    assert "actionable" in proc.stdout and "Crashed refactor" in proc.stdout
    assert "beyond the 15 min freshness window" in proc.stdout
    assert "2 turns can be resumed" in proc.stdout and "(s)" not in proc.stdout
    root.marker_file.write_text("[]")
    (work.path / "desktop" / "interrupted_turns.json.migrated").write_text("{}")
    proc = cli(tmp_path, "status", env=env)
    assert "corrupt" in proc.stdout and str(root.marker_file) in proc.stdout
    assert "NOT SUPPORTED" in proc.stdout and "newer Hermes storage" in proc.stdout
    assert "no interrupted turns\n" not in proc.stdout


def test_status_says_ages_in_the_same_words_as_the_tray(tmp_path, tree):
    """One age formatter everywhere: the table's WHEN column reads like the turns window ("started 4 min ago")."""
    from hermes_tray_core import age_text

    _root, _work, env = tree
    turns = status_json(tmp_path, env)["turns"]
    lines = cli(tmp_path, "status", env=env).stdout.splitlines()
    assert turns
    for t in turns:
        line = next(x for x in lines if f" {t['session_key']} " in f" {x} ")
        assert any(age_text(t["age_seconds"] + d) in line for d in (0, 1, 2, 3)), (t["age_seconds"], line)
        assert " ago" in line


def test_skip_removes_only_that_marker_and_journals_without_prompt(tmp_path, tree):
    root, _work, env = tree
    proc = cli(tmp_path, "skip", "s-dead", "--home", str(root.path), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "skipped s-dead" in proc.stdout
    assert set(root.read_markers()) == {"s-live", "s-old"}
    hist = cli(tmp_path, "history", "--json", env=env)
    events = json.loads(hist.stdout)
    assert events[0]["event"] == "skipped" and events[0]["session_key"] == "s-dead"
    journal_text = "".join(p.read_text() for p in (tmp_path / "tray-state").rglob("*.jsonl"))
    assert "refactor" not in journal_text and "secret" not in journal_text
    assert "Skipped" in cli(tmp_path, "history", env=env).stdout


def test_skip_loses_race_to_a_new_run_and_says_so(tmp_path, tree):
    root, _work, env = tree
    seen = {t["session_key"]: t for t in status_json(tmp_path, env)["turns"]}["s-dead"]
    # Meanwhile the turn was continued and crashed again: same key, a new run.
    entries = root.read_markers()
    entries["s-dead"] = {**entries["s-dead"], "attempts": 1, "started_at": time.time()}
    root.write_markers(entries)
    proc = cli(tmp_path, "skip", "s-dead", "--started-at", repr(seen["started_at"]), env=env)
    assert proc.returncode == 1
    assert "is not when the turn now waiting in s-dead started" in proc.stderr and "newer run" in proc.stderr
    assert root.read_markers()["s-dead"]["attempts"] == 1  # left alone
    assert json.loads(cli(tmp_path, "history", "--json", env=env).stdout)[0]["event"] == "refused"


def test_skip_loses_race_between_read_and_remove(tmp_path, tree):
    """Hermes rewrites the entry after the CLI read it: compare-and-remove refuses."""
    root, _work, env = tree
    script = textwrap.dedent(f"""
        import json, sys, time
        import hermes_tray_core.markers.store as m
        real = m.remove_marker_if_unchanged
        def racing(home, key, expected):
            path = m.marker_file.marker_path(home)
            data = json.loads(path.read_text())
            data[key]["attempts"] = 1  # a concurrent (foreign) write lands first
            path.write_text(json.dumps(data))
            return real(home, key, expected)
        m.remove_marker_if_unchanged = racing
        from hermes_tray.cli.main import main
        sys.exit(main(["skip", "s-dead", "--home", {str(root.path)!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "changed (or was cleared) while it was being skipped" in proc.stderr
    assert root.read_markers()["s-dead"]["attempts"] == 1


def test_skip_refusals_and_usage(tmp_path, tree):
    root, _work, env = tree
    live = cli(tmp_path, "skip", "s-live", env=env)
    assert live.returncode == 1 and "running" in live.stderr and "--force" in live.stderr
    assert "s-live" in root.read_markers()
    missing = cli(tmp_path, "skip", "nope", env=env)
    assert missing.returncode == 1 and "no interrupted turn nope" in missing.stderr
    bad = cli(tmp_path, "skip", "../etc", env=env)
    assert bad.returncode == 2
    forced = cli(tmp_path, "skip", "s-live", "--force", "--json", env=env)
    assert forced.returncode == 0 and json.loads(forced.stdout)["ok"] is True


def test_config_set_then_get_backend_and_tray(tmp_path, tree):
    _root, work, env = tree
    before = (work.path / "config.yaml").read_text()
    proc = cli(tmp_path, "config", "set", "freshness_minutes", "45", "--home", str(work.path), env=env)
    assert proc.returncode == 0, proc.stderr
    got = cli(tmp_path, "config", "get", "freshness_minutes", "--home", str(work.path), env=env)
    assert got.stdout.strip() == "45"
    assert (work.path / "config.yaml").read_text() == before.replace("minutes: 15", "minutes: 45")
    assert cli(tmp_path, "config", "set", "mode", "auto", env=env).returncode == 0
    assert cli(tmp_path, "config", "get", "mode", env=env).stdout.strip() == "auto"
    assert json.loads(cli(tmp_path, "config", "get", "notify", "--json", env=env).stdout) == {
        "key": "notify", "value": True}
    shown = json.loads(cli(tmp_path, "config", "show", "--json", env=env).stdout)
    assert shown["tray"]["mode"] == "auto"
    assert {h["home"]: h["freshness_minutes"] for h in shown["homes"]}[str(work.path)] == 45
    bad = cli(tmp_path, "config", "set", "mode", "loud", env=env)
    assert bad.returncode == 2 and "ask, auto, list" in bad.stderr
    assert cli(tmp_path, "config", "get", "colour", env=env).returncode == 2
    assert cli(tmp_path, "config", "set", "max_attempts", "-1", "--all", env=env).returncode == 2
    events = json.loads(cli(tmp_path, "history", "--json", env=env).stdout)
    changes = [(e["key"], e["old"], e["new"], e["by"], e["home"]) for e in events if e["event"] == "config-changed"]
    assert changes == [("mode", "ask", "auto", "cli", None),
                       ("freshness_minutes", 15, 45, "cli", str(work.path.resolve()))]
    assert "mode: ask → auto, from the command line" in cli(tmp_path, "history", env=env).stdout


def test_disable_enable_selection_and_effect(tmp_path, tree):
    root, work, env = tree
    ambiguous = cli(tmp_path, "disable", env=env)
    assert ambiguous.returncode == 2 and "--all" in ambiguous.stderr
    assert cli(tmp_path, "disable", "--all", env=env).returncode == 0
    verdicts = {t["session_key"]: t["verdict"] for t in status_json(tmp_path, env)["turns"]}
    assert verdicts["s-dead"] == "disabled" and verdicts["w-1"] == "disabled"
    table = cli(tmp_path, "status", env=env).stdout  # held turns are listed, with the one way to act
    assert "s-dead" in table and "not continued because Hermes auto-continue is off" in table
    assert "hermes-tray enable" in table
    refused = cli(tmp_path, "resume", "s-dead", "--home", str(root.path), env=env)  # refused, saying what to do
    assert refused.returncode == 1 and "auto-continue" in refused.stderr + refused.stdout
    assert "hermes-tray enable" in refused.stderr + refused.stdout
    assert "# my notes" in (work.path / "config.yaml").read_text()
    assert cli(tmp_path, "enable", "--home", str(root.path), env=env).returncode == 0
    verdicts = {t["session_key"]: t["verdict"] for t in status_json(tmp_path, env)["turns"]}
    assert verdicts["s-dead"] == "actionable" and verdicts["w-1"] == "disabled"
    events = [e for e in json.loads(cli(tmp_path, "history", "--json", env=env).stdout) if e["event"] != "refused"]
    assert [(e["event"], e["key"], e["old"], e["new"], e["by"]) for e in events[:3]] == [
        ("config-changed", "enabled", False, True, "cli")] + [("config-changed", "enabled", True, False, "cli")] * 2
    assert events[0]["home"] == str(root.path.resolve())
    assert {e["home"] for e in events[1:3]} == {str(root.path.resolve()), str(work.path.resolve())}
    assert not list((tmp_path / "tray-state").rglob("settings.jsonl")), "no side file any more"


def test_managed_values_are_never_pretended_changed(tmp_path, tree):
    root, _work, env = tree
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "config.yaml").write_text("desktop:\n  auto_continue:\n    enabled: false\n")
    env = {**env, "HERMES_MANAGED_DIR": str(managed)}
    before = (root.path / "config.yaml").read_text() if (root.path / "config.yaml").exists() else None
    proc = cli(tmp_path, "enable", "--home", str(root.path), env=env)
    assert proc.returncode == 1 and "administrator's managed config" in proc.stderr
    assert str(managed / "config.yaml") in proc.stderr
    after = (root.path / "config.yaml").read_text() if (root.path / "config.yaml").exists() else None
    assert after == before  # untouched
    same = cli(tmp_path, "disable", "--home", str(root.path), env=env)
    assert same.returncode == 0 and "config.yaml not changed" in same.stdout
    shown = cli(tmp_path, "config", "show", "--home", str(root.path), env=env).stdout
    assert "enabled = false  (set by the administrator" in shown
    verdicts = {t["session_key"]: t["verdict"] for t in status_json(tmp_path, env)["turns"]}
    assert verdicts["s-dead"] == "disabled"
    doc = status_json(tmp_path, env)
    assert doc["homes"][0]["auto_continue"]["managed"] == ["enabled"]
    doctor = cli(tmp_path, "doctor", "--no-probe", "--home", str(root.path), env=env).stdout
    assert "set by the administrator's managed config (wins over config.yaml): enabled" in doctor


def test_unparseable_config_is_refused_untouched(tmp_path, tree):
    _root, work, env = tree
    broken = "desktop:\n  auto_continue: [oops\n"
    (work.path / "config.yaml").write_text(broken)
    proc = cli(tmp_path, "disable", "--home", str(work.path), env=env)
    assert proc.returncode == 1
    assert "not valid YAML" in proc.stderr and "left unchanged" in proc.stderr
    assert (work.path / "config.yaml").read_text() == broken


def test_commands_never_import_qt(tmp_path, tree):
    root, _work, env = tree
    script = textwrap.dedent(f"""
        import sys, io, contextlib
        from hermes_tray.cli.main import main
        for argv in (["status", "--json"], ["config", "show"], ["history"], ["doctor", "--no-probe"],
                     ["skip", "nope"]):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                main(argv + ["--home", {str(root.path)!r}])
        qt = [m for m in sys.modules if m.startswith(("PySide6", "shiboken6", "qasync"))]
        print("QT:", qt)
    """)
    env = {k: v for k, v in env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "QT: []" in proc.stdout


def test_doctor_without_a_desktop_says_what_to_do(tmp_path, tree):
    root, _work, env = tree
    env = {k: v for k, v in env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    env["PATH"] = "/usr/bin:/bin"  # no hermes launcher here
    proc = cli(tmp_path, "doctor", env=env)
    assert proc.returncode == 1
    out = proc.stdout
    assert str(root.path) in out and "markers: ok (3)" in out
    if sys.platform.startswith("linux"):
        assert "marker writes: atomic exchange\n" in out and "renameat2" not in out  # the call is for --json
    assert "no D-Bus session bus" in out and "log in to a desktop session" in out
    assert "no graphical session" in out
    assert "Hermes is not installed" in out
    assert str(tmp_path / "tray-config" / "config.toml") in out


def test_doctor_says_when_marker_writes_fall_back_to_compare_and_replace(tmp_path, monkeypatch):
    """A filesystem without an atomic exchange (EINVAL from renameat2, e.g. some FUSE/NFS mounts)."""
    from hermes_tray.cli import doctor
    from hermes_tray_core.stores import exchange as atomic_exchange

    monkeypatch.setattr(atomic_exchange, "probe", lambda d: (False, "renameat2(RENAME_EXCHANGE): Invalid argument"))
    (tmp_path / "desktop").mkdir()
    info, problem = doctor.check_marker_writes(tmp_path)
    assert info == {"exchange": False, "detail": "renameat2(RENAME_EXCHANGE): Invalid argument"}
    assert problem is not None and str(tmp_path) in problem and "compare-and-replace" in problem
    assert "local filesystem" in problem and "renameat2" not in problem
    report = {"homes": [{"exists": True, "path": str(tmp_path), "profile": "default", "origin": "env",
                         "auto_continue": {"enabled": True, "freshness_minutes": 15, "max_attempts": 2},
                         "turns": {}, "markers": "ok", "marker_count": 0, "state_db": "ok", "webui_sessions": 0,
                         "marker_writes": info}],
              "hermes": {}, "desktop": {}, "paths": {}, "problems": [problem]}
    assert "marker writes: compare-and-replace only (this filesystem cannot swap two files)" in \
        doctor.render(report)


FAKE_SERVER = textwrap.dedent("""
    import sys
    from jeepney import MessageType, new_method_return
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection
    conn = open_dbus_connection(bus=sys.argv[1])
    conn.send_and_get_reply(message_bus.RequestName("org.freedesktop.Notifications"))
    print("ready", flush=True)
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        member = msg.header.fields.get(3)
        if member == "GetServerInformation":
            conn.send(new_method_return(msg, "ssss", ("fake-notifyd", "tests", "1.0", "1.2")))
        elif member == "GetCapabilities":
            conn.send(new_method_return(msg, "as", (["body", "actions"],)))
""")


@pytest.mark.skipif(not shutil.which("dbus-daemon"), reason="needs dbus-daemon")
def test_doctor_reports_notification_server_capabilities(tmp_path, tree):
    pytest.importorskip("jeepney")
    _root, _work, env = tree
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    server = None
    try:
        address = daemon.stdout.readline().strip()
        server = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, address], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        env = {**env, "DBUS_SESSION_BUS_ADDRESS": address, "DISPLAY": ":99"}
        proc = cli(tmp_path, "doctor", "--json", "--no-probe", env=env)
        report = json.loads(proc.stdout)
        assert report["desktop"]["notifications"]["server"] == "fake-notifyd"
        assert report["desktop"]["notifications"]["capabilities"] == ["body", "actions"]
        assert report["desktop"]["tray"] is None
        assert any("no system tray" in p for p in report["problems"])
        assert not any("notification server" in p for p in report["problems"])
    finally:
        if server:
            server.kill()
            server.wait()
        daemon.kill()
        daemon.wait()


def test_extra_homes_from_tray_settings_are_scanned(tmp_path, tree):
    _root, _work, env = tree
    extra = FixtureHome(tmp_path / "elsewhere")
    extra.write_markers({"x-1": marker_entry("in an extra home")})
    assert cli(tmp_path, "config", "set", "homes", str(extra.path), env=env).returncode == 0
    doc = status_json(tmp_path, env)
    assert str(extra.path) in [h["path"] for h in doc["homes"]]
    assert "x-1" in [t["session_key"] for t in doc["turns"]]


def test_config_get_without_a_home_is_refused_not_silent(tmp_path):
    """Before: `config get KEY` with no Hermes home printed nothing and exited 0."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "nothing-here")}
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        env[f"HERMES_TRAY_{name}_DIR"] = str(tmp_path / f"tray-{name.lower()}")
    p = subprocess.run([sys.executable, "-m", "hermes_tray", "config", "get", "max_attempts"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "no Hermes home found" in p.stderr and p.stdout == ""


def test_output_into_a_closed_pipe_prints_no_traceback(tmp_path):
    """`hermes-tray … | head`: the reader goes away; no BrokenPipeError traceback, exit 141 (128 + SIGPIPE)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HOME": str(tmp_path)}
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        env[f"HERMES_TRAY_{name}_DIR"] = str(tmp_path / f"tray-{name.lower()}")
    r, w = os.pipe()
    os.close(r)  # nobody reads: the first write fails with EPIPE
    p = subprocess.run([sys.executable, "-m", "hermes_tray", "doctor", "--no-probe"], env=env, stdout=w, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    os.close(w)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.returncode == 141


QUICK_EXIT = """
import atexit, sys, threading
class Sentinel:
    def __del__(self):
        print("teardown ran")  # when the interpreter frees this module's objects
sentinel = Sentinel()
atexit.register(lambda: print("at-exit handler ran"))
if sys.argv[1] == "thread":
    def late():  # alive until the main thread ends, however long `status` takes
        threading.main_thread().join()
        print("the other thread finished")
    threading.Thread(target=late).start()
sys.argv = ["hermes-tray", "status", "--json"]
from hermes_tray.cli import entry
entry()
"""


@pytest.mark.parametrize("other_thread", [False, True])
def test_status_exits_without_teardown_but_loses_nothing(tree, tmp_path, other_thread):
    """The program's `status` skips the interpreter's teardown; its output, the at-exit handlers and another
    running thread still get what a normal exit gives them."""
    env = env_for(tmp_path, HERMES_HOME=str(tmp_path / "hermes"))
    out = subprocess.run([sys.executable, "-c", QUICK_EXIT, "thread" if other_thread else "-"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc, end = json.JSONDecoder().raw_decode(out.stdout)  # the whole document came out
    assert {t["session_key"] for t in doc["turns"]} >= {"s-dead", "w-1"}
    after = out.stdout[end:]
    assert "at-exit handler ran" in after  # after the command, as at a normal exit
    assert ("the other thread finished" in after) is other_thread
    assert ("teardown ran" in after) is other_thread  # skipped, unless a thread made it a normal exit


def test_every_exit_code_is_in_the_readme_table_and_autostart_status_uses_one():
    """Issue 25.10: `autostart status` exited 1 when off, which the exit-code table did not cover. Every code
    the commands follow (and `autostart status`'s "no") is a row of the README's table, with its meaning."""
    import importlib
    import re

    exits = importlib.import_module("hermes_tray.cli.exits")
    autostart = importlib.import_module("hermes_tray.cli.autostart")

    readme = (REPO / "README.md").read_text()
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", readme, re.M))
    codes = {name: value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert codes and all(str(v) in table for v in codes.values()), (codes, sorted(table))
    assert "autostart status" in table[str(exits.EXIT_NO)]
    src = Path(autostart.__file__).read_text()
    assert "return EXIT_NO" in src and src.count("EXIT_REFUSED") == 2  # imported, and used for a failure only


def test_a_mistyped_command_lists_only_real_commands_and_the_worker_entry_still_works(tmp_path):
    """Issue 25.10: a mistyped command listed the internal ``_resume-worker`` among the choices."""
    proc = cli(tmp_path, "stauts")
    assert proc.returncode == 2 and "invalid choice: 'stauts'" in proc.stderr
    assert "'status'" in proc.stderr and "_resume-worker" not in proc.stderr
    worker = subprocess.run([sys.executable, "-m", "hermes_tray", "_resume-worker"], cwd=REPO, env=env_for(tmp_path),
                            input="{}\n", capture_output=True, text=True, timeout=60)  # a frozen build's worker
    assert json.loads(worker.stdout)["message"] == "resume worker: bad request" and worker.returncode == 1


def test_history_with_home_lists_only_that_home(tmp_path, tree):
    """Issue 25.5: `history --home X` did not filter."""
    root, work, env = tree
    assert cli(tmp_path, "skip", "s-dead", "--home", str(root.path), env=env).returncode == 0
    assert cli(tmp_path, "config", "set", "freshness_minutes", "30", "--home", str(work.path), env=env).returncode == 0
    everything = json.loads(cli(tmp_path, "history", "--json", env=env).stdout)
    assert {e["home"] for e in everything} == {str(root.path.resolve()), str(work.path.resolve())}
    only = json.loads(cli(tmp_path, "history", "--json", "--home", str(work.path), env=env).stdout)
    assert only and {e["home"] for e in only} == {str(work.path.resolve())}
    text = cli(tmp_path, "history", "--home", str(root.path), env=env).stdout
    assert "s-dead" in text and "freshness_minutes" not in text
