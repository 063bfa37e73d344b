"""install.sh / uninstall.sh against a stub bundle: fast, so every rule is checked on every run.

The real frozen bundle goes through the same scripts in test_bundle.py (slow).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, USER_DATA, clean_env, leftovers, load_build_module, need_tool, run

STUB = """#!/bin/sh
case "$1" in
    --version) echo "hermes-tray 0.0-stub" ;;
    autostart) mkdir -p "$HOME/.config/autostart" && echo "[Desktop Entry]" >"$HOME/.config/autostart/hermes-tray.desktop" ;;
esac
"""


@pytest.fixture()
def unpacked(tmp_path: Path) -> Path:
    """The tarball's folder, laid out by build.py around a stub bundle."""
    bundle = tmp_path / "bundle" / "hermes-tray"
    (bundle / "_internal" / "resources").mkdir(parents=True)
    exe = bundle / "hermes-tray"
    exe.write_text(STUB)
    exe.chmod(0o700)  # install.sh must give it normal modes whatever it came with
    (bundle / "_internal" / "lib.so").write_bytes(b"\0")
    stage = tmp_path / "hermes-tray-0.0-linux-x86_64"
    load_build_module().stage_linux(bundle, stage)
    return stage


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = tmp_path / "Home Dir"  # a space, as real homes on some systems have
    h.mkdir()
    return h


def install(unpacked: Path, home: Path, *args: str, **env: str):
    return run(["sh", str(unpacked / "install.sh"), *args], env=clean_env(home, **env), cwd=str(home))


def uninstall(home: Path, *args: str, script: Path | None = None):
    script = script or home / ".local" / "opt" / "hermes-tray" / "uninstall.sh"
    return run(["sh", str(script), *args], env=clean_env(home), cwd="/")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_install_layout_and_modes(unpacked: Path, home: Path) -> None:
    result = install(unpacked, home)
    assert result.returncode == 0, result.stderr
    opt = home / ".local" / "opt" / "hermes-tray"
    exe = opt / "hermes-tray"
    assert mode(exe) == 0o755 and mode(opt) == 0o755 and mode(opt / "_internal" / "lib.so") == 0o644
    assert mode(opt / "uninstall.sh") == 0o755
    link = home / ".local" / "bin" / "hermes-tray"
    assert link.is_symlink() and os.readlink(link) == str(exe)
    desktop = home / ".local" / "share" / "applications" / "hermes-tray.desktop"
    assert mode(desktop) == 0o644
    text = desktop.read_text()
    assert f'Exec="{exe}"' in text and f"TryExec={exe}" in text
    assert "X-GNOME-UsesNotifications=true" in text and "@" not in text
    icons = sorted(p.relative_to(home).as_posix() for p in (home / ".local/share/icons/hicolor").rglob("hermes-tray.*"))
    shipped = sorted(
        (Path(".local/share/icons/hicolor") / p.relative_to(unpacked / "share/icons/hicolor")).as_posix()
        for p in (unpacked / "share/icons/hicolor").rglob("*")
        if p.is_file()
    )
    assert icons == shipped
    if not shipped:
        pytest.skip("resources/icons has no app icon yet: icon installation not exercised")
    assert any("/48x48/apps/hermes-tray.png" in i for i in icons)
    assert all(mode(home / i) == 0o644 for i in icons)
    assert "installed hermes-tray 0.0-stub" in result.stdout


def test_installed_desktop_entry_validates(unpacked: Path, home: Path) -> None:
    tool = need_tool("desktop-file-validate", "apt-get install desktop-file-utils")
    assert install(unpacked, home).returncode == 0
    desktop = home / ".local" / "share" / "applications" / "hermes-tray.desktop"
    result = run([tool, str(desktop)])
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout


def test_install_is_idempotent_and_upgrades_in_place(unpacked: Path, home: Path) -> None:
    assert install(unpacked, home).returncode == 0
    opt = home / ".local" / "opt" / "hermes-tray"
    (opt / "_internal" / "stale-from-old-version.so").write_bytes(b"")
    before = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    second = install(unpacked, home)
    assert second.returncode == 0, second.stderr
    after = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    assert after == [p for p in before if "stale-from-old-version" not in p]
    assert not any(p.name.startswith(".hermes-tray.") for p in opt.parent.iterdir())  # no staging litter


def test_foreign_command_link_is_kept_unless_forced(unpacked: Path, home: Path, tmp_path: Path) -> None:
    pipx_exe = tmp_path / "pipx-venv-hermes-tray"
    pipx_exe.write_text("#!/bin/sh\n")
    link = home / ".local" / "bin" / "hermes-tray"
    link.parent.mkdir(parents=True)
    link.symlink_to(pipx_exe)
    result = install(unpacked, home)
    assert result.returncode == 0
    assert os.readlink(link) == str(pipx_exe) and "left alone" in result.stdout
    uninstall(home)
    assert os.readlink(link) == str(pipx_exe)  # not ours: the uninstaller leaves it too
    assert install(unpacked, home, "--force").returncode == 0
    assert os.readlink(link) == str(home / ".local/opt/hermes-tray/hermes-tray")


def test_refuses_someone_elses_home(unpacked: Path, home: Path) -> None:
    if os.geteuid() == 0:
        os.chown(home, 54321, 54321)
        target = home
    else:
        target = Path("/")  # owned by root, not by this user
    result = run(["sh", str(unpacked / "install.sh")], env=clean_env(target))
    assert result.returncode != 0 and "belongs to uid" in result.stderr
    result = run(["sh", str(unpacked / "uninstall.sh")], env=clean_env(target))
    assert result.returncode != 0 and "belongs to uid" in result.stderr
    if os.geteuid() == 0:
        assert list(home.iterdir()) == []


def test_a_build_that_cannot_run_here_changes_nothing(unpacked: Path, home: Path) -> None:
    assert install(unpacked, home).returncode == 0
    installed = home / ".local" / "opt" / "hermes-tray" / "hermes-tray"
    (unpacked / "hermes-tray" / "hermes-tray").write_text("#!/bin/sh\necho 'GLIBC_2.99 not found' >&2\nexit 127\n")
    result = install(unpacked, home)
    assert result.returncode != 0 and "GLIBC_2.99" in result.stderr
    assert installed.read_text() == STUB  # the working install is untouched
    assert not any(p.name.startswith(".hermes-tray.") for p in installed.parent.parent.iterdir())


def test_refuses_to_replace_a_folder_it_did_not_make(unpacked: Path, home: Path) -> None:
    precious = home / ".local" / "opt" / "hermes-tray" / "notes.txt"
    precious.parent.mkdir(parents=True)
    precious.write_text("mine")
    result = install(unpacked, home)
    assert result.returncode != 0 and "not made by this installer" in result.stderr
    assert precious.read_text() == "mine"


def test_uninstall_keeps_user_data_unless_purged(unpacked: Path, home: Path) -> None:
    assert install(unpacked, home, "--autostart").returncode == 0
    assert (home / ".config/autostart/hermes-tray.desktop").is_file()  # through the app itself
    for d in USER_DATA:
        (home / d).mkdir(parents=True, exist_ok=True)
        (home / d / "keep.me").write_text("user data")
    unit = home / ".config/systemd/user/hermes-tray-helper.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/x\n")
    (unit.parent / "default.target.wants").mkdir()
    (unit.parent / "default.target.wants" / unit.name).symlink_to(unit)
    result = uninstall(home)
    assert result.returncode == 0, result.stderr
    assert leftovers(home, USER_DATA) == []
    assert all((home / d / "keep.me").is_file() for d in USER_DATA)
    again = uninstall(home, script=unpacked / "uninstall.sh")  # idempotent
    assert again.returncode == 0, again.stderr
    assert uninstall(home, "--purge", script=unpacked / "uninstall.sh").returncode == 0
    assert [d for d in USER_DATA if (home / d).exists()] == [".hermes"]  # Hermes' own data is never ours


def test_scripts_are_posix_sh() -> None:
    for script in ("install.sh", "uninstall.sh"):
        path = ROOT / "packaging" / "linux" / script
        assert path.read_text().startswith("#!/bin/sh\n")
        assert mode(path) & 0o111, f"{script} should be executable in git"
        dash = need_tool("dash", "apt-get install dash")
        assert run([dash, "-n", str(path)]).returncode == 0


def test_scripts_pass_shellcheck() -> None:
    tool = need_tool("shellcheck", "apt-get install shellcheck")
    scripts = [str(ROOT / "packaging" / "linux" / s) for s in ("install.sh", "uninstall.sh")]
    result = run([tool, "-s", "sh", *scripts])
    assert result.returncode == 0, result.stdout
