"""The Windows installer script compiles (Debian's makensis, stub payload) and agrees with the app."""

from __future__ import annotations

import re
from pathlib import Path

from _pkg_helpers import ROOT, load_build_module, need_tool

from hermes_tray.autostart.base import APP_NAME, WINDOWS_AUMID
from hermes_tray.autostart.windows import APPROVED_KEY, RUN_KEY

NSI = ROOT / "packaging" / "windows" / "hermes-tray.nsi"


def defines() -> dict[str, str]:
    return dict(re.findall(r'^!define (\w+) "([^"]*)"', NSI.read_text(), re.M))


def test_nsis_compiles_against_stub_payload(tmp_path: Path) -> None:
    need_tool("makensis", "apt-get install nsis")
    payload = tmp_path / "hermes-tray"
    (payload / "_internal").mkdir(parents=True)
    for exe in ("hermes-tray.exe", "hermes-tray-cli.exe"):
        (payload / exe).write_bytes(b"MZ stub")
    (payload / "_internal" / "base_library.zip").write_bytes(b"PK stub")
    setup = load_build_module().build_nsis(payload, tmp_path / "out")  # -WX: warnings fail the build
    data = setup.read_bytes()
    assert setup.name.endswith("-windows-setup.exe")
    assert data[:2] == b"MZ" and b"Nullsoft" in data and len(data) > 50_000


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
