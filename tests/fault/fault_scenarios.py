"""Crash-injection scenarios, one per kind of write. Shared by the pytest tests (CI: 50 kills
per kind) and ``tests/bench/bench_fault.py`` (>= 500 kills per kind).

Every writer announces an operation (``B ...``) before it starts and acknowledges it
(``A ...``) after it returned. After the SIGKILL the checker knows exactly which operations
completed and which single one was in flight; it then reads the files back and requires:
- the file parses (raw parser and the project's reader agree);
- every acknowledged operation's effect is there (and nothing that was never begun);
- the in-flight operation is either fully applied or not at all;
- no temp file a reader would open, at most the killed writer's own temp, swept by the
  next writer; no corrupt-file set-aside caused by a crash (a crash never corrupts).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import stat
import time
from pathlib import Path

from faultkit import KillStats, RoundResult, kill_rounds, temp_litter

# --------------------------------------------------------------------------- helpers


def _split(acks: list[str]) -> tuple[list[list[str]], list[str] | None]:
    """(completed ops, in-flight op or None) from B/A lines."""
    done: list[list[str]] = []
    begun: list[str] | None = None
    for line in acks:
        kind, _, rest = line.partition(" ")
        if kind == "B":
            begun = rest.split(" ")
        elif kind == "A":
            parts = rest.split(" ")
            if begun is None or parts[0] != begun[0]:
                raise AssertionError(f"ack without begin: {line!r}")
            done.append(parts)
            begun = None
    return done, begun


def _check_litter(res: RoundResult, path: Path, swept: bool, prev: int) -> int:
    """Each killed writer leaves at most its own temp file; a write that completed in this round swept
    those of dead writers (``swept``), so then only the in-flight one may be left."""
    n = len(temp_litter(path.parent, path.name))
    bound = 1 if swept else prev + 1
    assert n <= bound, f"round {res.index}: {n} temp files left beside {path.name} (bound {bound})"
    return n


def _payload(i: int, size: int) -> str:
    # Distinct, non-ASCII, deterministic from i: a torn or mixed write cannot pass as another op.
    unit = f"<{i}:héllo-wörld-✓>"
    return (unit * (size // len(unit) + 1))[:size]


# --------------------------------------------------------------------------- fsutil.atomic_write_bytes


def _naive_write(target: Path, data: bytes) -> None:
    """What the project must never do: truncate + write in place (used to prove the harness bites)."""
    with open(target, "wb") as f:
        for k in range(0, len(data), 8192):
            f.write(data[k : k + 8192])
            f.flush()


def _fsutil_writer(ack, target: str, start: int, seed: int, naive: bool = False) -> None:
    from hermes_tray_core.stores.fsutil import atomic_write_bytes

    write = _naive_write if naive else atomic_write_bytes
    rng = random.Random(seed)
    ack("R")
    i = start
    while True:
        size = rng.choice((10, 4_000, 70_000, 300_000))
        body = _payload(i, size).encode()
        data = f"{i}:{hashlib.sha256(body).hexdigest()}:".encode() + body
        ack(f"B {i}")
        write(Path(target), data)
        ack(f"A {i}")
        i += 1


def _parse_fsutil(data: bytes) -> int:
    i, digest, body = data.split(b":", 2)
    assert hashlib.sha256(body).hexdigest().encode() == digest, "content does not match its checksum"
    assert body.decode() == _payload(int(i), len(body.decode())), "body is not the writer's payload"
    return int(i)


def crash_fsutil(workdir: Path, kills: int, rng: random.Random, *, naive: bool = False) -> KillStats:
    """Atomic durable write (the primitive under every store): old or new, never torn."""
    target = Path(workdir) / "blob.bin"
    state = {"i": None}
    litter_max = 0

    def verify(res: RoundResult) -> None:
        nonlocal litter_max
        done, inflight = _split(res.acks)
        allowed = set()
        if done:
            allowed.add(int(done[-1][0]))
        else:
            allowed.add(state["i"])
        if inflight:
            allowed.add(int(inflight[0]))
        try:
            got = _parse_fsutil(target.read_bytes()) if target.exists() else None
        except ValueError as exc:
            raise AssertionError(f"round {res.index}: file does not parse: {exc}") from exc
        assert got in allowed, f"round {res.index}: file holds op {got}, expected one of {allowed}"
        state["i"] = got
        litter = temp_litter(target.parent, target.name)
        litter_max = max(litter_max, len(litter))
        assert len(litter) <= 1, f"round {res.index}: temp litter {litter}"
        from hermes_tray_core.stores.fsutil import sweep_stale_temps

        sweep_stale_temps(target)
        assert temp_litter(target.parent, target.name) == [], "sweep left a dead writer's temp file"

    stats = kill_rounds(
        "fsutil-write",
        workdir,
        _fsutil_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(target), r * 1_000_000, rng.randrange(1 << 30), naive),
        verify=verify,
    )
    stats.extra["max_temp_litter"] = litter_max
    return stats


# --------------------------------------------------------------------------- core.markers.store

MARKER_KEYS = [f"20261129_1200{n:02d}_fault{n:02d}" for n in range(20)]


def marker_prompt(i: int) -> str:
    return f"fault prompt {i} " + _payload(i, (i * 7919) % 9000)


def _markers_writer(ack, home: str, start: int, seed: int) -> None:
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    rng = random.Random(seed)
    present = set(markers.list_turn_markers(home))
    ack("R")
    i = start
    while True:
        key = rng.choice(MARKER_KEYS)
        if key in present:
            ack(f"B {i} clear {key}")
            turn_marker.clear_turn_marker(home, key)
            present.discard(key)
            ack(f"A {i} clear {key}")
        else:
            ack(f"B {i} record {key}")
            turn_marker.record_turn_start(home, key, marker_prompt(i), attempts=i % 3)
            present.add(key)
            ack(f"A {i} record {key}")
        i += 1


def crash_markers(workdir: Path, kills: int, rng: random.Random) -> KillStats:
    """hermes_tray_core.markers.store record/clear under SIGKILL: the file always parses, no acked change lost."""
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home = Path(workdir) / "home"
    (home / "desktop").mkdir(parents=True, exist_ok=True)
    path = home / "desktop" / "interrupted_turns.json"
    model: dict[str, int] = {}  # key -> op index that recorded it
    litter_max = 0
    prev_litter = [0]
    inflight_applied = 0

    def verify(res: RoundResult) -> None:
        nonlocal litter_max, inflight_applied
        done, inflight = _split(res.acks)
        expect = dict(model)
        for i, op, key in done:
            if op == "record":
                expect[key] = int(i)
            else:
                expect.pop(key, None)
        raw = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        assert isinstance(raw, dict), f"round {res.index}: marker file is not an object"
        actual = {}
        for key, entry in raw.items():
            assert isinstance(entry, dict), f"round {res.index}: entry {key} is {entry!r}"
            assert isinstance(entry.get("started_at"), float)
            assert isinstance(entry.get("writer_pid"), int)
            i = int(entry["prompt"].split(" ", 3)[2])
            assert entry["prompt"] == marker_prompt(i), f"round {res.index}: {key} prompt torn or mixed"
            assert entry["attempts"] == i % 3
            actual[key] = i
        ikey = inflight[2] if inflight else None
        for key in set(expect) | set(actual):
            if key == ikey:
                before = expect.get(key)
                after = int(inflight[0]) if inflight[1] == "record" else None
                assert actual.get(key) in (before, after), (
                    f"round {res.index}: in-flight {inflight} left {key}={actual.get(key)}"
                )
                if actual.get(key) != before:
                    inflight_applied += 1
            else:
                assert actual.get(key) == expect.get(key), (
                    f"round {res.index}: {key} is {actual.get(key)} but acked ops say {expect.get(key)}"
                )
        listed = markers.list_turn_markers(home)
        assert set(listed) == set(actual), f"round {res.index}: list_turn_markers disagrees with the file"
        names = os.listdir(home / "desktop")
        assert not [n for n in names if ".corrupt-" in n], f"round {res.index}: a crash produced a corrupt file"
        # Each killed writer leaves at most its own temp file; every completed write sweeps the temps of
        # dead writers (so after a round with a completed write only the in-flight one can be left).
        litter = temp_litter(path.parent, path.name)
        litter_max = max(litter_max, len(litter))
        bound = 1 if done else prev_litter[0] + 1
        assert len(litter) <= bound, f"round {res.index}: temp litter {litter} (bound {bound})"
        prev_litter[0] = len(litter)
        model.clear()
        model.update(actual)

    stats = kill_rounds(
        "markers",
        workdir,
        _markers_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(home), r * 1_000_000, rng.randrange(1 << 30)),
        verify=verify,
    )
    # The next write sweeps the litter of the killed writer.
    turn_marker.record_turn_start(home, MARKER_KEYS[0], marker_prompt(0))
    left = temp_litter(path.parent, path.name)
    assert left == [], f"stale temp files not swept by the next write: {left}"
    stats.extra["max_temp_litter"] = litter_max
    stats.extra["inflight_applied"] = inflight_applied
    return stats


# --------------------------------------------------------------------------- core.stores.turn_journal

JOURNAL_SID = "fault-session_01"


# --------------------------------------------------------------------------- core.stores.lease

LEASE_NAMES = ["resume:/h:s1", "resume:/h:s2", "resume:/h:s3"]


def _lease_writer(ack, db: str, tag: str, seed: int) -> None:
    from hermes_tray_core.stores.lease import LeaseStore

    rng = random.Random(seed)
    store = LeaseStore(Path(db))
    ack("R")
    i = 0
    while True:
        name = rng.choice(LEASE_NAMES)
        ack(f"B {i} acquire {name}")
        lease = store.acquire(name, f"pid={os.getpid()}:turn={tag}-{i}", ttl=60.0)
        if lease is None:
            ack(f"A {i} busy {name}")
        else:
            ack(f"A {i} acquire {name} {lease.epoch}")
            i += 1
            if rng.random() < 0.5:
                ack(f"B {i} refresh {name}")
                ok = store.refresh(lease, ttl=60.0)
                ack(f"A {i} refresh {name} {int(ok)}")
                i += 1
            if rng.random() < 0.8:  # sometimes keep holding: the kill then hits a live holder
                ack(f"B {i} release {name}")
                store.release(lease)
                ack(f"A {i} release {name} {lease.epoch}")
        i += 1


def crash_lease(workdir: Path, kills: int, rng: random.Random) -> KillStats:
    """hermes_tray_core.stores.lease under SIGKILL: the db stays sound, epochs never go back, a dead holder is taken over at once."""
    from hermes_tray_core.stores.lease import LeaseStore

    db = Path(workdir) / "leases.sqlite3"
    max_epoch: dict[str, int] = {}
    takeovers = 0

    def verify(res: RoundResult) -> None:
        nonlocal takeovers
        done, _inflight = _split(res.acks)
        held: set[str] = set()
        for op in done:
            if op[1] == "acquire":
                max_epoch[op[2]] = max(max_epoch.get(op[2], 0), int(op[3]))
                held.add(op[2])
            elif op[1] == "release":
                held.discard(op[2])
            elif op[1] == "refresh":
                assert op[3] == "1", f"round {res.index}: refresh of a held lease failed"
        con = sqlite3.connect(db, timeout=10)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            con.close()
        store = LeaseStore(db)
        for name in LEASE_NAMES:
            t0 = time.monotonic()
            lease = store.acquire(name, f"checker-{res.index}", ttl=60.0, wait=2.0, poll=0.01)
            waited = time.monotonic() - t0
            assert lease is not None, f"round {res.index}: {name} not free after its holder was killed"
            assert waited < 0.5, f"round {res.index}: dead holder of {name} kept it {waited:.2f}s"
            assert lease.epoch > max_epoch.get(name, 0), (
                f"round {res.index}: epoch went back on {name}: {lease.epoch} <= {max_epoch.get(name)}"
            )
            if name in held:
                takeovers += 1
            max_epoch[name] = lease.epoch
            assert store.release(lease)

    stats = kill_rounds(
        "lease",
        workdir,
        _lease_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(db), f"r{r}", rng.randrange(1 << 30)),
        verify=verify,
    )
    stats.extra["dead_holder_takeovers"] = takeovers
    return stats


# --------------------------------------------------------------------------- tray settings (config.toml)


def settings_homes(i: int) -> list[str]:
    return [f"/srv/hermes-{i}-{k}/home ✓" for k in range(1 + i % 40)]


def _settings_writer(ack, path: str, start: int, seed: int) -> None:
    from hermes_tray_core.stores import settings

    ack("R")
    i = start
    while True:
        ack(f"B {i}")
        settings.update_settings({"homes": settings_homes(i), "mode": ("ask", "auto", "list")[i % 3]}, Path(path))
        ack(f"A {i}")
        i += 1


def crash_settings(workdir: Path, kills: int, rng: random.Random) -> KillStats:
    """hermes_tray_core.stores.settings.update_settings under SIGKILL: config.toml always loads, holds the last acked or in-flight value."""
    from hermes_tray_core.stores import settings

    path = Path(workdir) / "cfg" / "config.toml"
    state = {"i": None}
    litter = 0

    def verify(res: RoundResult) -> None:
        done, inflight = _split(res.acks)
        allowed = {int(done[-1][0])} if done else {state["i"]}
        if inflight:
            allowed.add(int(inflight[0]))
        loaded = settings.load_settings(path)
        homes = list(loaded.homes)
        got = None
        if path.exists():
            got = int(homes[0].split("-")[1])
            assert homes == settings_homes(got), f"round {res.index}: homes torn"
            assert loaded.mode == ("ask", "auto", "list")[got % 3]
        assert got in allowed, f"round {res.index}: config.toml holds write {got}, expected one of {allowed}"
        state["i"] = got
        # Temp files are hidden, writer-tagged names the loader never opens; a completed save sweeps those
        # of dead writers, so only the in-flight one can be left after a round with a completed save.
        nonlocal litter
        litter = _check_litter(res, path, bool(done), litter)

    stats = kill_rounds(
        "config.toml",
        workdir,
        _settings_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(path), r * 1_000_000 + 1, rng.randrange(1 << 30)),
        verify=verify,
    )
    stats.extra["temp_litter_left"] = litter
    return stats


# --------------------------------------------------------------------------- backend config.yaml

CONFIG_YAML = """\
# Hermes config — the user's comments, order and quoting must survive every edit
model:
  provider: custom   # my local server
  default: "llama-3"
desktop:
  # auto-continue after crashes
  auto_continue:
    enabled: true
    freshness_minutes: 15  # minutes
    max_attempts: 2
other_key: [1, 2, 3]
"""


def yaml_values(i: int) -> tuple[int, int]:
    return 1 + i % 997, i % 7


def _yaml_writer(ack, home: str, state_dir: str, start: int, seed: int) -> None:
    os.environ["HERMES_TRAY_STATE_DIR"] = state_dir  # the config lock lives in the tray's state dir
    import ruamel.yaml  # noqa: F401 - imported before "ready", so the kills land in writes, not in an import

    from hermes_tray_core.hermes import config as backend_config
    from hermes_tray_core.hermes import config_edit

    backend_config.read_backend_config(home)
    ack("R")
    i = start
    while True:
        fresh, attempts = yaml_values(i)
        ack(f"B {i}")
        config_edit.write_auto_continue(home, freshness_minutes=fresh, max_attempts=attempts)
        ack(f"A {i}")
        i += 1


def crash_config_yaml(workdir: Path, kills: int, rng: random.Random) -> KillStats:
    """hermes_tray_core.hermes.config_edit.write_auto_continue under SIGKILL: config.yaml always parses, keeps the
    user's bytes outside the two edited values and its own mode, holds the last acked or in-flight value."""
    from ruamel.yaml import YAML

    home = Path(workdir) / "home"
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(CONFIG_YAML, encoding="utf-8")
    os.chmod(path, 0o644)  # the user's own file keeps its mode
    original = CONFIG_YAML.splitlines()
    edited_lines = {i for i, ln in enumerate(original) if "freshness_minutes" in ln or "max_attempts" in ln}
    state = {"i": None}
    litter = 0

    def verify(res: RoundResult) -> None:
        nonlocal litter
        done, inflight = _split(res.acks)
        allowed = {int(done[-1][0])} if done else {state["i"]}
        if inflight:
            allowed.add(int(inflight[0]))
        text = path.read_text(encoding="utf-8")
        doc = YAML(typ="safe").load(text)
        block = doc["desktop"]["auto_continue"]
        lines = text.splitlines()
        assert len(lines) == len(original), f"round {res.index}: line count changed"
        for n, (a, b) in enumerate(zip(original, lines, strict=True)):
            if n not in edited_lines:
                assert a == b, f"round {res.index}: line {n + 1} changed: {b!r}"
        assert "# minutes" in text and doc["other_key"] == [1, 2, 3] and block["enabled"] is True
        got = None
        for i in allowed:
            if i is not None and (block["freshness_minutes"], block["max_attempts"]) == yaml_values(i):
                got = i
        if got is None:
            assert None in allowed and (block["freshness_minutes"], block["max_attempts"]) == (15, 2), (
                f"round {res.index}: config.yaml holds {block}, none of the writes {allowed}"
            )
        state["i"] = got
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644, f"round {res.index}: the user's file mode changed"
        litter = _check_litter(res, path, bool(done), litter)

    stats = kill_rounds(
        "config.yaml",
        workdir,
        _yaml_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(home), str(Path(workdir) / "state"), r * 1_000_000 + 1, rng.randrange(1 << 30)),
        verify=verify,
    )
    stats.extra["temp_litter_left"] = litter
    return stats


# --------------------------------------------------------------------------- the ledger

DECISION_FLOW = ("notified", "approved", "dispatched", "completed")


def _ledger_writer(ack, path: str, start: int, seed: int, keep: int) -> None:
    from hermes_tray_core.stores import ledger as ledger_module
    from hermes_tray_core.stores.ledger import Ledger
    from hermes_tray_core.turn import TurnId

    ledger_module.KEEP = keep  # every start of a process keeps it bounded: a tiny bound bounds it often
    rng = random.Random(seed)
    book = Ledger(Path(path))
    ack("R")
    i = start
    open_turns: list[tuple[str, int]] = []  # (key, next step)
    while True:
        if not open_turns or (len(open_turns) < 6 and rng.random() < 0.4):
            open_turns.append((f"20261129_120000_d{i}", 0))
        n = rng.randrange(len(open_turns))
        key, step = open_turns[n]
        event = DECISION_FLOW[step]
        ack(f"B {i} {key} {event}")
        book.record(event, TurnId("/h", key, 1.0, 0), seq=i)  # type: ignore[arg-type]
        ack(f"A {i} {key} {event}")
        if step + 1 < len(DECISION_FLOW):
            open_turns[n] = (key, step + 1)
        else:
            open_turns.pop(n)
        i += 1


def crash_ledger(workdir: Path, kills: int, rng: random.Random, *, keep: int = 40) -> KillStats:
    """The tray's ledger under SIGKILL, each process starting by bounding it (a tiny bound): every acked decision of
    a turn is there, in order, unless a bound dropped the oldest; the in-flight one is there whole or not at all;
    the file is never damaged (integrity check)."""
    import sqlite3

    from hermes_tray_core.stores.ledger import Ledger

    path = Path(workdir) / "ledger.sqlite3"
    acked: dict[int, str] = {}  # seq -> key
    maybe: set[int] = set()

    def verify(res: RoundResult) -> None:
        done, inflight = _split(res.acks)
        for i, key, _event in done:
            acked[int(i)] = key
        if inflight:
            maybe.add(int(inflight[0]))
        con = sqlite3.connect(path)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"round {res.index}: damaged"
        finally:
            con.close()
        seen = [int(e["seq"]) for e in Ledger(path).history(1_000_000)]
        assert len(seen) == len(set(seen)), f"round {res.index}: a decision appears twice"
        assert set(seen) <= set(acked) | maybe, f"round {res.index}: decisions nobody wrote"
        newest = [i for i in sorted(acked, reverse=True)][: keep // 2]
        lost = set(newest) - set(seen)
        assert not lost, f"round {res.index}: acked decisions lost: {sorted(lost)[:5]}"

    return kill_rounds(
        "ledger",
        workdir,
        _ledger_writer,
        kills=kills,
        rng=rng,
        args_for=lambda r: (str(path), r * 1_000_000, rng.randrange(1 << 30), keep),
        verify=verify,
    )
