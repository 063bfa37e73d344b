"""The real desktop-notifier back end against a real session bus whose notification server starts late."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hermes_tray.notify.base import Note
from tests.desktop.session import HERE, SYSTEM_PYTHON, missing_parts


@pytest.fixture
def session_bus(tmp_path: Path):
    """A private dbus-daemon with no notification server on it (yet)."""
    missing = [p for p in missing_parts() if p.startswith(("dbus-daemon", "python3-dbusmock"))]
    if missing or shutil.which("dbus-daemon") is None:
        pytest.fail(f"the test bus cannot start: missing {missing or ['dbus-daemon']} (tests/run installs them)")
    bus = tmp_path / "bus"
    conf = tmp_path / "bus.conf"
    conf.write_text("<busconfig><type>session</type>"
                    f"<listen>unix:path={bus}</listen><auth>EXTERNAL</auth>"
                    '<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>'
                    '<allow own="*"/></policy></busconfig>',
                    encoding="utf-8")
    daemon = subprocess.Popen(["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while not bus.exists():
        assert time.monotonic() < end and daemon.poll() is None, "dbus-daemon did not start"
        time.sleep(0.02)
    try:
        yield f"unix:path={bus}"
    finally:
        daemon.kill()
        daemon.wait(5)


def test_a_server_that_starts_after_the_tray_gets_the_next_note(qtbot, tmp_path, monkeypatch, session_bus) -> None:
    """At login the notification server may come up after the tray: a note before it goes nowhere (not
    delivered, so it is asked again), and the next note after it reaches the server (connected afresh)."""
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session_bus)
    from hermes_tray.notify import desktop

    monkeypatch.setattr(desktop, "RETRY_SECONDS", 0.0)  # probe again at every note (30 s in the tray)
    notifier = desktop.DesktopNotifierBackend("Hermes Tray test")
    server: subprocess.Popen[bytes] | None = None
    try:
        notifier.wait_ready(10)
        assert not notifier.available
        with qtbot.waitSignal(notifier.delivered, timeout=10000) as before:
            notifier.show(Note("n1", "Before the server", "body"))
        assert before.args[1] is False

        record = tmp_path / "notes.jsonl"
        server = subprocess.Popen(
            [SYSTEM_PYTHON, "-m", "dbusmock", "--session", "--template", str(HERE / "dbusmock_notifications.py"),
             "--parameters", json.dumps({"record": str(record)})],
            env={"DBUS_SESSION_BUS_ADDRESS": session_bus, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delivered = False
        end = time.monotonic() + 20
        while not delivered and time.monotonic() < end:  # the server takes a moment to own its name
            with qtbot.waitSignal(notifier.delivered, timeout=10000) as after:
                notifier.show(Note("n2", "After the server", "body"))
            delivered = bool(after.args[1])
            if not delivered:
                qtbot.wait(200)
        assert delivered, "the note after the server started did not reach it"
        shown = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
        assert [n["summary"] for n in shown] == ["After the server"]
    finally:
        notifier.shutdown()
        if server is not None:
            server.kill()
            server.wait(5)


def test_what_a_real_server_receives_a_labelled_default_and_a_question_that_stays(qtbot, tmp_path, monkeypatch,
                                                                                 session_bus) -> None:
    """Before, on dunst: every note carried desktop-notifier's ``default`` action with an empty label (a blank entry
    in dunst's action menu; the "Show" button was a second ``default``), and a waiting turn's note expired with the
    server's timeout, its buttons gone before they were answered. Now the default action is labelled, or absent
    where clicking does nothing (the helper); a question never expires; a receipt keeps the server's timeout."""
    from hermes_tray.notify import desktop
    from hermes_tray.notify.base import Action
    from hermes_tray.notify.coalesce import InterruptionNotices

    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session_bus)
    record = tmp_path / "notes.jsonl"
    server = subprocess.Popen(
        [SYSTEM_PYTHON, "-m", "dbusmock", "--session", "--template", str(HERE / "dbusmock_notifications.py"),
         "--parameters", json.dumps({"record": str(record)})],
        env={"DBUS_SESSION_BUS_ADDRESS": session_bus, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    notifier = None
    try:
        end = time.monotonic() + 20
        while notifier is None or not notifier.available:  # the server takes a moment to own its name
            assert time.monotonic() < end, "the notification server did not come up"
            if notifier is not None:
                notifier.shutdown()
                qtbot.wait(200)
            notifier = desktop.DesktopNotifierBackend("Hermes Tray test")
            notifier.wait_ready(10)
        from tests.gui.conftest import make_record

        turn = make_record("s1")
        tray = InterruptionNotices(notifier, show_prompts=lambda: True)
        helper = InterruptionNotices(notifier, show_prompts=lambda: True, can_open=False)
        for send in (lambda: tray.announce([turn]), lambda: helper.announce([make_record("s2")]),
                     lambda: notifier.show(Note("outcome-1", "Hermes turn finished", "Fix the flaky test finished.",
                                                (Action("default", "Show"),), kind="finished")),
                     lambda: notifier.show(Note("message-1", "Hermes Tray", "Nothing was done."))):
            with qtbot.waitSignal(notifier.delivered, timeout=10000) as got:
                send()
            assert got.args[1] is True
        shown = [json.loads(line) for line in record.read_text().splitlines()]
        assert [n["summary"] for n in shown] == ["Interrupted: Fix the flaky test", "Interrupted: Fix the flaky test",
                                                 "Hermes turn finished", "Hermes Tray"]
        asked, helper_note, receipt, message = shown
        assert asked["action_list"] == ["default", "Show", "resume", "Resume", "skip", "Skip", "snooze",
                                        "Remind me in 1 hour", "disable", "Disable auto-continue"]
        assert asked["expire_timeout"] == 0 and asked["hints"]["urgency"] == 1  # stays until answered
        assert "default" not in helper_note["action_list"], helper_note["action_list"]  # the helper opens nothing
        assert helper_note["action_list"][0::2] == ["resume", "skip", "snooze", "disable"]
        assert receipt["action_list"] == ["default", "Show"] and receipt["expire_timeout"] == -1
        assert receipt["hints"]["urgency"] == 0
        assert message["action_list"] == []  # nothing to click: nothing offered, not a blank entry
        for n in shown:
            assert "" not in n["action_list"][1::2], n  # no action without a label
            assert n["app_icon"].endswith("-note.png") or str(n["hints"].get("image-path", "")).endswith("-note.png"), n
    finally:
        if notifier is not None:
            notifier.shutdown()
        server.kill()
        server.wait(5)
