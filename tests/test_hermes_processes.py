"""Discovery of live Hermes processes, against real processes that look like Hermes (killed with SIGKILL)."""

from __future__ import annotations

import os
import sys

import pytest

from hermes_tray_core.hermes.processes import HermesProcesses, ProcessKind, classify, home_for
from hermes_tray_core.keys import home_path
from tests.support.fake_hermes import fake_hermes, kill

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fake processes use the POSIX shebang form")


def _root(tmp_path):
    root = tmp_path / "hermes"
    (root / "profiles" / "work").mkdir(parents=True)
    return root


def test_dashboard_is_found_with_its_home_port_and_python(tmp_path):
    root = _root(tmp_path)
    with fake_hermes("dashboard", tmp_path, env={"HERMES_HOME": str(root)}) as (proc, port):
        snap = HermesProcesses.now()
        [dash] = snap.serving(root)
        assert dash.pid == proc.pid
        assert dash.kind == ProcessKind.DASHBOARD
        assert dash.command == "hermes dashboard"
        assert dash.describe() == f"pid {proc.pid} (hermes dashboard)"
        assert [p for _ip, p in dash.listening_addresses()] == [port]
        assert dash.exe and os.path.realpath(dash.exe) == os.path.realpath(sys.executable)
        assert dash.environ_get("HERMES_HOME") == str(root)
        assert dash.is_alive()
        # Another home (the profile) is not served by it.
        assert snap.serving(root / "profiles" / "work") == []
        kill(proc)
    assert HermesProcesses.now().serving(root) == []
    assert not dash.is_alive()


def test_gateway_found_through_a_symlinked_home(tmp_path):
    root = _root(tmp_path)
    link = tmp_path / "link-to-hermes"
    link.symlink_to(root)
    with fake_hermes("gateway", tmp_path, env={"HERMES_HOME": str(link)}) as (proc, _):
        found = HermesProcesses.now().serving(root)
        assert [(p.pid, p.kind, p.command) for p in found] == [
            (proc.pid, ProcessKind.GATEWAY, "python -m tui_gateway.entry")]


def test_default_home_is_the_process_users_dot_hermes(tmp_path):
    fake_user_home = tmp_path / "user"
    (fake_user_home / ".hermes").mkdir(parents=True)
    with fake_hermes("chat", tmp_path, env={"HOME": str(fake_user_home), "HERMES_HOME": None}) as (proc, _):
        found = HermesProcesses.now().serving(fake_user_home / ".hermes")
        assert [p.pid for p in found] == [proc.pid]
        assert found[0].kind == ProcessKind.CLI and found[0].command == "hermes chat"


def test_profile_flag_and_active_profile_pick_the_profile_home(tmp_path):
    root = _root(tmp_path)
    with fake_hermes("dashboard", tmp_path, env={"HERMES_HOME": str(root)}, args=["-p", "work"]) as (proc, _):
        snap = HermesProcesses.now()
        assert snap.serving(root) == []
        assert [p.pid for p in snap.serving(root / "profiles" / "work")] == [proc.pid]
    (root / "active_profile").write_text("work\n")
    with fake_hermes("chat", tmp_path, env={"HERMES_HOME": str(root)}) as (proc, _):
        assert [p.pid for p in HermesProcesses.now().serving(root / "profiles" / "work")] == [proc.pid]


def test_webui_server_found_by_its_state_dir(tmp_path):
    root = _root(tmp_path)
    state = tmp_path / "webui-state"
    state.mkdir()
    with fake_hermes("other", tmp_path, env={"HERMES_WEBUI_STATE_DIR": str(state), "HERMES_HOME": str(root)}) as (
            proc, _):
        snap = HermesProcesses.now()
        assert [p.pid for p in snap.webui_servers(state)] == [proc.pid]
        assert snap.serving(root) == []  # a WebUI server is not a marker-writing backend
    with fake_hermes("webui", tmp_path, env={"HERMES_HOME": str(root)}) as (proc, _):
        assert [p.pid for p in HermesProcesses.now().webui_servers(root / "webui")] == [proc.pid]


def test_unrelated_python_processes_are_not_hermes(tmp_path):
    root = _root(tmp_path)
    with fake_hermes("other", tmp_path, env={"HERMES_HOME": str(root)}) as (_proc, _):
        snap = HermesProcesses.now()
        assert snap.serving(root) == [] and snap.webui_servers(root / "webui") == []


@pytest.mark.parametrize(("argv", "kind"), [
    (["/v/bin/python3", "/v/bin/hermes", "dashboard", "--port", "9119"], ProcessKind.DASHBOARD),
    (["/v/bin/hermes", "-p", "work", "dashboard"], ProcessKind.DASHBOARD),
    (["/v/bin/hermes", "-m", "dashboard", "chat"], ProcessKind.CLI),  # -m takes a value: the model
    (["/v/bin/hermes"], ProcessKind.CLI),
    (["hermes.exe", "gateway", "run"], ProcessKind.CLI),
    (["python", "-u", "-m", "tui_gateway.entry"], ProcessKind.GATEWAY),
    (["python", "-m", "hermes_cli.main", "dashboard"], ProcessKind.DASHBOARD),
    (["/usr/bin/hermes-tray", "status"], None),
    (["python", "-m", "hermes_tray", "tray"], None),
    (["vim", "hermes"], None),
])
def test_classify(argv, kind):
    assert classify(argv) == kind


def test_home_rules_follow_hermes_profile_override(tmp_path):
    root = _root(tmp_path)
    prof = root / "profiles" / "work"
    env = {"HERMES_HOME": str(root)}
    assert home_for(ProcessKind.CLI, ["hermes", "--profile=work", "chat"], env) == prof
    assert home_for(ProcessKind.CLI, ["hermes", "-p", "Bad Name", "chat"], env) == root
    assert home_for(ProcessKind.CLI, ["hermes", "chat"], {"HERMES_HOME": str(prof)}) == prof
    # A gateway never reads profile flags: HERMES_HOME only.
    assert home_for(ProcessKind.GATEWAY, ["python", "-m", "tui_gateway.entry", "-p", "work"], env) == root
    (root / "active_profile").write_text("work")
    assert home_for(ProcessKind.DASHBOARD, ["hermes", "dashboard"], env) == prof
    assert home_for(ProcessKind.DASHBOARD, ["hermes", "dashboard"], {**env, "HERMES_S6_SUPERVISED_CHILD": "1"}) == root
    assert home_path(root) == home_path(tmp_path / "hermes" / "." )
