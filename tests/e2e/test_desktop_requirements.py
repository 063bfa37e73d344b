"""What the desktop needs, said before anything starts, and ``doctor`` seeing what the user sees.

Before: on a desktop without Qt's xcb-cursor library, ``hermes-tray`` aborted with Qt's own text
("Reinstalling the application may fix this problem"), exit 134, after the demo's simulated backend had
started, and ``doctor`` did not mention the library; on a working XEmbed tray (trayer) ``doctor`` said
"system tray: not available" and exited 1.

The library is hidden from the product's process the way a loader sees a broken install: a folder first on
``LD_LIBRARY_PATH`` holding an empty ``libxcb-cursor.so.0``, which the dynamic loader finds before the
system's and cannot load — exactly what Qt's own load of its X11 plugin then meets.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.support.product import product_env, tray_argv


def _env(desktop, tmp_path: Path, **extra: str) -> dict[str, str]:
    """A newcomer's environment on ``desktop``: a fresh HOME with no Hermes (plain ``hermes-tray`` opens the
    demo), the tray's own dirs under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "LD_LIBRARY_PATH")}
    env.update(desktop.env, HOME=str(tmp_path / "home"), PATH="/usr/bin:/bin")
    for name in ("CONFIG", "STATE", "CACHE", "LOG", "RUNTIME"):
        env[f"HERMES_TRAY_{name}_DIR"] = str(tmp_path / f"tray-{name.lower()}")
    env.update(extra)
    return product_env(env)


@pytest.fixture
def no_xcb_cursor(tmp_path: Path) -> str:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "libxcb-cursor.so.0").write_bytes(b"")
    return str(shim)


@pytest.mark.parametrize("argv", [[], ["tray"], ["demo"]], ids=["default", "tray", "demo"])
def test_without_the_xcb_cursor_library_one_line_names_the_package_and_nothing_starts(
        desktop, tmp_path: Path, no_xcb_cursor: str, argv: list[str]) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    env = _env(desktop, tmp_path, LD_LIBRARY_PATH=no_xcb_cursor)
    proc = subprocess.run(tray_argv(*argv), env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1, proc.stderr  # refused, not Qt's abort (134)
    assert len(lines) == 1, lines
    assert "libxcb-cursor0" in lines[0] and "xcb-util-cursor" in lines[0] and "Nothing was started" in lines[0]
    assert "Reinstalling the application" not in proc.stderr and "Traceback" not in proc.stderr
    assert "demo ready" not in proc.stdout
    assert not (tmp_path / "tray-cache" / "demo").exists(), "no demo home was made"
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before, "no simulated backend left running"


def test_doctor_names_the_missing_library_as_a_problem_with_the_same_fix(desktop, tmp_path: Path,
                                                                          no_xcb_cursor: str) -> None:
    hidden = subprocess.run(tray_argv("doctor", "--json", "--no-probe"), capture_output=True, text=True,
                            env=_env(desktop, tmp_path, LD_LIBRARY_PATH=no_xcb_cursor), timeout=120)
    report = json.loads(hidden.stdout)
    qt = report["desktop"]["qt_platform"]
    assert qt["ok"] is False and "libxcb-cursor.so.0" in qt["missing"], qt
    assert qt["packages"]["Debian, Ubuntu"] == ["libxcb-cursor0"]
    (problem,) = [p for p in report["problems"] if "libxcb-cursor0" in p]
    tray = subprocess.run(tray_argv("tray"), capture_output=True, text=True, timeout=120,
                          env=_env(desktop, tmp_path, LD_LIBRARY_PATH=no_xcb_cursor))
    assert problem in tray.stderr, "doctor's fix is the one the tray prints"
    assert hidden.returncode == 1
    text = subprocess.run(tray_argv("doctor", "--no-probe"), capture_output=True, text=True, timeout=120,
                          env=_env(desktop, tmp_path, LD_LIBRARY_PATH=no_xcb_cursor)).stdout
    assert "Qt's libraries for X11: missing libxcb-cursor.so.0" in text
    seen = json.loads(subprocess.run(tray_argv("doctor", "--json", "--no-probe"), capture_output=True, text=True,
                                     env=_env(desktop, tmp_path), timeout=120).stdout)
    assert seen["desktop"]["qt_platform"]["ok"] is True
    assert not [p for p in seen["problems"] if "Qt" in p]


@pytest.fixture
def demo(tmp_path):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, start_turn=False)
    yield d
    d.cleanup()


def _doctor(desktop, demo, tmp_path: Path) -> tuple[int, dict, str]:
    env = product_env({**os.environ, **desktop.env, **demo.env})
    env.pop("LD_LIBRARY_PATH", None)
    as_json = subprocess.run(tray_argv("doctor", "--json", "--home", demo.home), env=env, capture_output=True,
                             text=True, timeout=120)
    text = subprocess.run(tray_argv("doctor", "--home", demo.home), env=env, capture_output=True, text=True,
                          timeout=120).stdout
    return as_json.returncode, json.loads(as_json.stdout), text


def test_doctor_on_an_xembed_tray_exits_0_and_names_it(desktop, demo, tmp_path: Path) -> None:
    code, report, text = _doctor(desktop, demo, tmp_path)
    assert report["desktop"]["tray_kind"] == "xembed", report["desktop"]
    assert report["desktop"]["xembed_selection"] == "_NET_SYSTEM_TRAY_S0"
    assert "system tray: XEmbed system tray" in text
    assert code == 0 and report["problems"] == [], report["problems"]


def test_doctor_on_a_status_notifier_host_exits_0_and_names_it(sni_desktop, demo, tmp_path: Path) -> None:
    code, report, text = _doctor(sni_desktop, demo, tmp_path)
    assert report["desktop"]["tray_kind"] == "sni", report["desktop"]
    assert "system tray: StatusNotifierItem host" in text
    assert code == 0 and report["problems"] == [], report["problems"]


def test_doctor_with_no_tray_of_any_kind_says_so(trayless_desktop, demo, tmp_path: Path) -> None:
    code, report, _text = _doctor(trayless_desktop, demo, tmp_path)
    assert report["desktop"]["tray_kind"] is None
    assert [p for p in report["problems"] if p.startswith("no system tray of any kind")], report["problems"]
    assert code == 1
