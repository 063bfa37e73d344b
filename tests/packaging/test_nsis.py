"""The Windows installer script compiles (Debian's makensis, stub payload) and agrees with the app."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, load_build_module, need_tool

from hermes_tray.autostart.base import APP_NAME, WINDOWS_AUMID
from hermes_tray.autostart.windows import APPROVED_KEY, RUN_KEY

NSI = ROOT / "packaging" / "windows" / "hermes-tray.nsi"


def defines() -> dict[str, str]:
    return dict(re.findall(r'^!define (\w+) "([^"]*)"', NSI.read_text(), re.M))


def test_nsis_compiles_against_stub_payload(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    need_tool("makensis", "apt-get install nsis")
    payload = tmp_path / "hermes-tray"
    (payload / "_internal").mkdir(parents=True)
    for exe in ("hermes-tray.exe", "hermes-tray-cli.exe"):
        (payload / exe).write_bytes(b"MZ stub")
    (payload / "_internal" / "base_library.zip").write_bytes(b"PK stub")
    (payload / "LICENSE").write_text((ROOT / "LICENSE").read_text())
    (payload / "THIRD-PARTY-NOTICES.txt").write_text("Qt and Qt for Python (LGPL-3.0) stub notices\n")
    # -WX: warnings fail the build; -V4: makensis lists every file it packs into the installer.
    setup = load_build_module().build_nsis(payload, tmp_path / "out", verbosity=4)
    data = setup.read_bytes()
    assert setup.name.endswith("-windows-setup.exe")
    assert data[:2] == b"MZ" and b"Nullsoft" in data and len(data) > 50_000
    packed = capfd.readouterr().out
    for name in ("LICENSE", "THIRD-PARTY-NOTICES.txt", "hermes-tray.exe"):
        assert f'File: "{name}"' in packed, name  # in the installer payload, beside the program


def test_nsis_refuses_a_linux_bundle(tmp_path: Path, capsys) -> None:
    """The README's old example (`--bundle dist/hermes-tray` on Linux) built a Windows installer
    full of Linux files; now it stops with a message that says what to do, and writes nothing."""
    bundle = tmp_path / "dist" / "hermes-tray"
    (bundle / "_internal").mkdir(parents=True)
    (bundle / "hermes-tray").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(60))
    (bundle / "LICENSE").write_text("MIT")
    (bundle / "THIRD-PARTY-NOTICES.txt").write_text("notices")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        load_build_module().main(["nsis", "--bundle", str(bundle), "--out", str(out)])
    message = str(exc.value)
    assert "is a Linux bundle" in message and "built on Windows" in message
    assert not out.exists() or not any(out.iterdir())


def test_nsis_refuses_a_bundle_without_notices(tmp_path: Path) -> None:
    payload = tmp_path / "hermes-tray"
    payload.mkdir()
    (payload / "hermes-tray.exe").write_bytes(b"MZ stub")
    with pytest.raises(SystemExit, match="THIRD-PARTY-NOTICES.txt"):
        load_build_module().build_nsis(payload, tmp_path / "out")


def test_uninstall_asks_the_tray_to_quit_and_removes_the_toast_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipe the uninstaller writes "quit" to is the tray's own single-instance server name."""
    from hermes_tray.app import single_instance

    monkeypatch.setattr(single_instance.sys, "platform", "win32")
    monkeypatch.setattr(single_instance, "_user_tag", lambda: "$1")  # the script reads %USERNAME% into $1
    pipe = "\\\\.\\pipe\\" + single_instance.SingleInstance("tray").server_name
    text = NSI.read_text()
    expanded = text.replace("${PIPE_PREFIX}", defines()["PIPE_PREFIX"].replace("${APP}", APP_NAME))
    assert f'CreateFileW(w "{pipe}"' in expanded
    assert 'ReadEnvStr $1 USERNAME' in text and 'm "quit$\\n"' in text
    uninstall = text[text.index('Section "Uninstall"'):]
    assert "Call un.QuitRunningApp" in uninstall.split("\n")[1]  # before any file is touched
    assert defines()["NOTIFY_KEY"] == "Software\\Classes\\AppUserModelId\\${AUMID}"
    assert 'DeleteRegKey HKCU "${NOTIFY_KEY}"' in uninstall
    for name in ("LICENSE", "THIRD-PARTY-NOTICES.txt"):
        assert f'Delete "$INSTDIR\\{name}"' in uninstall


def test_aumid_is_the_notifiers_app_name() -> None:
    """Toasts go out under desktop-notifier's app_name; the shortcut must carry that same ID."""
    import inspect

    from hermes_tray.notify import make_notifier

    assert inspect.signature(make_notifier).parameters["app_name"].default == WINDOWS_AUMID


def test_nsis_is_per_user_and_matches_the_app() -> None:
    text = NSI.read_text()
    d = defines()
    assert "RequestExecutionLevel user" in text
    assert 'InstallDir "$LOCALAPPDATA\\Programs\\${APP}"' in text
    assert d["APP"] == APP_NAME
    assert d["AUMID"] == WINDOWS_AUMID
    assert d["RUN_KEY"] == RUN_KEY and d["APPROVED_KEY"] == APPROVED_KEY
    assert d["UNINST_KEY"].endswith("\\Uninstall\\${APP}")
    assert "HKLM" not in text  # nothing machine-wide
    assert 'WriteRegStr HKCU "${RUN_KEY}" "${APP}"' in text  # the value `autostart status` reads back
    assert "${PKEY_AppUserModel_ID}" in text and "Call SetShortcutAUMID" in text
    assert re.search(r'^Section /o "Start at login"', text, re.M)  # optional, off by default
