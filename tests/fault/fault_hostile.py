"""Hypothesis strategies for hostile and broken input, and a hostile Hermes home builder.

Every source the tray reads is covered: the marker file, WebUI journals (plain and shards),
``config.yaml``, ``state.db`` (garbage, wrong schema, wrong types), ``active_sessions.json``,
and the tray's own ``config.toml``. Values mix valid-looking Hermes data with every JSON
type in every field, NaN/Infinity, huge integers, deep nesting, invalid UTF-8, BOMs, path
tricks in keys, markers from the future and from long ago.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("HERMES_TRAY_FAULT_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    derandomize=os.environ.get("HERMES_TRAY_FAULT_DERANDOMIZE", "") == "1",
    # Shrinking multi-kilobyte hostile inputs can take minutes; CI reports the raw failing example.
    phases=tuple(Phase) if os.environ.get("HERMES_TRAY_FAULT_SHRINK") == "1"
    else (Phase.explicit, Phase.reuse, Phase.generate),
)

NOW = time.time()


def dead_pid() -> int:
    """A pid that existed and is gone (reaped child)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


DEAD_PID = dead_pid()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12
)

times = st.one_of(
    st.floats(min_value=NOW - 3 * 86400, max_value=NOW + 10 * 365 * 86400),  # incl. markers from the future
    st.sampled_from([NOW, NOW - 60, NOW + 3600, NOW + 1e9, 0, -1, 1e308, 2**63, float("nan"), float("inf")]),
    json_values,
)
pids = st.one_of(
    st.sampled_from([DEAD_PID, os.getpid(), 1, 0, -1, 2**31, 2**63, 2**70, True]),
    st.integers(min_value=-10, max_value=2**40),
    json_values,
)
weird_keys = st.one_of(
    st.text(max_size=24),
    st.sampled_from(
        ["20261129_120000_abcdef", "../../etc/passwd", "a/b", "a\\b", "..", ".", "", " x ", "x\x00y",
         "\u202eevil", "x" * 10_000, "sess~1", "CON", "a:b"]
    ),
)
prompts = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["", "   ", "\n\n", "x" * 70_000, "line1\nline2", "\ud800 lone surrogate"]),
    json_values,
)

entries = st.fixed_dictionaries(
    {},
    optional={
        "attempts": st.one_of(st.integers(min_value=-5, max_value=2**65), json_values),
        "prompt": prompts,
        "started_at": times,
        "auto_continue": json_values,
        "writer_pid": pids,
        "writer_start_time": times,
        "notification_category": st.one_of(st.just("diagnostic"), json_values),
        "interrupted_by": st.one_of(st.just("shutdown"), json_values),
        "interrupted_at": times,
        "queued": json_values,
    },
)


def _dumps(doc) -> bytes:
    try:
        return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except (ValueError, TypeError):
        return b"{}"


marker_bytes = st.one_of(
    st.dictionaries(weird_keys, st.one_of(entries, json_values), max_size=6).map(_dumps),
    json_values.map(_dumps),
    st.binary(max_size=400),
    st.sampled_from(
        [b"", b"{", b"\xef\xbb\xbf{}", b"[" * 50_000, b'{"a":' * 50_000, b"null", b"{}\x00", b'{"k": {"prompt": "\xff"}}',
         b'{"k": {"prompt": "p", "started_at": NaN, "attempts": Infinity}}', b"1e99999"]
    ),
    st.dictionaries(weird_keys, entries, max_size=4).map(lambda d: _dumps(d)[: max(1, len(_dumps(d)) // 2)]),
)

journal_events = st.fixed_dictionaries(
    {},
    optional={
        "version": st.one_of(st.just(1), json_values),
        "session_id": st.one_of(st.just("s1"), json_values),
        "turn_id": st.one_of(st.sampled_from(["20261129T120000Z-aaaaaaaaaaaa", "t2", ""]), json_values),
        "created_at": times,
        "event": st.one_of(
            st.sampled_from(["submitted", "worker_started", "assistant_started", "completed", "interrupted"]),
            json_values,
        ),
        "worker_pid": pids,
        "worker_start_time": times,
        "pid": pids,
    },
)
journal_line = st.one_of(journal_events.map(_dumps), json_values.map(_dumps), st.binary(max_size=80))
journal_bytes = st.lists(journal_line, max_size=8).map(lambda lines: b"\n".join(lines)) | st.binary(max_size=300)
journal_names = st.sampled_from(
    ["s1.jsonl", "s1~123.jsonl", f"s1~{DEAD_PID}.jsonl", "s1~x.jsonl", "..jsonl", ".jsonl", "~.jsonl",
     "a b.jsonl", "s1~.jsonl", "z" * 200 + ".jsonl"]
)

yaml_values = st.one_of(
    st.sampled_from(["true", "false", "yes", "off", "~", "'15'", "1e400", "-1", "0", "2.5", ".nan", ".inf",
                     "[1, 2]", "{a: 1}", "!!binary aGk=", "!!python/object:os.system 'x'", "*nosuchalias", "''",
                     "0x10", "1_000", "2**70", "\"\\u0000\""]),
    st.integers().map(str),
    st.text(max_size=12).map(json.dumps),
)
yaml_auto_continue = st.builds(
    lambda e, f, m, extra: (
        "# user comment\nmodel:\n  default: x\ndesktop:\n  auto_continue:\n"
        f"    enabled: {e}\n    freshness_minutes: {f}\n    max_attempts: {m}\n{extra}"
    ),
    yaml_values,
    yaml_values,
    yaml_values,
    st.sampled_from(["", "desktop: {}\n", "other: &a [1]\nmore: *a\n", "\t bad indent\n", "...\n---\nx: 1\n"]),
)
BILLION_LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
    for i in range(8)
) + "desktop:\n  auto_continue:\n    enabled: *i\n"
yaml_text = st.one_of(
    yaml_auto_continue,
    st.text(max_size=200),
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
    st.sampled_from(
        ["desktop: [1, 2]\n", "desktop:\n  auto_continue: 5\n", "- a\n- b\n", "desktop: !!set {a}\n",
         "desktop:\n  auto_continue:\n    enabled: false\n  auto_continue:\n    enabled: true\n",  # duplicate keys
         "\ufeffdesktop:\n  auto_continue:\n    enabled: false\n", "[" * 300]
    ),
)
yaml_bytes = st.one_of(yaml_text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200))

toml_text = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda k, v: f"{k} = {v}\n",
        st.sampled_from(["mode", "notify", "show_prompts", "homes", "hermes_command", "bogus", '"mode"', "a.b"]),
        st.sampled_from(['"ask"', '"auto"', '"off"', '"nope"', "true", "1", "[]", '[""]', '["hermes"]', "[1]",
                         "{a = 1}", '"\\u0000"', "1979-05-27", "nan", "inf", '"""x"""', "[[1]]"]),
    ),
    st.sampled_from(["x = [" * 3000, "mode = 'ask'\nmode = 'off'\n", "[mode]\n", "\ufeffmode = 'ask'\n"]),
)
toml_bytes = st.one_of(toml_text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200))

active_bytes = st.one_of(
    st.fixed_dictionaries(
        {"entries": st.lists(
            st.fixed_dictionaries(
                {},
                optional={"session_id": weird_keys, "pid": pids, "process_start_time": times,
                          "surface": json_values, "pidns": json_values},
            ),
            max_size=4,
        )}
    ).map(_dumps),
    json_values.map(_dumps),
    st.binary(max_size=200),
)

sql_values = st.one_of(
    st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=False),
    st.text(max_size=20), st.binary(max_size=20), st.sampled_from([b"\xff\xfe", "bot_room", "compression"]),
)
state_db_kind = st.sampled_from(["none", "garbage", "empty", "classic", "newer", "wrong-schema", "views"])


def write_state_db(path: Path, kind: str, keys: list[str], rows: list, data: bytes) -> None:
    """A ``state.db`` of the given kind, with hostile row values (blobs, invalid UTF-8, wrong types)."""
    if path.exists():
        path.unlink()
    for side in ("-wal", "-shm", "-journal"):
        Path(str(path) + side).unlink(missing_ok=True)
    if kind == "none":
        return
    if kind in ("garbage", "empty"):
        path.write_bytes(data if kind == "garbage" else b"")
        return
    con = sqlite3.connect(path)
    try:
        if kind == "wrong-schema":
            con.execute("CREATE TABLE sessions (x)")
            con.execute("CREATE TABLE session_turn_leases (y, z)")
            con.execute("CREATE TABLE interrupted_turns (id)")
        elif kind == "views":
            con.execute("CREATE VIEW sessions AS SELECT 1/0 AS id, 'x' AS title")
            con.execute("CREATE VIEW session_turn_leases AS SELECT 'k' AS conversation_id, abs(-9223372036854775808)"
                        " AS holder, 1 AS expires_at")
        else:
            con.execute("CREATE TABLE sessions (id, title, source, parent_session_id, end_reason)")
            cols = "conversation_id, holder, acquired_at, expires_at"
            if kind == "newer":
                cols += ", epoch, owner_pid, owner_pid_start"
            con.execute(f"CREATE TABLE session_turn_leases ({cols})")
            n = len(cols.split(","))
            for i, key in enumerate(keys):
                r = rows[i % len(rows)] if rows else [None] * 8
                con.execute("INSERT INTO sessions VALUES (?,?,?,?,?)", (key, r[0], r[1], r[2], r[3]))
                vals = [key, r[4], r[5], r[6], r[7], r[0], r[1]][:n]
                con.execute(f"INSERT INTO session_turn_leases VALUES ({','.join('?' * n)})", vals)
        con.commit()
    finally:
        con.close()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: a read-only scan must leave it identical."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.suffix in (".lock",) or p.name.endswith(("-wal", "-shm", "-journal")):
                continue
            try:
                out[str(p.relative_to(root))] = p.read_bytes()
            except OSError:
                pass
    return out
