"""How far an interrupted turn got, as Hermes persisted it in ``state.db``: read, never guessed.

Hermes (0.19.0 and 0.22.2.post1) writes the user's message and each assistant message that asks for tool calls
*before* the tools run, each tool result right after, and the final answer only when the turn ends: a turn
killed mid-answer shows its tool calls and results but none of the words it was streaming. The turn's rows are
the session's ``assistant`` and ``tool`` rows stamped at or after the marker's ``started_at`` (the user's
message is stamped when submitted, before the marker), not rewound (``active = 0``); a session compression
closed is not read (its turn goes on elsewhere): unknown, not zero. Read in the home's one look, in short
statements (``tests/bench/bench_statedb_hold.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_tray_core.hermes.state_db_batch import rows_in, session_rows
from hermes_tray_core.vocab import StepKind

if TYPE_CHECKING:
    import sqlite3

__all__ = ["EXCERPT_CHARS", "RECENT_STEPS", "ProgressStep", "TurnProgress", "read_progress", "summarise"]

EXCERPT_CHARS = 120
RECENT_STEPS = 3  # "the last few by kind"
# A tool call's name in Hermes' ``tool_calls`` JSON: the only ``"name"`` key outside the (escaped) arguments
# string, so finding it needs no parse (only the last call is parsed).
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.){1,200})"')


class ProgressStep(NamedTuple):
    """One thing the turn did: a tool call (``running``: saved with no result) or text it wrote."""

    kind: StepKind
    tool: str | None = None
    paragraphs: int = 0
    running: bool = False

    def phrase(self) -> str:
        if self.kind == StepKind.TOOL:
            what = self.tool or "a tool"
            return f"was running {what} when it stopped" if self.running else f"ran {what}"
        return f"wrote {_count(self.paragraphs, 'paragraph')}"

    def to_json(self) -> dict[str, Any]:
        if self.kind == StepKind.TOOL:
            return {"kind": str(self.kind), "tool": self.tool, "running": self.running}
        return {"kind": str(self.kind), "paragraphs": self.paragraphs}


class TurnProgress(NamedTuple):
    """What Hermes recorded of one turn after its prompt. ``messages``: assistant and tool rows; ``recent``:
    the last few steps, oldest first; ``last_excerpt``: its last text's last line, or its last call and the
    first line of its arguments; ``ran_for_s``: from its start to the last thing recorded."""

    messages: int = 0
    tool_calls: int = 0
    recent: tuple[ProgressStep, ...] = ()
    last_excerpt: str = ""
    ran_for_s: float | None = None

    @property
    def kept(self) -> bool:
        return self.messages > 0

    @property
    def last_kind(self) -> StepKind | None:
        return self.recent[-1].kind if self.recent else None

    def __repr__(self) -> str:
        # the excerpt is as private as the prompt: never in a log line
        return f"TurnProgress(messages={self.messages}, tool_calls={self.tool_calls}, ran_for_s={self.ran_for_s})"

    def to_json(self, *, excerpts: bool = True) -> dict[str, Any]:
        """``status --json``'s ``progress`` (docs/cli.md)."""
        return {
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "last_kind": None if self.last_kind is None else str(self.last_kind),
            "last_excerpt": (self.last_excerpt or None) if excerpts else None,
            "ran_for_s": None if self.ran_for_s is None else round(self.ran_for_s, 3),
            "recent": [s.to_json() for s in self.recent],
        }

    def line(self, *, excerpts: bool = True) -> str:
        if not self.kept:
            return "Hermes kept nothing of this turn's progress"
        text = f"{_count(self.messages, 'message')}, {_count(self.tool_calls, 'tool call')}"
        if self.recent:
            text += "; then " + ", ".join(s.phrase() for s in self.recent)
        if excerpts and self.last_excerpt:
            text += f" — last: {self.last_excerpt}"
        return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join(text[: limit * 2].split())  # what a line can show: a long one is cut anyway
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _calls(raw: object) -> list[dict[str, Any]]:
    if not isinstance(raw, str) or raw.strip() in ("", "[]", "null"):
        return []
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _names(raw: object) -> list[str | None]:
    if not isinstance(raw, str):
        return []
    return [(n if len(n) <= 60 else _clip(n, 60)) if n.strip() else None for n in _NAME.findall(raw)]


def _call_excerpt(call: Mapping[str, Any]) -> str:
    """"name: the first line of its arguments" (its first text argument, else the arguments as written)."""
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else call
    name = fn.get("name")
    name = _clip(name, 60) if isinstance(name, str) and name.strip() else "a tool"
    raw = fn.get("arguments")
    line = ""
    if isinstance(raw, str):
        try:
            args = json.loads(raw)
        except (ValueError, RecursionError):
            args = raw
        if isinstance(args, dict):
            text = next((v for v in args.values() if isinstance(v, str) and v.strip()), None)
            args = text if text is not None else json.dumps(args, ensure_ascii=False)
        if isinstance(args, str):
            line = args.lstrip().split("\n", 1)[0].strip()
    return _clip(f"{name}: {line}" if line else name)


def _paragraphs(text: str) -> int:
    """Runs of non-blank lines."""
    return sum(1 for block in re.split(r"\n\s*\n", "\n".join(text.splitlines())) if block.strip())


def summarise(totals: tuple[int, int, float] | None, tail: Sequence[tuple[object, object, int]],
              started_at: float, answered: int | None = None) -> TurnProgress:
    """The record from a turn's totals (rows, tool calls, the last row's time) and its last assistant rows,
    oldest first: (content, tool_calls, how many calls). ``answered``: tool results saved after the last of
    those rows. Hermes saves each result as its tool ends, in order: the first call without one was running
    when the turn stopped, and those after it are left out (they may never have started)."""
    if totals is None or totals[0] <= 0:
        return TurnProgress()
    steps: list[ProgressStep] = []  # newest first
    excerpt = ""
    unfinished = max(0, tail[-1][2] - answered) if tail and answered is not None else 0
    for content, raw_calls, ncalls in reversed(tail):
        if len(steps) >= RECENT_STEPS:
            break
        if ncalls:
            if not excerpt:  # the last thing it did: parsed, for its arguments' first line
                calls = _calls(raw_calls)
                excerpt = _call_excerpt(calls[-1]) if calls else ""
            names = _names(raw_calls)
            if unfinished:  # the first call without a result was running; the ones after it may not have started
                names = names[:len(names) - unfinished + 1]
            steps.extend(ProgressStep(StepKind.TOOL, tool=n, running=bool(unfinished) and i == 0)
                         for i, n in enumerate(reversed(names)))
            unfinished = 0
        text = content if isinstance(content, str) else ""
        if text.strip():
            steps.append(ProgressStep(StepKind.TEXT, paragraphs=_paragraphs(text)))
            if not excerpt:
                excerpt = _clip(text.rstrip().rsplit("\n", 1)[-1].strip())  # its last line
    count, calls_total, last = totals
    return TurnProgress(messages=count, tool_calls=calls_total, recent=tuple(reversed(steps[:RECENT_STEPS])),
                        last_excerpt=excerpt, ran_for_s=max(0.0, last - started_at))


#: A row's tool calls, counted inside SQLite (its text never leaves it): the ``"name":`` keys, one per call
#: (inside the arguments, a JSON string, every quote is escaped).
_NAME_KEY = '"name":'
_CALLS = (f"CASE WHEN role = 'assistant' AND typeof(tool_calls) = 'text' THEN (length(tool_calls) - "
          f"length(replace(tool_calls, '{_NAME_KEY}', ''))) / {len(_NAME_KEY)} ELSE 0 END")


def read_progress(conn: sqlite3.Connection, turns: Iterable[tuple[str, float]],
                  columns: set[str]) -> dict[str, TurnProgress]:
    """Each (session id, the marker's ``started_at``) turn's :class:`TurnProgress` (``columns``: of
    ``messages``): its rows walked without their text (role, time, how many calls), then the text of its last
    few assistant rows only. Raises ``sqlite3.Error``."""
    wanted = list(dict.fromkeys(turns))
    if not {"id", "session_id", "role", "timestamp", "content", "tool_calls"} <= columns or not wanted:
        return {}
    live = " AND active = 1" if "active" in columns else ""
    values = f"role IN ('assistant', 'tool'){live}, role = 'assistant'{live}, {_CALLS}"
    # per turn: [rows, tool calls, the last row's time, the ids of its last assistant rows with their calls,
    #            the ids of its tool results]
    seen: dict[str, list[Any]] = {}
    for sid, since in wanted:
        acc: list[Any] = [0, 0, 0.0, [], []]
        for rid, ts, mine, said, n in session_rows(conn, sid, since, values):
            if not mine:
                continue
            acc[0] += 1
            if isinstance(ts, (int, float)) and ts > acc[2]:
                acc[2] = float(ts)
            if said:
                acc[1] += n
                acc[3] = sorted([*acc[3], (rid, n)])[-RECENT_STEPS:]  # the last few (rows come in time order)
            else:
                acc[4].append(rid)
        if acc[0]:
            seen[sid] = acc
    ids = [rid for acc in seen.values() for rid, _n in acc[3]]
    texts = {v["id"]: (v["content"], v["tool_calls"])
             for v in rows_in(conn, "messages", ["id", "content", "tool_calls"], "id", ids)}
    out: dict[str, TurnProgress] = {}
    for key, started in wanted:
        got = seen.get(key)
        if got is None:
            out[key] = TurnProgress()
            continue
        last = got[3][-1][0] if got[3] else None
        answered = sum(1 for rid in got[4] if rid > last) if last is not None else None
        out[key] = summarise((got[0], got[1], got[2]), [(*texts.get(rid, (None, None)), n) for rid, n in got[3]],
                             started, answered)
    return out

