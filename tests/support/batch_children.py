"""Child processes for the group-commit tests (tests/test_marker_batch.py): a marker *holder* that can be
SIGKILLed at a chosen step of its batch, and a *waiter* that reports how its change went in.

Run as ``python -m tests.support.batch_children ROLE HOME ...`` from the repository root.

holder HOME KEY STEP READY GO
    Writes KEY. Inside the lock (before reading the file) it creates READY and waits for GO, so waiters
    can queue behind it; then it SIGKILLs itself at STEP (or runs to the end for ``none``):
    before_record, after_record, after_exchange, after_exchange_hermes_clears=<key>, in_hand_out,
    after_hand_out, before_dir_fsync, after_busy_put_back (a Hermes rename H1 lands right before our
    exchange and a second, H2, over ours before the put-back: killed once the put-back settled, with
    H1 at our temp name), in_put_back (H1 lands right before our exchange; killed before the put-back:
    ours in place, H1 at our temp name).
waiter HOME OP KEY [EXPECTED_JSON]
    OP is record, clear or remove; prints one JSON line: {"answered": bool, "result": ...}.
hermes_clear HOME KEY
    Hermes' own ``clear_turn_marker`` (the reference module), as Hermes would run it.
soak HOME WRITER START ACKS STOP SEED
    Records and clears its own three keys (``wWRITER-k0..2``, prompt ``soak <i>``) until STOP exists,
    appending ``B <i> <op> <key>`` before and ``A <i> <op> <key>`` after each change to ACKS (and ``R``
    when it starts), so a test that SIGKILLs writers can tell which changes were acknowledged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _holder(home: str, key: str, step: str, ready: str, go: str) -> None:
    from hermes_tray_core import atomic_exchange, fsutil, marker_batch, markers

    real_load = markers.MarkerStore._load_for_write
    waited: list[int] = []

    def load(self, *args, **kwargs):
        if not waited:
            waited.append(1)
            Path(ready).touch()
            deadline = time.monotonic() + 30
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.005)
        return real_load(self, *args, **kwargs)

    markers.MarkerStore._load_for_write = load  # type: ignore[method-assign]

    def wrap(owner, name, before: bool, then=None):
        real = getattr(owner, name)

        def f(*args, **kwargs):
            if before:
                _die()
            out = real(*args, **kwargs)
            if then is not None:
                then()
            _die()
            return out

        setattr(owner, name, f)

    if step == "before_record":
        wrap(marker_batch.Batch, "before_install", before=True)
    elif step == "after_record":
        wrap(marker_batch.Batch, "before_install", before=False)
    elif step == "after_exchange":
        wrap(atomic_exchange, "swap_in_verified", before=False)
    elif step.startswith("after_exchange_hermes_clears="):
        other = step.split("=", 1)[1]

        def hermes_clears() -> None:  # Hermes concludes that turn while our batch is in but unanswered
            subprocess.run([sys.executable, "-m", "tests.support.batch_children", "hermes_clear", home, other],
                           cwd=ROOT, check=True)

        wrap(atomic_exchange, "swap_in_verified", before=False, then=hermes_clears)
    elif step in ("after_busy_put_back", "in_put_back"):
        from tests.support.exchange_hooks import hooked_parts

        real_verified = atomic_exchange.swap_in_verified
        marker = markers.marker_path(home)
        original = marker.read_bytes()

        def hermes_rename(name: str) -> None:  # Hermes' write, from a read taken before ours went in
            data = json.loads(original)
            data[name] = markers.build_entry(f"a Hermes turn {name}")
            tmp = marker.with_name(f".interrupted_turns_{name}.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, marker)

        def before_put_back(n: int) -> None:
            if n == 1:  # right before the put-back's first exchange
                if step == "in_put_back":
                    _die()  # ours in place, H1 at our temp name
                hermes_rename("hermes2")  # over ours: the put-back needs a second round

        def verified(*args, **kwargs):
            hermes_rename("hermes1")
            atomic_exchange._verified_parts = hooked_parts(before_put_back)
            out = real_verified(*args, **kwargs)
            _die()  # after_busy_put_back: settled (H2 stands, H1 at our temp name), before the record is dropped
            return out

        atomic_exchange.swap_in_verified = verified
    elif step == "in_hand_out":
        wrap(marker_batch, "_hand_out", before=True)
    elif step == "after_hand_out":
        wrap(marker_batch.Batch, "hand_out", before=False)
    elif step == "before_dir_fsync":
        real_sync = fsutil.fsync_dir

        def sync(path):
            if os.path.exists(go):
                _die()
            return real_sync(path)

        fsutil.fsync_dir = sync  # type: ignore[assignment]
    elif step != "none":
        raise SystemExit(f"unknown step {step}")
    markers.MarkerStore(home).record(key, f"holder prompt for {key}")
    print(json.dumps({"done": True}), flush=True)


def _waiter(home: str, op: str, key: str, expected: str | None) -> None:
    from hermes_tray_core import markers

    answered: list[bool] = []
    real_answer = markers.MarkerStore._answer

    def answer(self, request):
        out = real_answer(self, request)
        answered.append(out[0])
        return out

    markers.MarkerStore._answer = answer  # type: ignore[method-assign]
    store = markers.MarkerStore(home)
    if op == "record":
        result = store.record(key, f"waiter prompt for {key}")["prompt"]
    elif op == "clear":
        result = store.clear(key)
    elif op == "remove":
        result = store.remove_if_unchanged(key, json.loads(expected or "{}"), settle=False)
    else:
        raise SystemExit(f"unknown op {op}")
    print(json.dumps({"answered": bool(answered and answered[-1]), "result": result}), flush=True)


def _hermes_clear(home: str, key: str) -> None:
    from tests.support.hermes_reference import load_reference_markers

    load_reference_markers().clear_turn_marker(home, key)


def _soak(home: str, writer: str, start: str, acks: str, stop: str, seed: str) -> None:
    import random

    from hermes_tray_core import markers

    rng = random.Random(int(seed))
    keys = [f"w{writer}-k{j}" for j in range(3)]
    store = markers.MarkerStore(home)
    present = {k for k in store.list() if k in keys}
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, b"R\n")
    i = int(start)
    while not os.path.exists(stop):
        key = rng.choice(keys)
        op = "clear" if key in present else "record"
        os.write(fd, f"B {i} {op} {key}\n".encode())
        if op == "record":
            store.record(key, f"soak {i}")
            present.add(key)
        else:
            store.clear(key)
            present.discard(key)
        os.write(fd, f"A {i} {op} {key}\n".encode())
        i += 1
    os.close(fd)


def main(argv: list[str]) -> None:
    role, *rest = argv
    if role == "holder":
        _holder(*rest)
    elif role == "waiter":
        _waiter(rest[0], rest[1], rest[2], rest[3] if len(rest) > 3 else None)
    elif role == "hermes_clear":
        _hermes_clear(*rest)
    elif role == "soak":
        _soak(*rest)
    else:
        raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    main(sys.argv[1:])
