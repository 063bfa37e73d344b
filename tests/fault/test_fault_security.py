"""Security: private modes, symlink refusal, how the gateway is launched, prompt text never logged.

One realistic session produces every kind of file the project writes — through the real
command line, the headless helper and the tray in subprocesses, under a permissive umask
(022, so a file created with a default mode would show as 0644): tray settings, scan cache,
decision journal, lease db, config lock, gateway logs, tray/helper logs, instance locks and
socket, marker file and its lock. Then:

- every file under the tray's own dirs is 0600 (sockets: no group/other bits) and every dir
  0700; in the Hermes home, the marker file and its lock are 0600 and the user's own
  ``config.yaml`` keeps its mode after the tray edited it;
- distinctive prompt texts (one skipped, one resumed, one left for the helper and the tray to
  notify about while no notification server is there, so notifications go to the log) appear
  in no file under the tray's dirs: logs, journals, caches, lease db;
- marker, lock and journal paths (and the dirs that hold them) that are symlinks are refused,
  and the symlink's target is never written;
- the gateway is started with an argv list (no shell: a home path full of shell syntax is
  inert), the prompt never on its command line, and a controlled environment.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultkit import environ  # noqa: E402

from hermes_tray_core.turn import Turn

P_SKIP = "QUOKKA-7731 skip me: rewrite the billing module in Rust"
P_RESUME = "NARWHAL-4402 resume me: migrate the database with zero downtime"
P_NOTIFY = "AXOLOTL-9158 notify me: summarise the incident report for the board"
PROMPTS = (P_SKIP, P_RESUME, P_NOTIFY)
TRAY_DIRS = ("tray-config", "tray-state", "tray-logs", "tray-cache", "tray-run")


def _run(argv, env, timeout=120):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, umask=0o022)


@pytest.fixture(scope="module")
def session(tmp_path_factory, sim_roots):
    """Run the whole realistic session once; the tests below inspect what it left."""
    from hermes_tray.demo import sim_state
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.stores.settings import TraySettings, save_settings
    from tests.support.sim_homes import make_home, plant_marker, tray_dirs

    root = tmp_path_factory.mktemp("security")
    old_umask = os.umask(0o022)
    try:
        sim = sim_roots["legacy"]
        home, k_skip = make_home(root / "home", turn_seconds=0.3)
        os.chmod(home / "config.yaml", 0o644)
        k_resume = sim_state.create_session(home, title="resume me")
        k_notify = sim_state.create_session(home, title="notify me")
        env = {**os.environ, **tray_dirs(root), "QT_QPA_PLATFORM": "offscreen"}
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # no notification server: notifications go to the log
        with environ(tray_dirs(root)):
            save_settings(TraySettings(mode="ask", hermes_command=tuple(sim_command(sim))))
        for key, prompt in ((k_skip, P_SKIP), (k_resume, P_RESUME), (k_notify, P_NOTIFY)):
            plant_marker(home, key, prompt)
        cli = [sys.executable, "-m", "hermes_tray"]
        h = ["--home", str(home)]
        results = {}
        ev_helper, ev_tray = root / "helper-events.jsonl", root / "tray-events.jsonl"
        daemons = [
            subprocess.Popen(cli + ["helper", "--no-notifications"] + h, env={**env, "HERMES_TRAY_EVENTS": str(ev_helper)},
                             umask=0o022, stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
            subprocess.Popen(cli + h, env={**env, "HERMES_TRAY_EVENTS": str(ev_tray)}, umask=0o022,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
        ]
        try:
            # they scan and see the three interrupted turns (and "notify", to the log)
            keys = {k_skip, k_resume, k_notify}
            for events in (ev_helper, ev_tray):
                assert _wait_scan(events, keys, 30), f"no scan with the three turns in {events.name}"
            results.update(_session_commands(cli, h, env, k_skip, k_resume))
            time.sleep(1.0)
        finally:
            for d in daemons:
                d.send_signal(signal.SIGTERM)
            outs = [d.communicate(timeout=20)[0].decode(errors="replace") for d in daemons]
    finally:
        os.umask(old_umask)
    return {"root": root, "home": home, "results": results, "daemon_out": outs,
            "keys": (k_skip, k_resume, k_notify), "daemon_codes": [d.returncode for d in daemons]}


def _wait_scan(events: Path, keys: set[str], timeout: float) -> bool:
    """Until a scan event of that process lists every key (the tray's event stream, HERMES_TRAY_EVENTS)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            lines = events.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "scan" and keys <= set(ev.get("verdicts") or {}):
                return True
        time.sleep(0.05)
    return False


def _session_commands(cli, h, env, k_skip, k_resume) -> dict:
    results = {}
    for name, argv in {
        "status": cli + ["status"] + h,
        "status_json": cli + ["status", "--json"] + h,
        "skip": cli + ["skip", k_skip] + h,
        "resume": cli + ["resume", k_resume, "--wait"] + h,
        "config_yaml": cli + ["config", "set", "freshness_minutes", "20"] + h,
        "config_toml": cli + ["config", "set", "notify", "true"] + h,
        "history": cli + ["history"] + h,
        "doctor": cli + ["doctor"] + h,
    }.items():
        results[name] = _run(argv, env)
    return results


def test_the_session_really_ran(session):
    r = session["results"]
    for name in ("status", "status_json", "skip", "resume", "config_yaml", "config_toml", "history"):
        assert r[name].returncode == 0, (name, r[name].stdout[-500:], r[name].stderr[-500:])
    assert session["daemon_codes"] == [0, 0], session["daemon_out"]
    logs = list((session["root"] / "tray-logs").rglob("*"))
    assert any(p.name.endswith(".log") and "gateway" in str(p) for p in logs), logs
    assert any(p.name == "hermes-tray-helper.log" for p in logs), logs


def _walk(root: Path):
    yield root, os.lstat(root)
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(dirpath) / n
            yield p, os.lstat(p)


def test_every_file_0600_every_dir_0700(session):
    root, home = session["root"], session["home"]
    bad = []
    seen = 0
    for d in TRAY_DIRS:
        if not (root / d).exists():
            continue
        for p, st in _walk(root / d):
            seen += 1
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode) and mode != 0o700:
                bad.append(f"dir {oct(mode)} {p}")
            elif stat.S_ISREG(st.st_mode) and mode != 0o600:
                bad.append(f"file {oct(mode)} {p}")
            elif stat.S_ISSOCK(st.st_mode) and mode & 0o077:
                bad.append(f"socket {oct(mode)} {p}")
            elif stat.S_ISLNK(st.st_mode):
                bad.append(f"symlink {p}")
    assert seen > 10
    desk = home / "desktop"
    for p in [desk, *desk.iterdir()]:
        mode = stat.S_IMODE(os.lstat(p).st_mode)
        if p.name in ("interrupted_turns.json", "interrupted_turns.json.lock") and mode != 0o600:
            bad.append(f"marker file {oct(mode)} {p}")
    if stat.S_IMODE(os.lstat(desk).st_mode) != 0o700:
        bad.append(f"desktop dir {oct(stat.S_IMODE(os.lstat(desk).st_mode))}")
    assert not bad, "\n".join(bad)
    # The user's own config.yaml was edited (freshness 20) and keeps its mode.
    assert "freshness_minutes: 20" in (home / "config.yaml").read_text()
    assert stat.S_IMODE(os.stat(home / "config.yaml").st_mode) == 0o644


def test_prompt_text_never_in_any_tray_file(session):
    root = session["root"]
    needles = [p.encode() for p in PROMPTS] + [p.split(" ", 1)[0].encode() for p in PROMPTS]
    hits = []
    for d in TRAY_DIRS:
        for p in (root / d).rglob("*"):
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                hits += [f"{p}: {n.decode()}" for n in needles if n in data]
    for out in session["daemon_out"]:  # stderr of tray and helper (what a service manager would log)
        hits += [f"daemon output: {n.decode()}" for n in needles if n in out.encode()]
    assert not hits, "\n".join(hits)


# ---------------------------------------------------------------------------------------- symlinks


@pytest.fixture
def trap(tmp_path):
    """A file that must never be written through a link."""
    t = tmp_path / "victim.txt"
    t.write_text("precious")
    os.chmod(t, 0o644)
    return t


def _untouched(trap: Path) -> None:
    assert trap.read_text() == "precious" and stat.S_IMODE(os.stat(trap).st_mode) == 0o644


def test_marker_file_symlink_refused(tmp_path, trap):
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = tmp_path / "home"
    (home / "desktop").mkdir(parents=True)
    (home / "desktop" / "interrupted_turns.json").symlink_to(trap)
    with pytest.raises(OSError):
        markers.MarkerStore(home).record("20261129_120000_s", "p")
    with pytest.raises(OSError):
        markers.list_turn_markers(home)
    turn_marker.record_turn_start(home, "20261129_120000_s", "p")  # Hermes call: silent, and refuses too
    turn_marker.clear_turn_marker(home, "20261129_120000_s")
    _untouched(trap)


def test_marker_lock_symlink_refused(tmp_path, trap):
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = tmp_path / "home"
    (home / "desktop").mkdir(parents=True)
    (home / "desktop" / "interrupted_turns.json.lock").symlink_to(trap)
    with pytest.raises(OSError):
        markers.MarkerStore(home).record("20261129_120000_s", "p")
    turn_marker.record_turn_start(home, "20261129_120000_s", "p")
    _untouched(trap)
    assert not (home / "desktop" / "interrupted_turns.json").exists()


def test_a_symlinked_desktop_dir_is_followed_as_hermes_follows_it(tmp_path):
    """A user who moved ``<home>/desktop`` elsewhere and linked it: Hermes writes its markers through the link,
    so the tray reads and writes that same file (refusing would leave the turns Hermes records there
    unresumable and unskippable). Whoever can make that link can edit the markers anyway; what stays
    refused is a link in place of the marker, lock or temp file itself (the tests above)."""
    from hermes_tray_core.markers import store as markers
    from tests.support.hermes_reference import reference_or_skip

    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "desktop").symlink_to(elsewhere, target_is_directory=True)
    markers.MarkerStore(home).record("20261129_120000_s", "p")
    assert json.loads((elsewhere / "interrupted_turns.json").read_bytes())["20261129_120000_s"]["prompt"] == "p"
    assert stat.S_IMODE(os.stat(elsewhere / "interrupted_turns.json").st_mode) == 0o600
    hermes = reference_or_skip()  # Hermes' own marker store, as shipped by the Hermes that writes markers
    entry = hermes.read_turn_marker(home, "20261129_120000_s")  # Hermes' own reader, through the link
    assert entry is not None and entry["prompt"] == "p"
    assert markers.remove_marker_if_unchanged(home, "20261129_120000_s", entry)  # a skip works there too
    assert hermes.read_turn_marker(home, "20261129_120000_s") is None
    assert not [n for n in os.listdir(elsewhere) if n.endswith(".tmp")]


def test_ledger_symlink_refused(tmp_path, trap, monkeypatch):
    from hermes_tray_core.stores.ledger import Ledger
    from hermes_tray_core.turn import TurnId

    path = tmp_path / "state" / "ledger.sqlite3"
    path.parent.mkdir(mode=0o700)
    path.symlink_to(trap)
    with pytest.raises(OSError):  # refused, said: never written through the link
        Ledger(path).record("skipped", TurnId(str(tmp_path), "20261129_120000_s", 1.0, 0))
    _untouched(trap)
    assert path.is_symlink() and os.readlink(path) == str(trap)  # and the link itself left alone


def test_settings_and_config_yaml_symlinks_refused(tmp_path, trap, monkeypatch):
    from hermes_tray_core.hermes import config_edit as backend_config
    from hermes_tray_core.stores import settings

    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "state"))
    cfg = tmp_path / "cfg"
    cfg.mkdir(mode=0o700)
    (cfg / "config.toml").symlink_to(trap)
    with pytest.raises((OSError, settings.SettingsError)):
        settings.update_settings({"mode": "off"}, cfg / "config.toml")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").symlink_to(trap)
    with pytest.raises(backend_config.BackendConfigError):
        backend_config.write_auto_continue(home, enabled=False)
    _untouched(trap)


# ---------------------------------------------------------------------------------------- gateway launch

FAKE_PYTHON = """#!/bin/sh
# Records how it was started, then behaves as the real interpreter.
{python} -c 'import json, os, sys; f = open(sys.argv[1], "a"); f.write(json.dumps({{"argv": sys.argv[2:], "env": dict(os.environ)}}) + "\\n")' "{record}" "$@"
exec {python} "$@"
"""


def test_gateway_started_with_argv_list_and_controlled_env(tmp_path, monkeypatch, sim_roots):
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.backend.install import install_from_command
    from hermes_tray_core.continuing import gateway
    from tests.support.sim_homes import make_home, plant_marker

    monkeypatch.setenv("HERMES_TRAY_SECRET_PROBE", "leak-me-not")  # tray dirs: tests/conftest.py user_dirs
    real_python = sim_command(sim_roots["legacy"])[0]
    record = tmp_path / "launches.jsonl"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTHON.format(python=real_python, record=record))
    fake.chmod(0o755)
    # A home whose path is full of shell syntax: inert when no shell is involved.
    pwned = tmp_path / "pwned"
    home, key = make_home(tmp_path / f"home $(touch {pwned}) `touch {pwned}` ; touch {pwned}", turn_seconds=0.2)
    entry = plant_marker(home, key, P_RESUME)
    from hermes_tray_core.continuing.resume import resume_turn

    res = resume_turn(Turn.of(home, key, entry), install=install_from_command([str(fake)]),
                      options=gateway.GatewayOptions(ready_timeout=20, rpc_timeout=20, idle_timeout=30,
                                                     decline_grace=0.5, stop_grace=5, shutdown_grace=3))
    assert res.ok, res.message
    assert not pwned.exists(), "a shell interpreted the home path"
    launches = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    spawns = [x for x in launches if x["argv"][:2] == ["-m", "tui_gateway.entry"]]
    assert len(spawns) == 1, [x["argv"][:3] for x in launches]
    g = spawns[0]
    assert g["argv"] == ["-m", "tui_gateway.entry"]
    for x in launches:  # neither the probe nor the gateway carries prompt text on its command line
        assert not any(P_RESUME.split(" ", 1)[0] in a for a in x["argv"])
    assert g["env"]["HERMES_HOME"] == str(home)
    assert not [k for k in g["env"] if k.startswith("HERMES_TRAY_")], "tray-internal variables leaked"
