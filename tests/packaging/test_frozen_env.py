"""child_environment(): a frozen app's children get the user's environment, not the bundle's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, alias_dir, need_module, run

from hermes_tray_core.process.child_env import child_environment


@pytest.fixture()
def frozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bundle = tmp_path / "opt" / "hermes-tray" / "_internal"
    bundle.mkdir(parents=True)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    return bundle


def test_not_frozen_is_a_plain_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sys, "_MEIPASS", raising=False)
    base = {"LD_LIBRARY_PATH": "/x", "LD_LIBRARY_PATH_ORIG": "/y", "PATH": "/usr/bin"}
    env = child_environment(base)
    assert env == base and env is not base
    assert child_environment() == dict(os.environ)


def test_restores_saved_library_path(frozen: Path) -> None:
    base = {
        "LD_LIBRARY_PATH": f"{frozen}:/home/u/lib",
        "LD_LIBRARY_PATH_ORIG": "/home/u/lib",
        "HOME": "/home/u",
        "HERMES_HOME": "/home/u/.hermes",
    }
    env = child_environment(base)
    assert env == {"LD_LIBRARY_PATH": "/home/u/lib", "HOME": "/home/u", "HERMES_HOME": "/home/u/.hermes"}
    assert base["LD_LIBRARY_PATH_ORIG"] == "/home/u/lib"  # input untouched


def test_drops_library_path_the_user_never_had(frozen: Path) -> None:
    env = child_environment({"LD_LIBRARY_PATH": str(frozen), "PATH": "/usr/bin"})
    assert "LD_LIBRARY_PATH" not in env
    assert env["PATH"] == "/usr/bin"


def test_drops_bundle_entries_from_search_paths(frozen: Path) -> None:
    qt = frozen / "PySide6" / "Qt"
    base = {
        "PATH": os.pathsep.join([str(frozen), "/usr/local/bin", "/usr/bin"]),
        "QT_PLUGIN_PATH": str(qt / "plugins"),
        "QML2_IMPORT_PATH": str(qt / "qml"),
        "DYLD_LIBRARY_PATH": os.pathsep.join([str(frozen), "/opt/homebrew/lib"]),
        "PYTHONPATH": "/home/u/py",
        "_PYI_APPLICATION_HOME_DIR": str(frozen),
        "_PYI_ARCHIVE_FILE": str(frozen.parent / "hermes-tray"),
        "_PYI_PARENT_PROCESS_LEVEL": "0",
        "_MEIPASS2": str(frozen),
    }
    env = child_environment(base)
    assert env == {
        "PATH": os.pathsep.join(["/usr/local/bin", "/usr/bin"]),
        "DYLD_LIBRARY_PATH": "/opt/homebrew/lib",
        "PYTHONPATH": "/home/u/py",
    }


def test_sibling_folder_with_common_prefix_is_kept(frozen: Path) -> None:
    sibling = str(frozen) + "-other"
    env = child_environment({"PATH": sibling})
    assert env["PATH"] == sibling


def test_empty_original_is_restored_as_empty(frozen: Path) -> None:
    env = child_environment({"LD_LIBRARY_PATH": str(frozen), "LD_LIBRARY_PATH_ORIG": ""})
    assert "LD_LIBRARY_PATH" not in env or env["LD_LIBRARY_PATH"] == ""


PROBE = """
import json, os, sys
from hermes_tray_core.process.child_env import child_environment
print(json.dumps({"bundle": sys._MEIPASS, "own": dict(os.environ), "child": child_environment()}))
"""


@pytest.mark.slow
def test_real_bootloader_round_trip(tmp_path: Path) -> None:
    """A tiny real PyInstaller app: its child gets exactly the environment the app was started with."""
    need_module("PyInstaller", "pip install -e '.[build]'")
    script = tmp_path / "probe_env.py"
    script.write_text(PROBE)
    alias = alias_dir(tmp_path / "work")
    result = run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN", "--onedir",
         "--paths", str(alias), "--paths", str(ROOT),
         "--distpath", str(tmp_path / "dist"), "--workpath", str(tmp_path / "work"), "--specpath", str(tmp_path),
         str(script)],
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    exe = tmp_path / "dist" / "probe_env" / "probe_env"
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for extra in ({"LD_LIBRARY_PATH": "/custom/lib"}, {}):
        launched = {**base, **extra}
        out = json.loads(subprocess.run([str(exe)], env=launched, capture_output=True, text=True, check=True).stdout)
        assert out["own"]["LD_LIBRARY_PATH"].split(os.pathsep)[0] == out["bundle"]  # what the bootloader did
        assert out["child"] == launched
