"""The tray and the helper never crash on hostile input, and the command line rejects unsafe ids.

The tray (offscreen) and the helper run on a home whose every source is rewritten with broken
content, many times a second for a few seconds (every change wakes their watchers and re-scans):
truncated and corrupt marker files, NaN / future / huge values, garbage ``state.db`` and
``active_sessions.json``, unparseable ``config.yaml``, torn WebUI journals, and the tray's own
``config.toml``. Both must stay up,
exit 0 on SIGTERM, never write a marker file they were not asked to, and keep corrupt files.
"""

from __future__ import annotations

import json
import random
import subprocess
import time

import fault_hostile as H  # noqa: E402
import fault_resume_race as R  # noqa: E402
import pytest

MARKERS = [
    b"{", b"", b"[]", b"null", b"\xff\xfe\x00", b"[" * 20_000, b'{"a":' * 20_000,
    b'{"20261129_1": {"prompt": "p", "started_at": NaN, "attempts": Infinity, "writer_pid": -1}}',
    b'{"20261129_2": {"prompt": "p", "started_at": 1e308, "writer_pid": 99999999999999999999}}',
    b'{"../../etc": {"prompt": {"x": 1}, "started_at": "yesterday", "auto_continue": "no"}}',
    b'{"20261129_3": {"prompt": "' + b"x" * 200_000 + b'", "started_at": 4102444800}}',
    json.dumps({f"2026112{i}_k": {"prompt": "p\u202e\u0000", "started_at": time.time(), "writer_pid": H.DEAD_PID}
                for i in range(40)}).encode(),
]
CONFIGS = [b"desktop: [", b"desktop:\n  auto_continue: 7\n", b"\xff\xfe", b"[" * 300,
           b"desktop:\n  auto_continue:\n    enabled: maybe\n    freshness_minutes: -5\n    max_attempts: .nan\n"]
ACTIVE = [b"{", b'{"entries": 5}', b'{"entries": [{"session_id": "20261129_1", "pid": "x"}]}', b"\x00" * 100]
TOMLS = [b'mode = "bogus"\nx = [', b"\xff\xfe", b"mode = 5\n", b'homes = ["/nonexistent", 7]\n',
         b'hermes_command = []\n', b"[[[[\n", b'mode = "auto"\nnotify = "yes"\n']
JOURNAL = [b'{"event": "submitted", "turn_id": "t", "created_at": 1}\n{"event": "sub', b"\xff\n\n{}\n[1]\n",
           b'{"event": "worker_started", "turn_id": "t", "created_at": "NaN", "worker_pid": 1}\n']


def test_tray_and_helper_survive_a_storm_of_hostile_files(tmp_path, random_seed):
    rng = random.Random(random_seed)  # which file gets which bytes when: a failure prints the seed to replay it
    home = tmp_path / "home"
    for d in ("desktop", "runtime", "webui/sessions/_turn_journal"):
        (home / d).mkdir(parents=True)
    env = R._env(tmp_path)
    (tmp_path / "logs").mkdir()
    procs = [
        R._start(R._cli() + ["helper", "--no-notifications", "--home", str(home)], env, tmp_path / "logs" / "h.out"),
        R._start(R._cli() + ["--home", str(home)], env, tmp_path / "logs" / "t.out"),
    ]
    try:
        assert R._wait_for(lambda: all((tmp_path / "tray-run" / n).exists() for n in ("helper.lock", "tray.lock")), 30)
        writes = 0
        deadline = time.monotonic() + 6.0
        marker = home / "desktop" / "interrupted_turns.json"
        while time.monotonic() < deadline:
            data = rng.choice(MARKERS)
            marker.write_bytes(data)
            (home / "config.yaml").write_bytes(rng.choice(CONFIGS))
            (tmp_path / "tray-config").mkdir(mode=0o700, exist_ok=True)
            (tmp_path / "tray-config" / "config.toml").write_bytes(rng.choice(TOMLS))
            (home / "runtime" / "active_sessions.json").write_bytes(rng.choice(ACTIVE))
            (home / "webui/sessions/_turn_journal" / rng.choice(["s1.jsonl", "s1~1.jsonl", "x~y.jsonl"])).write_bytes(
                rng.choice(JOURNAL))
            H.write_state_db(home / "state.db", rng.choice(["garbage", "empty", "wrong-schema", "views", "classic"]),
                             ["20261129_1"], [[b"\xff", None, 1.5, "compression", b"\x00", 2**62, -1, "x"]],
                             rng.randbytes(64))
            writes += 1
            time.sleep(rng.uniform(0.01, 0.12))
            for p in procs:
                assert p.poll() is None, f"{p.args[2:4]} died: " + open(p._log.name, errors="replace").read()[-2000:]
        last = marker.read_bytes()
        time.sleep(1.0)
    except BaseException:
        for p in procs:
            R._stop(p, timeout=5)
        raise
    codes = [R._stop(p) for p in procs]
    out = "".join(open(p._log.name, errors="replace").read() for p in procs)
    assert codes == [0, 0], out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert marker.read_bytes() == last, "a reader rewrote the marker file"
    print(f"hostile tray+helper storm: {writes} rewrites of every source, crashes=0")


BAD = ["../x", "a/b", "..", "x\ny", "x" * 10_000]


@pytest.mark.parametrize("cmd", ["skip", "resume"])
def test_cli_rejects_unsafe_session_ids(tmp_path, cmd):
    env = R._env(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    for bad in BAD:
        r = subprocess.run(R._cli() + [cmd, bad, "--home", str(home)], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, (bad[:20], r.returncode, r.stdout, r.stderr)
        err = (r.stdout + r.stderr).lower()
        assert "traceback" not in err and "session" in err, r.stderr
        assert any(w in err for w in ("separator", "..", "control", "long", "characters")), r.stderr
