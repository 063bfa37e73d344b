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
    primary.handler = lambda m: m == "show" and (window.present(activate=True) or window.isVisible())
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


_FLOOD = """
import sys
from PySide6.QtCore import QCoreApplication
from PySide6.QtNetwork import QLocalSocket
app = QCoreApplication([])
sock = QLocalSocket()
sock.connectToServer(sys.argv[1])
assert sock.waitForConnected(3000)
chunk = b"x" * 65536
sent = 0
while sent < 64 * 1024 * 1024 and sock.state() == QLocalSocket.LocalSocketState.ConnectedState:
    sock.write(chunk)
    sock.waitForBytesWritten(1000)
    sent += len(chunk)
print("dropped" if sock.state() != QLocalSocket.LocalSocketState.ConnectedState else "kept", sent, flush=True)
"""


_HELLO = """
import sys
from PySide6.QtCore import QCoreApplication
from PySide6.QtNetwork import QLocalSocket
app = QCoreApplication([])
sock = QLocalSocket()
sock.connectToServer(sys.argv[1])
assert sock.waitForConnected(3000)
sock.write(b"show\\n")
sock.flush()
sock.waitForReadyRead(5000)
print(bytes(sock.readAll().data()).decode().strip(), flush=True)
"""


def test_a_line_without_newline_is_capped_and_dropped(qtbot, tmp_path) -> None:
    """A local client sending endless bytes with no newline: the connection is dropped, nothing is
    buffered without limit, and the instance still answers a real launch afterwards."""
    import psutil

    primary = SingleInstance("tray")
    assert primary.acquire()
    messages: list[str] = []
    primary.handler = lambda m: messages.append(m) is None
    try:
        rss_before = psutil.Process().memory_info().rss
        proc = subprocess.Popen([sys.executable, "-c", _FLOOD, primary.server_name],
                                stdout=subprocess.PIPE, text=True)
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=60000)
        out = proc.stdout.read() if proc.stdout else ""
        assert out.startswith("dropped"), out
        assert psutil.Process().memory_info().rss - rss_before < 16 * 1024 * 1024
        assert messages == []
        hello = subprocess.Popen([sys.executable, "-c", _HELLO, primary.server_name], stdout=subprocess.PIPE, text=True)
        qtbot.waitUntil(lambda: hello.poll() is not None, timeout=20000)
        assert hello.stdout is not None and hello.stdout.read().strip() == "ok"
        assert messages == ["show"]
    finally:
        primary.release()
