"""A real Hermes writes ``state.db``: a long turn built through Hermes' own ``SessionDB``, and Hermes-style commits
timed while something reads beside them (``tests/bench/bench_statedb_hold.py``,
``tests/integration/test_real_statedb_reads.py``).

Both run under the interpreter of a real Hermes installation (``tests/integration/hermes_venv.py``), as
Hermes' own code: the schema, the indexes, the journal mode and the write path are Hermes'. Hermes 0.22 on
SQLite before 3.51.3 keeps ``state.db`` in rollback-journal mode (``delete``), where a reader makes a commit wait.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

#: argv: state.db, session id, rows, started_at. A turn as a tool loop writes it: each assistant row asks for
#: tool calls (every fifth for two at once, every seventh with arguments longer than a page), each followed by
#: its results; text now and then; before it, an earlier turn and the prompt. Prints the journal mode.
BUILD = r"""
import json, sqlite3, sys
from pathlib import Path
from hermes_state import SessionDB

path, sid, rows, started = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
db = SessionDB(path)
db.create_session(sid, source="tui")
db.create_session(sid + "_other", source="tui")
db.append_message(sid, "user", "an earlier question", timestamp=started - 600)
db.append_message(sid, "assistant", "An earlier answer.", finish_reason="stop", timestamp=started - 590)
db.append_message(sid, "user", "the prompt", timestamp=started - 1)
msgs, i, at = [], 0, started
while len(msgs) < rows:
    i += 1
    at += 0.001
    if i % 11 == 0:
        msgs.append({"role": "assistant", "content": f"Step {i} done.\n\nNext: step {i + 1}.", "finish_reason": "tool_calls",
                     "timestamp": at})
        continue
    calls = [{"id": f"c{i}_{j}", "type": "function", "function": {"name": "terminal" if j == 0 else "read_file",
              "arguments": json.dumps({"command": f"echo {i}" + ("\n" + "x" * 5000 if i % 7 == 0 else "")})}}
             for j in range(2 if i % 5 == 0 else 1)]
    msgs.append({"role": "assistant", "content": "", "tool_calls": calls, "finish_reason": "tool_calls",
                 "timestamp": at})
    for call in calls:
        if len(msgs) < rows:
            at += 0.0005
            msgs.append({"role": "tool", "content": f"output of {call['id']}\n" * 3, "tool_call_id": call["id"],
                         "tool_name": call["function"]["name"], "timestamp": at})
db.append_messages_batch(sid, msgs[:rows], chunk_rows=20000)
conn = sqlite3.connect(path)
print(json.dumps({"journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                  "sqlite": sqlite3.sqlite_version}))
"""

#: argv: state.db, session id, seconds, every (s). Stamps the session's activity every ``every`` seconds through
#: Hermes' own ``touch_session_activity`` (what a running turn writes while it works: BEGIN IMMEDIATE, one update,
#: COMMIT, with Hermes' busy handling and its sub-second patience) and prints how long each call took, and the
#: writes Hermes gave up on.
WRITER = r"""
import json, sys, time
from pathlib import Path
from hermes_state import SessionDB

db = SessionDB(Path(sys.argv[1]))
sid, seconds, every = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
print("ready", flush=True)
sys.stdin.readline()
took, failed, end, due = [], [], time.monotonic() + seconds, time.monotonic()
while time.monotonic() < end:
    t = time.perf_counter()
    try:
        db.touch_session_activity(sid, description="running a tool")
    except Exception as exc:  # Hermes gave up on the write (its patience ran out): the activity is lost
        failed.append(f"{type(exc).__name__}: {exc}")
    took.append(time.perf_counter() - t)
    due += every
    time.sleep(max(0.0, due - time.monotonic()))
print(json.dumps({"took": took, "failed": failed}), flush=True)
"""


def build_turn(hermes_python: Path, db: Path, session: str, rows: int, started_at: float) -> dict[str, Any]:
    """A session in ``db`` whose turn from ``started_at`` on has ``rows`` assistant and tool rows, written by Hermes."""
    out = subprocess.run([str(hermes_python), "-c", BUILD, str(db), session, str(rows), repr(started_at)],
                         capture_output=True, text=True, timeout=1800, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


class Writer:
    """Hermes' ``touch_session_activity`` every ``every`` seconds for ``seconds``, started by :meth:`go`."""

    def __init__(self, hermes_python: Path, db: Path, session: str, seconds: float, every: float = 0.05) -> None:
        self.proc = subprocess.Popen([str(hermes_python), "-c", WRITER, str(db), session, str(seconds), str(every)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def waits(self) -> tuple[list[float], list[str]]:
        """Each call's seconds, and why each write Hermes gave up on failed, once the writer is done."""
        out, _ = self.proc.communicate(timeout=600)
        doc = json.loads(out.strip().splitlines()[-1])
        return [float(x) for x in doc["took"]], [str(x) for x in doc["failed"]]
