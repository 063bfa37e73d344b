"""A removed installation (``pipx uninstall``, a deleted bundle) leaves start-at-login entries
behind; they must then do nothing at login instead of failing. Checked with the desktop's own
parsers: GLib (``gio launch``, what GNOME's session uses for XDG entries, honours ``TryExec``) and
systemd's condition evaluation (``systemd-analyze condition``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _pkg_helpers import need_tool, run

from hermes_tray.autostart.desktop_entry import read_entry, render_template
from hermes_tray.autostart.systemd import SystemdUserAutoStart

ODD_DIR = "My Apps/hermes tray"  # spaces: quoted in Exec, literal in TryExec and ConditionPathExists


def fake_install(tmp_path: Path) -> Path:
    exe = tmp_path / ODD_DIR / "hermes-tray"
    exe.parent.mkdir(parents=True)
    marker = tmp_path / "ran"
    exe.write_text(f"#!/bin/sh\necho ran >'{marker}'\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("template", ["hermes-tray-autostart.desktop.in", "hermes-tray.desktop.in"])
def test_xdg_entry_of_a_removed_app_is_skipped(template: str, tmp_path: Path) -> None:
    gio = need_tool("gio", "apt-get install libglib2.0-bin")
    exe = fake_install(tmp_path)
    entry = tmp_path / "hermes-tray.desktop"
    entry.write_text(render_template(template, [str(exe)]).replace("NoDisplay=true\n", ""))
    assert read_entry(entry)["TryExec"] == str(exe)
    env = dict(os.environ, XDG_DATA_DIRS=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))

    launched = run([gio, "launch", str(entry)], env=env, timeout=30)
    assert launched.returncode == 0, launched.stderr
    for _ in range(100):  # gio starts it detached
        if (tmp_path / "ran").exists():
            break
        run(["sleep", "0.05"])
    assert (tmp_path / "ran").read_text() == "ran\n"

    (tmp_path / "ran").unlink()
    exe.unlink()  # `pipx uninstall` / `rm -r ~/.local/opt/hermes-tray`
    skipped = run([gio, "launch", str(entry)], env=env, timeout=30)
    assert skipped.returncode != 0 and "Unable to load" in skipped.stderr
    assert not (tmp_path / "ran").exists()


def test_helper_unit_of_a_removed_app_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = need_tool("systemd-analyze", "apt-get install systemd")
    exe = fake_install(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    unit = SystemdUserAutoStart([str(exe), "helper"], systemctl=lambda args: None)
    unit.enable()
    lines = Path(unit.location).read_text().splitlines()
    (condition,) = [line for line in lines if line.startswith("ConditionPathExists=")]
    assert lines.index(condition) < lines.index("[Service]")  # a [Unit] setting

    met = run([tool, "condition", condition])
    assert met.returncode == 0, met.stdout + met.stderr
    assert f"ConditionPathExists={exe} succeeded" in met.stderr
    exe.unlink()
    failed = run([tool, "condition", condition])
    assert failed.returncode != 0 and "failed" in failed.stderr
    assert unit.registered_command() == [str(exe), "helper"]  # the rest of the unit is unchanged


def test_helper_unit_condition_escapes_percent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd expands %-specifiers in conditions too: a '%' in the path is written as '%%'."""
    tool = need_tool("systemd-analyze", "apt-get install systemd")
    exe = tmp_path / "50% off" / "hermes-tray"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    unit = SystemdUserAutoStart([str(exe)], systemctl=lambda args: None)
    unit.enable()
    (condition,) = [ln for ln in Path(unit.location).read_text().splitlines() if ln.startswith("ConditionPath")]
    met = run([tool, "condition", condition])
    assert met.returncode == 0 and f"ConditionPathExists={exe} succeeded" in met.stderr, met.stderr


def test_helper_unit_with_condition_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = need_tool("systemd-analyze", "apt-get install systemd")
    exe = fake_install(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    unit = SystemdUserAutoStart([str(exe), "helper"], systemctl=lambda args: None)
    unit.enable()
    result = run([tool, "--user", "verify", unit.location], env=dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
