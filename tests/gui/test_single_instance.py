"""One tray per user: a second launch asks the running one to show its window and exits at once,
without ever creating a tray icon; a crashed holder never blocks the next start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from hermes_tray.app.prompt_window import PromptWindow
from hermes_tray.app.single_instance import SingleInstance, instance_running


def test_second_launch_hands_over_and_exits(qtbot, tmp_path) -> None:
    primary = SingleInstance("tray")
    assert primary.acquire()
    window = PromptWindow()
    qtbot.addWidget(window)
    primary.message_received.connect(lambda m: window.present(activate=True) if m == "show" else None)
    events = tmp_path / "events.jsonl"
    env = {**os.environ, "HERMES_TRAY_EVENTS": str(events), "QT_QPA_PLATFORM": "offscreen"}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tray", "--home", str(tmp_path / "h")], env=env)
    qtbot.waitUntil(lambda: proc.poll() is not None, timeout=20000)  # our loop answers meanwhile
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 15
    assert window.isVisible()
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["handed-over"]  # no "started", no "tray-shown"
    assert lines[0]["delivered"] is True
    primary.release()


def test_lock_is_the_authority_and_dies_with_its_holder(tmp_path) -> None:
    script = (
        "import sys,time; from PySide6.QtCore import QCoreApplication;"
        "from hermes_tray.app.single_instance import SingleInstance;"
        "app=QCoreApplication([]); s=SingleInstance('tray'); print(s.acquire(), flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "True"
        assert instance_running("tray")
        assert not SingleInstance("tray").acquire()
    finally:
        proc.kill()
        proc.wait()
    assert not instance_running("tray")
    again = SingleInstance("tray")
    assert again.acquire(), "a killed holder must not block the next tray"
    again.release()


def test_tray_and_helper_are_separate_instances(tmp_path) -> None:
    tray, helper = SingleInstance("tray"), SingleInstance("helper")
    assert tray.acquire() and helper.acquire()
    lock = tray.lock_path
    assert oct(lock.stat().st_mode & 0o777) == "0o600"
    assert oct(lock.parent.stat().st_mode & 0o777) == "0o700"
    tray.release()
    helper.release()
