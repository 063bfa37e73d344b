"""Start at login: on/off/status round trips on every backend, state read back from the system.

Linux backends write real files under a temporary HOME; the macOS plist is checked for its
exact content; the Windows Run value goes through a fake ``winreg``.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_tray.autostart import get_autostart, launch_command
from hermes_tray.autostart.base import AutoStartError
from hermes_tray.autostart.desktop_entry import parse_exec, quote_exec, read_entry
from hermes_tray.autostart.launchagent import LaunchAgentAutoStart
from hermes_tray.autostart.systemd import SystemdUserAutoStart, parse_exec_start, quote_exec_start
from hermes_tray.autostart.windows import APPROVED_KEY, RUN_KEY, WindowsRunAutoStart
from hermes_tray.autostart.xdg import XdgAutoStart
from hermes_tray.cli.exits import EXIT_OK, EXIT_REFUSED
from hermes_tray.cli.main import main

REPO = Path(__file__).resolve().parents[1]
ODD_COMMAND = ["/opt/My Apps/hermes tray/hermes-tray", "--flag=100%", 'say "hi" $HOME `x` \\ back']


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME with no XDG overrides and no reachable user systemd."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "etc-xdg"))
    return h


def validate_desktop_file(path: Path) -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate not installed (apt-get install desktop-file-utils)")
    result = subprocess.run([tool, str(path)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


# --- Linux: XDG autostart entry -------------------------------------------------------------


def test_xdg_round_trip(home: Path) -> None:
    auto = XdgAutoStart(ODD_COMMAND)
    entry = home / ".config" / "autostart" / "hermes-tray.desktop"
    assert auto.location == str(entry)
    assert not auto.is_enabled()
    auto.set_enabled(True)
    assert auto.is_enabled()
    assert oct(entry.stat().st_mode & 0o777) == "0o644"
    assert oct(entry.parent.stat().st_mode & 0o777) == "0o700"  # created by us: private
    fields = read_entry(entry)
    assert fields is not None
    assert fields["X-GNOME-Autostart-Delay"].isdigit()
    assert fields["X-KDE-autostart-after"] == "panel"
    assert fields["X-GNOME-UsesNotifications"] == "true"
    assert auto.registered_command() == ODD_COMMAND
    validate_desktop_file(entry)
    auto.set_enabled(True)  # idempotent
    auto.set_enabled(False)
    assert not entry.exists()
    assert not auto.is_enabled()
    auto.set_enabled(False)  # idempotent


def test_xdg_honours_xdg_config_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    auto = XdgAutoStart(["/bin/true"])
    auto.enable()
    assert (tmp_path / "cfg" / "autostart" / "hermes-tray.desktop").is_file()


def test_xdg_state_is_read_back_not_remembered(home: Path) -> None:
    auto = XdgAutoStart(["/bin/true"])
    auto.enable()
    entry = Path(auto.location)
    # The user (or their desktop's settings panel) switches it off by editing the file.
    entry.write_text(entry.read_text().replace("X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false"))
    assert not XdgAutoStart(["/bin/true"]).is_enabled()
    entry.write_text(entry.read_text() + "Hidden=true\n")
    assert not auto.is_enabled()
    entry.unlink()
    assert not auto.is_enabled()
    entry.write_text("garbage without a group\n")
    assert not auto.is_enabled()


def test_xdg_system_entry_is_shadowed_on_off(home: Path, tmp_path: Path) -> None:
    system = tmp_path / "etc-xdg" / "autostart"
    system.mkdir(parents=True)
    (system / "hermes-tray.desktop").write_text("[Desktop Entry]\nType=Application\nName=Hermes Tray\nExec=hermes-tray\n")
    auto = XdgAutoStart(["/bin/true"])
    assert auto.is_enabled()
    assert auto.registered_command() == ["hermes-tray"]
    auto.set_enabled(False)
    assert read_entry(Path(auto.location))["Hidden"] == "true"
    validate_desktop_file(Path(auto.location))
    auto.set_enabled(True)
    assert auto.registered_command() == ["/bin/true"]


def test_xdg_refuses_a_symlinked_entry(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.desktop"
    target.write_text("[Desktop Entry]\nHidden=true\n")
    entry = home / ".config" / "autostart" / "hermes-tray.desktop"
    entry.parent.mkdir(parents=True)
    entry.symlink_to(target)
    with pytest.raises(OSError):
        XdgAutoStart(["/bin/true"]).enable()
    assert target.read_text() == "[Desktop Entry]\nHidden=true\n"


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1), min_size=1, max_size=4))
def test_exec_quoting_round_trips(argv: list[str]) -> None:
    assert parse_exec(quote_exec(argv)) == argv


# --- Linux: systemd user unit for the headless helper ----------------------------------------


def test_systemd_round_trip(home: Path) -> None:
    calls: list[list[str]] = []
    auto = SystemdUserAutoStart(ODD_COMMAND + ["helper"], systemctl=calls.append)
    unit = home / ".config" / "systemd" / "user" / "hermes-tray-helper.service"
    link = unit.parent / "default.target.wants" / unit.name
    assert not auto.is_enabled()
    auto.set_enabled(True)
    assert auto.is_enabled()
    assert unit.is_file() and link.is_symlink() and link.resolve() == unit.resolve()
    assert oct(unit.stat().st_mode & 0o777) == "0o644"
    assert auto.registered_command() == ODD_COMMAND + ["helper"]
    assert "WantedBy=default.target" in unit.read_text()
    # stopping the unit stops the helper alone: a Hermes it started must get no signal (it would drop the turn)
    assert "KillMode=process" in unit.read_text().splitlines()
    assert calls == [["daemon-reload"]]
    auto.set_enabled(True)
    link.unlink()  # `systemctl --user disable` by hand
    assert not auto.is_enabled()
    auto.set_enabled(True)
    auto.set_enabled(False)
    assert not unit.exists() and not os.path.lexists(link)
    assert not auto.is_enabled()


def test_systemd_masked_reads_off(home: Path) -> None:
    auto = SystemdUserAutoStart(["/bin/true", "helper"], systemctl=lambda args: None)
    auto.enable()
    Path(auto.location).unlink()
    Path(auto.location).symlink_to(os.devnull)
    assert not auto.is_enabled()
    auto.disable()
    assert Path(auto.location).is_symlink()  # the user's mask is theirs to remove


def test_systemd_unit_verifies(home: Path, tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze not installed")
    auto = SystemdUserAutoStart([sys.executable, "-c", "pass"], systemctl=lambda args: None)
    auto.enable()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    result = subprocess.run([tool, "--user", "verify", auto.location], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1), min_size=1, max_size=4))
def test_exec_start_quoting_round_trips(argv: list[str]) -> None:
    assert parse_exec_start(quote_exec_start(argv)) == argv


# --- macOS: LaunchAgent plist ----------------------------------------------------------------


def test_launchagent_exact_content_and_round_trip(home: Path) -> None:
    auto = LaunchAgentAutoStart(["/Applications/Hermes Tray.app/Contents/MacOS/hermes-tray"])
    plist = home / "Library" / "LaunchAgents" / "org.hermes-agent.hermes-tray.plist"
    assert auto.location == str(plist)
    assert not auto.is_enabled()
    auto.set_enabled(True)
    with open(plist, "rb") as fh:
        data = plistlib.load(fh)
    assert data == {
        "Label": "org.hermes-agent.hermes-tray",
        "ProgramArguments": ["/Applications/Hermes Tray.app/Contents/MacOS/hermes-tray"],
        "RunAtLoad": True,
        "ProcessType": "Interactive",
        "LimitLoadToSessionType": "Aqua",
    }
    assert plist.read_bytes().startswith(b"<?xml")
    assert oct(plist.stat().st_mode & 0o777) == "0o644"
    assert auto.registered_command() == ["/Applications/Hermes Tray.app/Contents/MacOS/hermes-tray"]
    data["Disabled"] = True
    plist.write_bytes(plistlib.dumps(data))
    assert not auto.is_enabled()
    auto.set_enabled(True)
    assert auto.is_enabled()
    auto.set_enabled(False)
    assert not plist.exists() and not auto.is_enabled()


def test_launchagent_helper_keeps_alive(home: Path) -> None:
    auto = LaunchAgentAutoStart(["/x/hermes-tray", "helper"], helper=True)
    auto.enable()
    data = plistlib.loads(Path(auto.location).read_bytes())
    assert data["Label"] == "org.hermes-agent.hermes-tray.helper"
    assert data["ProgramArguments"] == ["/x/hermes-tray", "helper"]
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["RunAtLoad"] is True


def test_launchagent_matches_packaging_template(home: Path) -> None:
    """packaging/macos holds the same plist as a template for the release step: no drift."""
    template = (REPO / "packaging" / "macos" / "org.hermes-agent.hermes-tray.plist.in").read_text()
    exe = "/Applications/Hermes Tray.app/Contents/MacOS/hermes-tray"
    rendered = plistlib.loads(template.replace("@EXEC@", exe).encode())
    assert rendered == LaunchAgentAutoStart([exe]).plist()


# --- Windows: HKCU Run value through a fake registry -------------------------------------------


class FakeKey:
    def __init__(self, values: dict[str, tuple[object, int]]) -> None:
        self.values = values

    def __enter__(self) -> FakeKey:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class FakeWinreg:
    """The slice of ``winreg`` the backend uses, with its error behaviour (FileNotFoundError)."""

    HKEY_CURRENT_USER = "HKCU"
    KEY_READ = 0x20019
    KEY_SET_VALUE = 0x0002
    REG_SZ = 1
    REG_BINARY = 3

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], dict[str, tuple[object, int]]] = {}

    def OpenKey(self, root: str, sub: str, reserved: int = 0, access: int = KEY_READ) -> FakeKey:  # noqa: N802
        if (root, sub) not in self.keys:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return FakeKey(self.keys[(root, sub)])

    def CreateKeyEx(self, root: str, sub: str, reserved: int = 0, access: int = KEY_SET_VALUE) -> FakeKey:  # noqa: N802
        return FakeKey(self.keys.setdefault((root, sub), {}))

    def QueryValueEx(self, key: FakeKey, name: str) -> tuple[object, int]:  # noqa: N802
        if name not in key.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return key.values[name]

    def SetValueEx(self, key: FakeKey, name: str, reserved: int, kind: int, data: object) -> None:  # noqa: N802
        key.values[name] = (data, kind)

    def DeleteValue(self, key: FakeKey, name: str) -> None:  # noqa: N802
        if name not in key.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        del key.values[name]

    def value(self, sub: str, name: str) -> tuple[object, int] | None:
        return self.keys.get(("HKCU", sub), {}).get(name)


EXE = r"C:\Users\Ann Lee\AppData\Local\Programs\hermes-tray\hermes-tray.exe"


def test_windows_run_value_round_trip() -> None:
    reg = FakeWinreg()
    auto = WindowsRunAutoStart([EXE], registry=reg)
    assert auto.location == r"HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run\hermes-tray"
    assert not auto.is_enabled()
    auto.set_enabled(True)
    assert reg.value(RUN_KEY, "hermes-tray") == (f'"{EXE}"', FakeWinreg.REG_SZ)
    assert auto.is_enabled()
    auto.set_enabled(True)
    auto.set_enabled(False)
    assert reg.value(RUN_KEY, "hermes-tray") is None
    assert not auto.is_enabled()
    auto.set_enabled(False)


def test_windows_task_manager_disable_is_honoured() -> None:
    reg = FakeWinreg()
    auto = WindowsRunAutoStart([EXE], registry=reg)
    auto.enable()
    # Task Manager → Startup apps → Disable: odd first byte under StartupApproved\Run.
    with reg.CreateKeyEx(reg.HKEY_CURRENT_USER, APPROVED_KEY) as key:
        reg.SetValueEx(key, "hermes-tray", 0, reg.REG_BINARY, bytes([3]) + bytes(11))
    assert not auto.is_enabled()
    auto.set_enabled(True)  # turning it on from the tray clears the flag
    assert reg.value(APPROVED_KEY, "hermes-tray") is None
    assert auto.is_enabled()
    with reg.CreateKeyEx(reg.HKEY_CURRENT_USER, APPROVED_KEY) as key:
        reg.SetValueEx(key, "hermes-tray", 0, reg.REG_BINARY, bytes([2]) + bytes(11))
    assert auto.is_enabled()  # even first byte = enabled


def test_windows_helper_uses_its_own_value() -> None:
    reg = FakeWinreg()
    WindowsRunAutoStart([EXE, "helper"], helper=True, registry=reg).enable()
    assert reg.value(RUN_KEY, "hermes-tray-helper") == (f'"{EXE}" helper', FakeWinreg.REG_SZ)
    assert reg.value(RUN_KEY, "hermes-tray") is None


# --- backend choice, launch command, CLI -----------------------------------------------------


def test_backend_per_platform(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(get_autostart(platform="linux")).__name__ == "XdgAutoStart"
    assert type(get_autostart(platform="linux", helper=True)).__name__ == "SystemdUserAutoStart"
    assert type(get_autostart(platform="freebsd14")).__name__ == "XdgAutoStart"
    assert type(get_autostart(platform="darwin")).__name__ == "LaunchAgentAutoStart"
    monkeypatch.setitem(sys.modules, "winreg", FakeWinreg())
    assert type(get_autostart(platform="win32")).__name__ == "WindowsRunAutoStart"


def test_launch_command_frozen_and_venv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = tmp_path / "bundle" / "hermes-tray"
    exe.parent.mkdir()
    exe.write_text("")
    monkeypatch.setattr(sys, "executable", str(exe))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert launch_command() == [str(exe)]
    assert launch_command(helper=True) == [str(exe), "helper"]
    cli = exe.parent / "hermes-tray-cli.exe"
    cli.write_text("")
    (exe.parent / "hermes-tray.exe").write_text("")
    monkeypatch.setattr(sys, "executable", str(cli))
    assert launch_command() == [str(exe.parent / "hermes-tray.exe")]  # never the console twin
    monkeypatch.setattr(sys, "frozen", False)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setattr(sys, "executable", str(python))
    assert launch_command() == [str(python), "-m", "hermes_tray"]
    (python.parent / "hermes-tray").write_text("")
    assert launch_command(helper=True) == [str(python.parent / "hermes-tray"), "helper"]


def test_cli_round_trip(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autostart", "status"]) == EXIT_REFUSED  # off
    assert "off" in capsys.readouterr().out
    assert main(["autostart", "on"]) == EXIT_OK
    assert "on" in capsys.readouterr().out
    assert main(["autostart", "status", "--json"]) == EXIT_OK
    status = json.loads(capsys.readouterr().out)
    assert status["enabled"] is True and status["backend"] == "xdg-autostart"
    assert status["location"] == str(home / ".config" / "autostart" / "hermes-tray.desktop")
    assert main(["--json", "autostart", "on", "--helper"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["backend"] == "systemd-user"
    assert main(["autostart", "off", "--helper"]) == EXIT_OK
    assert main(["autostart", "off"]) == EXIT_OK
    capsys.readouterr()
    assert main(["autostart", "status", "--helper"]) == EXIT_REFUSED
    assert not any(home.rglob("*.desktop")) and not any(home.rglob("*.service"))


def test_cli_reports_failure(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = home / ".config"
    blocker.write_text("not a folder")
    assert main(["autostart", "on"]) == EXIT_REFUSED
    assert "could not change start at login" in capsys.readouterr().err


def test_set_enabled_raises_when_system_disagrees(home: Path, tmp_path: Path) -> None:
    class Stuck(XdgAutoStart):
        def is_enabled(self) -> bool:
            return False

    with pytest.raises(AutoStartError):
        Stuck(["/bin/true"]).set_enabled(True)


def test_cli_does_not_import_qt() -> None:
    code = "import sys; from hermes_tray.cli.main import main; main(['autostart','status']); print('PySide6' in sys.modules)"
    env = dict(os.environ, HOME=str(Path("/nonexistent-home-for-test")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
