"""Read-only views of Hermes' ``state.db`` (sessions, turn leases, messages) and its active-session registry.

``state.db`` is opened read-only with a short busy timeout: a backend mid-write never waits on us. Every
function answers instead of raising: an unreadable source is ``None`` / ``"unknown"`` with a one-line reason;
a missing one is a definite answer (no ``state.db``: no lease, ``free``; no registry: no owner, ``none``). A
turn lease is free with no row, ``holder == ''`` or ``expires_at <= now``; a live-looking holder
``pid=<n>[:pidns=<ino>]:…`` is judged by its pid only in *our* pid namespace (elsewhere it is live until it
expires). The lease key is the conversation root: ``parent_session_id`` followed up while the parent ended
with ``end_reason = 'compression'``.
"""

from __future__ import annotations

import errno
import json
import math
import re
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hermes_tray_core.hermes import paths as hermes_paths
from hermes_tray_core.hermes.state_db_batch import (
    BUSY_TIMEOUT_S,
    HomeState,
    LeaseView,
    SessionInfo,
    columns,
    connect_ro,
    conversation_root_with,
    db_errors,
    describe_error,
    session_rows,
    text_or_none,
)
from hermes_tray_core.numbers import as_float, json_int
from hermes_tray_core.process.identity import judge_hermes_identity, own_pidns
from hermes_tray_core.stores import fsutil
from hermes_tray_core.vocab import WriterState

__all__ = ["BUSY_TIMEOUT_S", "LeaseView", "MAX_NOTE_SESSIONS", "MAX_REGISTRY_BYTES", "NOTE_BUSY_TIMEOUT_S",
    "OwnerView", "SessionActivity", "SessionInfo", "active_session_owner", "conversation_root_with",
    "judge_lease_row", "lookup_session", "message_high_water", "note_state", "parse_holder",
    "session_activity", "turn_lease_view"]

OwnerState = Literal["alive", "dead", "none", "unknown"]
#: Where the turn of a continuation note stands (:func:`note_state`): ``pending`` (there, no end, nothing
#: after it), ``superseded`` (a newer user message after it: a running turn is someone else's), ``finished``
#: (a final reply after it, whatever came between: a queued message may be persisted before the reply).
NoteState = Literal["absent", "pending", "superseded", "finished", "unknown"]

MAX_REGISTRY_BYTES = 8 * 1024 * 1024
_HOLDER_PID_RE = re.compile(r"(?:^|:)pid=(\d+)(?::|$)")
_HOLDER_NS_RE = re.compile(r"(?:^|:)pidns=(\d+)(?::|$)")


@dataclass(frozen=True)
class OwnerView:
    """Who ``runtime/active_sessions.json`` says owns a session and whether that process lives."""

    state: OwnerState
    detail: str = ""
    pid: int | None = None
    surface: str | None = None


@dataclass(frozen=True)
class SessionActivity:
    """Is a Hermes backend working on a session now?"""

    lease: LeaseView
    owner: OwnerView

    @property
    def running(self) -> bool:
        return self.lease.state == "live" or self.owner.state == "alive"

    @property
    def unsure(self) -> bool:
        return self.lease.state == "unknown" or self.owner.state == "unknown"

    @property
    def reason(self) -> str:
        if self.lease.state == "live":
            return self.lease.detail
        if self.owner.state == "alive":
            return self.owner.detail
        if self.unsure:
            return "; ".join(v.detail for v in (self.lease, self.owner) if v.state == "unknown")
        return "no live Hermes process holds this session"


def _paren(text: str) -> str:
    return f" ({text})" if text else ""


def _one(home: Path | str, session_id: str, now: float = 0.0) -> HomeState:
    """One session's look (:class:`HomeState` of one key), closed."""
    state = HomeState(Path(home), now)
    try:
        state.prefetch([session_id])
    finally:
        state.close()
    return state


def lookup_session(home: Path | str, session_id: str) -> tuple[SessionInfo | None, str | None]:
    """``(info, None)``, ``(None, None)`` for no such session, or ``(None, problem)`` when unreadable."""
    return _one(home, session_id).session(session_id)


def turn_lease_view(home: Path | str, session_id: str, *, now: float | None = None) -> LeaseView:
    """Does a Hermes turn hold this session's conversation's lease now? (:meth:`HomeState.lease`)"""
    return _one(home, session_id, time.time() if now is None else now).lease(session_id)


def parse_holder(holder: str) -> tuple[int | None, int | None]:
    """``(pid, pidns)`` from a holder ``pid=<n>[:pidns=<ino>]:turn=…:platform=…``."""
    pid_m = _HOLDER_PID_RE.search(holder)
    ns_m = _HOLDER_NS_RE.search(holder)
    return (int(pid_m.group(1)) if pid_m else None, int(ns_m.group(1)) if ns_m else None)


def _num(value: object) -> float | None:
    return None if isinstance(value, bool) else as_float(value)


def _serves(home: Path | str | None) -> Callable[[int], bool] | None:
    if home is None:
        return None
    from hermes_tray_core.hermes.processes import serves_home

    return lambda pid: serves_home(pid, home)


def judge_lease_row(row: Mapping[str, object], cid: str, now: float, *, home: Path | str | None = None) -> LeaseView:
    """Judge one ``session_turn_leases`` row (column → value) of conversation ``cid``. ``home``: whose
    ``state.db`` holds it, so that a live Hermes holder keeps its lease through a wall-clock step."""
    holder = row.get("holder")
    holder = "" if holder is None else str(holder)
    expires = _num(row.get("expires_at"))
    if holder == "":
        return LeaseView("free", "turn lease released", holder, expires, cid)
    if expires is None or expires <= now:
        return LeaseView("free", "turn lease expired", holder, expires, cid)
    pid, pidns = parse_holder(holder)
    owner_pid = json_int(row.get("owner_pid"))
    if owner_pid is not None and owner_pid > 0:
        pid = owner_pid
    left = int(expires - now)
    ours = own_pidns()
    if pid is None or pidns is None or ours is None or pidns != ours:
        why = ("holder names no pid" if pid is None else "holder names no pid namespace" if pidns is None
               else "holder is in another pid namespace")
        return LeaseView("live", f"Hermes holds the turn lease ({why}; expires in {left}s)",
                         holder, expires, cid, pid)
    start = _num(row.get("owner_pid_start"))
    if start is not None and not (start > 0 and math.isfinite(start)):
        start = None  # 0 / negative = "not recorded" in some writers, never a real create time; junk likewise
    judged = judge_hermes_identity(pid, start, serves_home=_serves(home))
    if judged.state == WriterState.DEAD:
        return LeaseView("free", f"turn lease holder pid {pid} is gone", holder, expires, cid, pid)
    if judged.state == WriterState.ALIVE:
        return LeaseView("live", f"Hermes process {pid} holds the turn lease{_paren(judged.note)}",
                         holder, expires, cid, pid)
    return LeaseView("live", f"turn lease held by pid {pid} (cannot inspect it; expires in {left}s)",
                     holder, expires, cid, pid)


def active_session_owner(home: Path | str, session_id: str, *, ignore_pids: Collection[int] = ()) -> OwnerView:
    """The registered owner of ``session_id`` and whether it lives. ``ignore_pids``: processes of ours here
    (the gateway the tray started registers the session it resumed), not another owner."""
    path = hermes_paths.active_sessions_file(Path(home))
    try:
        data = fsutil.read_regular(path, MAX_REGISTRY_BYTES)  # a FIFO there must not hang the scan
    except (FileNotFoundError, NotADirectoryError):
        return OwnerView("none", "no active-session registry")
    except OSError as exc:
        why = exc.strerror if exc.errno == errno.EFBIG else f"unreadable ({exc.strerror or 'cannot be read'})"
        return OwnerView("unknown", f"active_sessions.json is {why}")
    try:
        doc = json.loads(data)  # {"entries": [...]}, or the list itself
    except (ValueError, RecursionError):
        return OwnerView("unknown", "active_sessions.json is corrupt")
    entries = doc.get("entries") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        return OwnerView("unknown", "active_sessions.json has an unexpected shape")
    ours = own_pidns()
    matches = [e for e in entries if isinstance(e, dict) and e.get("session_id") == session_id
               and not (e.get("pid") in ignore_pids and (e.get("pidns") is None or str(e.get("pidns")) == str(ours)))]
    if not matches:
        return OwnerView("none", "no active-session owner")
    seen: list[OwnerView] = []
    for entry in matches:
        pid = entry.get("pid")
        surface = text_or_none(entry.get("surface"))
        label = f"{surface} " if surface else ""
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            seen.append(OwnerView("unknown", "active-session entry has no usable pid", None, surface))
            continue
        ns = entry.get("pidns")
        if ns is not None and (ours is None or str(ns) != str(ours)):
            seen.append(OwnerView("unknown", f"owner pid {pid} is in another pid namespace", pid, surface))
            continue
        judged = judge_hermes_identity(pid, entry.get("process_start_time"), serves_home=_serves(home))
        if judged.state == WriterState.ALIVE:
            why = f"Hermes {label}process {pid} has this session open{_paren(judged.note)}"
            return OwnerView("alive", why, pid, surface)
        if judged.state == WriterState.DEAD:
            seen.append(OwnerView("dead", f"registered {label}owner pid {pid} is gone", pid, surface))
        else:
            seen.append(OwnerView("unknown", f"cannot tell whether owner pid {pid} lives", pid, surface))
    return next((view for view in seen if view.state == "unknown"), seen[0])


def session_activity(home: Path | str, session_id: str, *, now: float | None = None,
                     ignore_pids: Collection[int] = ()) -> SessionActivity:
    return SessionActivity(turn_lease_view(home, session_id, now=now),
                           active_session_owner(home, session_id, ignore_pids=ignore_pids))


# A continuation's note and its reply. Hermes persists a turn's user message when it starts and the final
# assistant reply (no ``tool_calls``, ``finish_reason`` set) when it ends; mid-turn flushes add ``assistant``
# rows WITH ``tool_calls`` and ``tool`` rows, no end. ``messages.id`` is AUTOINCREMENT ("after the submit" is
# ``id > MAX(id)`` read before it); compression re-inserts rows with new ids in a child session, which is
# followed.

#: ``finish_reason`` values that do not end a turn (a tool round, a truncated reply, a verify hook that
#: sends the agent on: ``agent/conversation_loop.py``).
_NOT_AN_END = ("tool_calls", "length", "verify_hook_continue")
MAX_NOTE_SESSIONS = 64
NOTE_BUSY_TIMEOUT_S = 5.0  # off the UI thread (resume, a reader settling one marker): worth waiting for


def message_high_water(home: Path | str, *, busy_timeout: float = NOTE_BUSY_TIMEOUT_S) -> tuple[int | None, str | None]:
    """``(MAX(messages.id) or 0, None)``, or ``(None, problem)`` when ``state.db`` cannot be read."""
    conn, _status, problem = connect_ro(home, busy_timeout)
    if conn is None:
        return None, problem
    try:
        if "id" not in columns(conn, "messages"):
            return None, "state.db has no messages table"
        return json_int(conn.execute("SELECT MAX(id) FROM messages").fetchone()[0]) or 0, None
    except db_errors() as exc:
        return None, describe_error(exc)
    finally:
        conn.close()


def _continued_sessions(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """``session_id`` and the sessions compression continued it in (children of a compressed parent)."""
    cols = columns(conn, "sessions")
    found = [session_id]
    if not {"id", "parent_session_id", "end_reason"} <= cols:
        return found
    frontier = [session_id]
    while frontier and len(found) < MAX_NOTE_SESSIONS:
        marks = ",".join("?" * len(frontier))
        rows = conn.execute(
            f"SELECT c.id FROM sessions c JOIN sessions p ON c.parent_session_id = p.id "
            f"WHERE p.id IN ({marks}) AND p.end_reason = 'compression'", frontier).fetchall()
        frontier = [str(r[0]) for r in rows if str(r[0]) not in found][: MAX_NOTE_SESSIONS - len(found)]
        found.extend(frontier)
    return found


def _start(conn: sqlite3.Connection, session_id: str, main: str, row_id: int) -> object:
    """Where a walk of ``session_id`` after message ``row_id`` begins: that message's time in the note's
    session, the whole of one compression continued it in (its rows are copies, stamped as their
    originals)."""
    if session_id != main:
        return -math.inf
    row = conn.execute("SELECT timestamp FROM messages WHERE id = ?", (row_id,)).fetchone()
    return row[0] if row is not None and row[0] is not None else -math.inf


def _note_id(conn: sqlite3.Connection, sessions: list[str], after_id: int, note: str | None, digest: str,
             api_content: bool) -> tuple[int, object] | None:
    """(id, time) of the first user message after ``after_id`` that is ``note`` (or, without it, whose text has
    SHA-256 ``digest``, among the first 50 user messages: the note is the first, give or take a window's few)."""
    from hermes_tray_core.digest import note_digest

    texts = ["content", "api_content"] if api_content else ["content"]
    if note is not None:  # the note's text compared inside SQLite: no row's text leaves it
        values, args = f"role = 'user' AND ({' OR '.join(f'{c} = ?' for c in texts)})", [note] * len(texts)
    else:  # the text of user rows only, to hash here
        values, args = ", ".join(["role = 'user'", *(f"CASE WHEN role = 'user' THEN {c} END" for c in texts)]), []
    found: list[tuple[int, object]] = []
    for sid in sessions:
        users = 0
        for rid, ts, hit, *text in session_rows(conn, sid, _start(conn, sid, sessions[0], after_id), values,
                                                value_args=args, where=" AND id > ?", args=[after_id]):
            if note is None and hit:
                users += 1
                hit = any(isinstance(t, str) and note_digest(t) == digest for t in text)
            if hit:
                found.append((int(rid), ts))
                break
            if users >= 50:
                break
    return min(found, key=lambda f: f[0]) if found else None


def note_state(home: Path | str, session_id: str, note: str | None, after_id: int, *,
               busy_timeout: float = NOTE_BUSY_TIMEOUT_S, digest: str | None = None) -> tuple[NoteState, str]:
    """Where the turn of a continuation ``note`` written after message ``after_id`` stands
    (:data:`NoteState`), and why. Without the note (its prompt went with the marker), ``digest``: its SHA-256,
    as the ledger keeps it."""
    conn, _status, problem = connect_ro(home, busy_timeout)
    if conn is None:
        return "unknown", problem or "state.db unavailable"
    try:
        cols = columns(conn, "messages")
        if not {"id", "session_id", "role", "content"} <= cols:
            return "unknown", "state.db has no messages table this tray understands"
        if "finish_reason" not in cols:
            return "unknown", "state.db records no finish_reason, so a finished reply cannot be told"
        sessions = _continued_sessions(conn, session_id)
        found = _note_id(conn, sessions, int(after_id), note, str(digest or ""), "api_content" in cols)
        if found is None:
            return "absent", "the continuation note is not in state.db"
        note_id, note_at = found
        no_tools = " AND (tool_calls IS NULL OR tool_calls IN ('', '[]', 'null'))" if "tool_calls" in cols else ""
        ends = ",".join("?" * len(_NOT_AN_END))
        values = (f"role = 'assistant'{no_tools} AND finish_reason IS NOT NULL AND finish_reason NOT IN ({ends}), "
                  "role = 'user'")
        replies: list[int] = []
        later: list[int] = []
        for sid in sessions:  # each walked after the note in short reads (session_rows)
            since = note_at if sid == sessions[0] else -math.inf
            first_user = None
            for rid, _ts, reply, user in session_rows(conn, sid, since, values, value_args=_NOT_AN_END,
                                                       where=" AND id > ?", args=[note_id]):
                if reply:
                    replies.append(int(rid))
                    break
                if user and first_user is None:
                    first_user = int(rid)
            if first_user is not None:
                later.append(first_user)
        if replies:
            return "finished", (f"state.db holds the continuation note (message {note_id}) and its reply "
                                f"(message {min(replies)})")
        if later:
            return "superseded", (f"state.db holds a newer user message (message {min(later)}) after the "
                                  f"continuation note (message {note_id})")
        return "pending", f"state.db holds the continuation note (message {note_id}) but no finished reply"
    except Exception as exc:  # boundary: reading the messages Hermes wrote, where anything can be
        return "unknown", describe_error(exc)
    finally:
        conn.close()
