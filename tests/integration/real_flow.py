"""Helpers for the end-to-end tests on real Hermes backends: a stand-in for a Hermes Desktop window, a real
turn killed mid-stream, the product's command line, and what the model and the journal saw.

A *window* is what a Hermes Desktop window is to the backend: its own ``/api/ws`` connection that resumes a
session (normally, or ``{lazy: true}`` as a watch mount does) and prompts in it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mock_openai import MockOpenAI, Recorded

from hermes_tray_core.backend.rpc import RpcSession
from hermes_tray_core.backend.websocket import WebSocketTransport
from hermes_tray_core.hermes.note import NOTE_PREFIX
from hermes_tray_core.markers.store import list_turn_markers
from tests.support.product import product_env, tray_argv


class Window:
    """A stand-in for a Hermes Desktop window: its own connection to the running backend."""

    def __init__(self, home: Path, backend: Any = None) -> None:
        from hermes_tray_core.backend.running import find_live_backend, forget

        if backend is None:
            forget(home)
            backend, why = find_live_backend(home)
            assert backend is not None, why
        self.pid = backend.pid
        self.s = RpcSession(WebSocketTransport(backend.host, backend.port, backend.token, pid=backend.pid))
        self.s.start()
        self.s.wait_ready(20)
        self.seen: list[dict] = []

    def resume(self, key: str, **params: Any) -> dict:
        return self.s.request("session.resume", {"session_id": key, **params}, 60)

    def prompt(self, sid: str, text: str) -> dict:
        return self.s.request("prompt.submit", {"session_id": sid, "text": text}, 30)

    def close(self, sid: str) -> dict:
        return self.s.request("session.close", {"session_id": sid}, 30)

    def live(self) -> list[dict]:
        return list(self.s.request("session.active_list", {}, 10)["sessions"])

    def wait_for(self, sid: str, etype: str, timeout: float = 90.0) -> list[dict]:
        """Events of ``sid`` until one of type ``etype`` (AssertionError on time-out)."""
        got: list[dict] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ev = self.s.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if not isinstance(ev, dict):
                raise AssertionError(f"the window's connection ended while waiting for {etype}")
            if ev.get("session_id") == sid:
                got.append(ev)
                self.seen.append(ev)
                if ev.get("type") == etype:
                    return got
        raise AssertionError(f"the window saw no {etype} for {sid} in {timeout:g}s: {[e.get('type') for e in got]}")

    def shutdown(self) -> None:
        self.s.shutdown(2)


def wait_for(cond: Any, what: str, timeout: float = 90.0, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


def interrupt_a_real_turn(home: Path, key: str, mock: MockOpenAI, prompt: str, *, kill_pid: int | None = None,
                          window: Window | None = None) -> dict:
    """A real turn, SIGKILLed mid-stream: a window resumes ``key`` and submits ``prompt`` while the model
    "thinks"; once Hermes wrote its marker and the request is at the model, the backend (``kill_pid``,
    default the window's) is SIGKILLed. Returns the marker Hermes left."""
    own = window is None
    w = window or Window(home)
    since = len(mock.completions())
    mock.hold()
    try:
        sid = w.resume(key)["session_id"]
        w.prompt(sid, prompt)
        wait_for(lambda: key in list_turn_markers(home), "Hermes to write its marker")
        wait_for(lambda: any(prompt in r.last_user_text() for r in mock.completions()[since:]),
                 "the turn to reach the model")
        os.kill(kill_pid or w.pid, signal.SIGKILL)
    finally:
        mock.release()
        if own:
            w.shutdown()
    return list_turn_markers(home)[key]


def kill_a_real_turn_mid_answer(home: Path, key: str, python: Path, mock: MockOpenAI, prompt: str, script: list,
                                *, words: int) -> int:
    """A real turn of a Hermes that continues turns itself (its own stdio gateway), SIGKILLed while the model
    streams its answer: ``script`` is what the model does (tool calls, then a slow answer), the kill comes once
    ``words`` words of it went out. Returns the pid that died (the marker's writer)."""
    from hermes_tray_core.backend.install import install_from_command
    from hermes_tray_core.backend.stdio import stdio_session

    install = install_from_command([str(python)])
    gw = stdio_session(install, home, log_path=home.parent / "killed-gateway.log", cwd=str(home.parent))
    gw.start()
    try:
        gw.wait_ready(90)
        mock.play(script)
        sid = gw.request("session.resume", {"session_id": key}, 60)["session_id"]
        gw.request("prompt.submit", {"session_id": sid, "text": prompt}, 30)
        mock.wait_for_words(words, 150)
        os.kill(gw.transport.pid, signal.SIGKILL)  # mid-stream
    finally:
        mock.play([])
        gw.shutdown(5)
    assert list_turn_markers(home)[key]["writer_pid"] == gw.transport.pid  # Hermes' own marker, left by the kill
    return gw.transport.pid


def note_requests(mock: MockOpenAI, since: int) -> list[Recorded]:
    """Model requests of a continuation (the note anywhere in the newest user message) after ``since``."""
    return [r for r in mock.completions()[since:] if NOTE_PREFIX in r.last_user_text()]


def tray_note_requests(mock: MockOpenAI, since: int) -> list[Recorded]:
    """Model requests whose newest user message IS the tray's own note (a backend that continues by
    itself merges the prompt and its note, prompt first)."""
    return [r for r in mock.completions()[since:] if r.last_user_text().startswith(NOTE_PREFIX)]


def turn_requests(mock: MockOpenAI, since: int) -> list[Recorded]:
    """Agent-turn requests after ``since`` (Hermes' auxiliary title generation excluded)."""
    out = []
    for r in mock.completions()[since:]:
        first = r.messages[0].get("content") if r.messages else ""
        if isinstance(first, str) and first.startswith("Generate a short, descriptive title"):
            continue
        out.append(r)
    return out


def tray(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """The installed product's command line, as a user runs it."""
    return subprocess.Popen(tray_argv(*args), env=product_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def tray_json(*args: str, env: dict[str, str], timeout: float = 200.0) -> tuple[int, dict, str]:
    p = tray(*args, "--json", env=env)
    out, err = p.communicate(timeout=timeout)
    try:
        data = json.loads(out)
    except ValueError:
        raise AssertionError(f"no JSON from {args}: {out!r} {err!r}") from None
    return p.returncode, data, err


def status_turn(home: Path, key: str, env: dict[str, str]) -> dict | None:
    _code, data, err = tray_json("status", "--home", str(home), env=env, timeout=60)
    turns = [t for t in data["turns"] if t["session_key"] == key]
    assert len(turns) <= 1, (data, err)
    return turns[0] if turns else None


def journal_events(key: str) -> list[str]:
    from hermes_tray_core.stores.ledger import ledger

    return [e["event"] for e in reversed(ledger().history(500)) if e.get("session_key") == key]


def history_rows(key: str) -> list[tuple[str, str]]:
    """History as a person reads it (one row per turn): (what happened, where it ran) for ``key``."""
    from hermes_tray.model.history import group_turns
    from hermes_tray_core.stores.ledger import ledger

    return [(t.outcome(), t.where()) for t in group_turns(ledger().turns(500)) if t.session_key == key]
