"""Build real Hermes homes on disk for tests and benchmarks: markers in Hermes' exact format,
a real ``state.db`` (sessions + turn leases), ``config.yaml`` and WebUI turn journals.

Written directly (not through ``core``) so the scanner is tested against files as Hermes and
the WebUI write them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil


def dead_pid() -> int:
    """A pid that existed and has exited (reaped), so it reads dead."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


_GONE: int | None = None


def gone_writer() -> dict[str, Any]:
    """Writer fields of an exited process. One pid serves every marker: with a start time of 1.0
    it reads dead even if the pid is reused later (the create time cannot match)."""
    global _GONE
    if _GONE is None:
        _GONE = dead_pid()
    return {"writer_pid": _GONE, "writer_start_time": 1.0}


def own_writer() -> dict[str, Any]:
    """Writer fields naming this (live) process."""
    return {"writer_pid": os.getpid(), "writer_start_time": psutil.Process().create_time()}


def marker_entry(prompt: str = "fix the flaky test", *, attempts: int = 0, started_at: float | None = None,
                 writer: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    entry = {"attempts": attempts, "prompt": prompt, "started_at": time.time() if started_at is None else started_at,
             "auto_continue": True}
    entry.update(writer if writer is not None else gone_writer())
    entry.update(extra)
    return entry


class FixtureHome:
    """A Hermes home under construction."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._db: sqlite3.Connection | None = None

    # markers ---------------------------------------------------------------------------------

    @property
    def marker_file(self) -> Path:
        return self.path / "desktop" / "interrupted_turns.json"

    def write_markers(self, entries: dict[str, dict[str, Any]]) -> None:
        """The whole file, exactly as Hermes writes it (compact JSON, 0600)."""
        self.marker_file.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(entries, ensure_ascii=False).encode()
        fd = os.open(self.marker_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def read_markers(self) -> dict[str, Any]:
        return json.loads(self.marker_file.read_text())

    # config ----------------------------------------------------------------------------------

    def write_config(self, text: str) -> None:
        (self.path / "config.yaml").write_text(text)

    # state.db --------------------------------------------------------------------------------

    def db(self, *, schema: str = "classic") -> sqlite3.Connection:
        if self._db is None:
            conn = sqlite3.connect(self.path / "state.db", isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, "
                         "parent_session_id TEXT, end_reason TEXT, started_at REAL, title_source TEXT)")
            if schema == "classic":
                conn.execute("CREATE TABLE IF NOT EXISTS session_turn_leases (conversation_id TEXT PRIMARY KEY, "
                             "holder TEXT, acquired_at REAL, expires_at REAL)")
            else:
                conn.execute("CREATE TABLE IF NOT EXISTS session_turn_leases (conversation_id TEXT PRIMARY KEY, "
                             "holder TEXT NOT NULL DEFAULT '', acquired_at REAL, expires_at REAL, epoch INTEGER, "
                             "owner_pid INTEGER, owner_pid_start REAL)")
            conn.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT "
                         "NOT NULL, role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name "
                         "TEXT, timestamp REAL NOT NULL, finish_reason TEXT, active INTEGER NOT NULL DEFAULT 1)")
            conn.execute("CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)")
            self._db = conn
        return self._db

    def add_message(self, sid: str, role: str, content: str | None = None, *, at: float,
                    calls: list[tuple[str, dict[str, Any]]] = (), tool: str | None = None,  # type: ignore[assignment]
                    finish: str | None = None, active: int = 1) -> int:
        """One ``messages`` row as Hermes writes it: an assistant row's ``calls`` as its ``tool_calls`` JSON
        (name, arguments) in Hermes' own layout, a tool row's ``tool`` as ``tool_name``."""
        tool_calls = json.dumps([{"id": f"call_{i}", "call_id": f"call_{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(calls)]) if calls else None
        cur = self.db().execute(
            "INSERT INTO messages (session_id, role, content, tool_calls, tool_name, timestamp, finish_reason, active) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, role, content, tool_calls, tool, at, finish or ("tool_calls" if calls else None), active))
        return int(cur.lastrowid or 0)

    def add_session(self, sid: str, *, title: str | None = None, source: str = "tui",
                    title_source: str | None = None) -> None:
        """A session row; ``title_source`` as Hermes 0.22 records it ("derived": made of the prompt, "llm",
        "user")."""
        self.db().execute("INSERT OR REPLACE INTO sessions (id, source, title, started_at, title_source) "
                          "VALUES (?, ?, ?, ?, ?)", (sid, source, title, time.time(), title_source))

    def add_lease(self, sid: str, *, holder: str, ttl: float = 300.0) -> None:
        now = time.time()
        self.db().execute("INSERT OR REPLACE INTO session_turn_leases (conversation_id, holder, acquired_at, "
                          "expires_at) VALUES (?, ?, ?, ?)", (sid, holder, now, now + ttl))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # WebUI journal ---------------------------------------------------------------------------

    @property
    def journal_dir(self) -> Path:
        return self.path / "webui" / "sessions" / "_turn_journal"

    def write_journal(self, sid: str, events: list[dict[str, Any]], *, shard_pid: int | None = None) -> Path:
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        name = f"{sid}~{shard_pid}.jsonl" if shard_pid else f"{sid}.jsonl"
        path = self.journal_dir / name
        with open(path, "w", encoding="utf-8") as fh:
            for ev in events:
                fh.write(json.dumps({"version": 1, "session_id": sid, **ev}, separators=(",", ":")) + "\n")
        return path


def journal_turn(turn_id: str, events: list[str], *, t0: float | None = None, **fields: Any) -> list[dict]:
    """Events of one WebUI turn, one second apart."""
    t0 = time.time() - 60 if t0 is None else t0
    return [{"turn_id": turn_id, "created_at": t0 + i, "event": name, **fields} for i, name in enumerate(events)]


def hermes_home_tree(root: Path, profiles: list[str] = ()) -> list[FixtureHome]:  # type: ignore[assignment]
    """A root home plus ``profiles/<name>`` homes."""
    homes = [FixtureHome(root)]
    for name in profiles:
        homes.append(FixtureHome(root / "profiles" / name))
    return homes


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    """Environment for a CLI subprocess that keeps every tray file under ``tmp``."""
    from tests.support.sim_homes import tray_dirs

    env = dict(os.environ)
    env.update(tray_dirs(tmp))
    env.pop("HERMES_WEBUI_STATE_DIR", None)
    env.update(extra)
    return env
