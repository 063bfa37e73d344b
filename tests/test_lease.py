"""hermes_tray_core.stores.lease: durable cross-process leases, tested with real SQLite files and real processes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hermes_tray_core.process.identity import process_start_time
from hermes_tray_core.stores.fsutil import UnsafePathError
from hermes_tray_core.stores.lease import Lease, LeaseKeeper, LeaseStore

pytestmark = pytest.mark.serial  # checks lease timing bounds: alone, not beside parallel tests

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path):
    s = LeaseStore(tmp_path / "state" / "leases.sqlite3")
    yield s
    s.close()


def test_one_holder_at_a_time_and_epochs_only_grow(store):
    a = store.acquire("resume:h:s1", "tray", ttl=30)
    assert a is not None and a.epoch == 1 and a.holder == "tray"
    assert store.acquire("resume:h:s1", "helper", ttl=30) is None
    assert store.acquire("resume:h:s1", "tray", ttl=30) is None  # not re-entrant, even for the same holder
    assert store.current("resume:h:s1") == a
    other = store.acquire("resume:h:s2", "helper", ttl=30)
    assert other is not None and other.epoch == 1  # names are independent
    assert store.release(a) is True
    assert store.current("resume:h:s1") is None
    again = store.acquire("resume:h:s1", "tray", ttl=30)  # same holder string after release: new epoch
    assert again.epoch == 2
    store.release(again)
    assert store.acquire("resume:h:s1", "tray", ttl=30).epoch == 3  # survives release


def test_epoch_survives_reopen(tmp_path):
    path = tmp_path / "leases.sqlite3"
    with LeaseStore(path) as s:
        for _ in range(3):
            s.release(s.acquire("n", "h", ttl=5))
    with LeaseStore(path) as s:
        assert s.acquire("n", "h", ttl=5).epoch == 4


def test_fenced_refresh_and_release_after_losing_the_lease(store):
    a = store.acquire("n", "same-holder", ttl=0.2)
    time.sleep(0.25)
    b = store.acquire("n", "same-holder", ttl=30)  # expired: taken over, even by an identical holder string
    assert b is not None and b.epoch == a.epoch + 1
    assert store.refresh(a, ttl=30) is False
    assert store.release(a) is False
    assert store.current("n") == b  # the loser changed nothing
    assert store.refresh(b, ttl=60) is True and b.expires_at > time.time() + 59
    assert store.release(b) is True
    assert store.release(b) is False  # idempotent
    assert store.refresh(b, ttl=60) is False  # released: nothing to refresh


def test_expired_lease_is_taken_over_after_ttl_not_before(store):
    t0 = time.monotonic()  # before the grant: its expiry is at least t0 + ttl, however long the commit took
    store.acquire("n", "slow", ttl=0.4)
    got = store.acquire("n", "waiter", ttl=5, wait=3, poll=0.02)
    waited = time.monotonic() - t0
    assert got is not None
    assert 0.38 <= waited < 0.4 + 1.0  # not before the TTL; the upper bound only says "not the 3 s wait"


def test_invalid_arguments(store):
    for name, holder, ttl in [("", "h", 1), ("n", "", 1), ("n", "h", 0)]:
        with pytest.raises(ValueError):
            store.acquire(name, holder, ttl=ttl)


def test_files_are_private_and_symlinks_refused(tmp_path):
    path = tmp_path / "state" / "leases.sqlite3"
    with LeaseStore(path) as s:
        s.acquire("n", "h", ttl=5)
        if os.name != "nt":
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            for p in path.parent.iterdir():
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    link = tmp_path / "link.sqlite3"
    link.symlink_to(path)
    with pytest.raises(UnsafePathError):
        LeaseStore(link)


HOLDER = textwrap.dedent("""
    import sys, time
    from hermes_tray_core.stores.lease import LeaseStore
    s = LeaseStore(sys.argv[1])
    lease = s.acquire("n", "child", ttl=60)
    print("held" if lease else "missed", lease and lease.epoch, flush=True)
    time.sleep(60)
""")


def test_sigkilled_holder_is_taken_over_within_poll_plus_100ms(store):
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.path)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().split() == ["held", "1"]
        poll = 0.05
        result: dict = {}

        def waiter():
            result["lease"] = store.acquire("n", "tray", ttl=30, wait=10, poll=poll)
            result["t"] = time.monotonic()

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        assert "lease" not in result  # a live holder keeps its lease
        t_kill = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        t.join(5)
        assert result["lease"] is not None and result["lease"].epoch == 2
        assert result["t"] - t_kill <= poll + 0.6, result["t"] - t_kill  # at the next poll, not at the TTL (30 s)
    finally:
        child.kill()
        child.wait()


def test_recycled_pid_does_not_keep_a_lease(store, tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lease = store.acquire("n", "h", ttl=60)
        import sqlite3

        with sqlite3.connect(store.path) as c:  # pretend the holder was an older process with this pid
            c.execute("UPDATE leases SET owner_pid = ?, owner_start = ?", (sleeper.pid,
                      process_start_time(sleeper.pid) - 100))
        assert store.current("n") is None
        assert store.acquire("n", "h2", ttl=5).epoch == lease.epoch + 1
        with sqlite3.connect(store.path) as c:  # the same live process: held
            c.execute("UPDATE leases SET owner_pid = ?, owner_start = ?", (sleeper.pid,
                      process_start_time(sleeper.pid)))
        assert store.current("n") is not None
        with sqlite3.connect(store.path) as c:  # another pid namespace: cannot judge, held until expiry
            c.execute("UPDATE leases SET owner_pid = 999999, owner_start = 1.0, owner_ns = 1")
        assert store.current("n") is not None
    finally:
        sleeper.kill()
        sleeper.wait()


CONTENDER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from hermes_tray_core.stores.lease import LeaseStore
    db, idx, start_at, duration, counter = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), Path(sys.argv[5])
    TARGET = 80
    s = LeaseStore(db)
    out = []
    while time.time() < start_at:
        time.sleep(0.005)
    while time.time() < start_at + duration:
        lease = s.acquire("turn", f"w{idx}", ttl=10, wait=10, poll=0.002)
        if lease is None:
            continue
        t1 = time.time()
        n = int(counter.read_text() or 0)   # unprotected read-modify-write: only safe under the lease
        if n >= TARGET:  # enough grants for the check; a loaded machine just takes longer to get there
            out.append((lease.epoch, t1, time.time(), "stop"))
            assert s.release(lease)
            break
        time.sleep(0.001)
        counter.write_text(str(n + 1))
        t2 = time.time()
        out.append((lease.epoch, t1, t2, "count"))
        assert s.release(lease)
    print(json.dumps(out))
""")


def test_eight_processes_contending_never_hold_at_once(tmp_path):
    db = tmp_path / "leases.sqlite3"
    LeaseStore(db).close()
    counter = tmp_path / "counter"
    counter.write_text("0")
    start_at = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(db), str(i), str(start_at), "20.0",
                               str(counter)], cwd=REPO, stdout=subprocess.PIPE, text=True) for i in range(8)]
    holds = []
    per_proc = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        mine = json.loads(out)
        per_proc.append(len(mine))
        holds.extend(mine)
    holds.sort()
    epochs = [h[0] for h in holds]
    assert epochs == list(range(1, len(holds) + 1))  # every grant unique, strictly increasing, none lost
    for (_, _, end, _), (_, start, _, _) in zip(holds, holds[1:], strict=False):
        assert end <= start  # the next holder started only after the previous one finished
    counted = [h for h in holds if h[3] == "count"]
    assert int(counter.read_text()) == len(counted)  # no lost update: never two holders at once
    assert len(counted) >= 50 and sum(1 for n in per_proc if n) >= 4, per_proc


OPENER = textwrap.dedent("""
    import sys, time
    from hermes_tray_core.stores.lease import LeaseStore
    db, i, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
    while time.time() < start_at:  # spin, not sleep: start within microseconds of each other
        pass
    store = LeaseStore(db)
    print(store.acquire("resume:h:" + i, "p" + i, ttl=30) is not None)
""")


def test_processes_opening_a_new_store_together_all_get_in(tmp_path):
    """The first start after install: tray, helper and resumes open a store nobody has made yet, at once.
    Each must get its lease, not "database is locked" (which the user reads as "could not read its own
    records"). Without the retry of the switch to WAL, about one process in twenty failed, so this test in
    about half its runs."""
    failed = []
    for round_ in range(6):
        db = tmp_path / str(round_) / "leases.sqlite3"
        start_at = time.time() + 1.5
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(db), str(i), str(start_at)], cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(12)]
        for p in procs:
            out, err = p.communicate(timeout=60)
            if p.returncode != 0 or out.strip() != "True":
                failed.append(err.strip().splitlines()[-1:] or out)
    assert failed == []


class GatedStore:
    """A store whose refresh can be held mid-call, to order events deterministically."""

    def __init__(self, real: LeaseStore):
        self.real = real
        self.entered = threading.Event()
        self.proceed = threading.Event()
        self.raise_error = False

    def refresh(self, lease, *, ttl):
        self.entered.set()
        self.proceed.wait(5)
        if self.raise_error:
            raise OSError("disk went away")
        return self.real.refresh(lease, ttl=ttl)


def test_keeper_keeps_a_lease_alive_past_its_ttl(store):
    lease = store.acquire("n", "h", ttl=1.0)
    with LeaseKeeper(store, lease, ttl=1.0) as keeper:
        assert keeper.interval == pytest.approx(0.2)
        time.sleep(2.5)  # well past the TTL: only the keeper's refreshes hold it
        assert store.acquire("n", "rival", ttl=1) is None
        assert store.current("n").epoch == lease.epoch
    assert not keeper._thread.is_alive() and not keeper.lost
    assert store.release(lease)


def test_keeper_reports_loss_once_when_taken_over(store):
    lease = store.acquire("n", "h", ttl=5)
    lost: list[Lease] = []
    keeper = LeaseKeeper(store, lease, ttl=5, interval=0.05, on_lost=lost.append).start()
    import sqlite3

    with sqlite3.connect(store.path) as c:  # someone decided it expired and took it
        c.execute("UPDATE leases SET expires_at = 0")
    rival = store.acquire("n", "rival", ttl=5)
    assert rival is not None
    deadline = time.monotonic() + 2
    while not lost and time.monotonic() < deadline:
        time.sleep(0.01)
    keeper.join(1)
    assert lost == [lease] and keeper.lost and not keeper._thread.is_alive()
    assert store.current("n") == rival


def test_keeper_miss_after_stop_is_not_a_loss(store):
    lease = store.acquire("n", "h", ttl=5)
    gated = GatedStore(store)
    lost: list[Lease] = []
    keeper = LeaseKeeper(gated, lease, ttl=5, interval=0.01, on_lost=lost.append).start()
    assert gated.entered.wait(2)
    keeper.stop()  # the holder finishes its work ...
    assert store.release(lease)  # ... and releases while a refresh is in flight
    gated.proceed.set()
    keeper.join(2)
    assert not keeper._thread.is_alive()
    assert lost == [] and not keeper.lost


def test_keeper_refresh_error_while_active_is_a_loss(store):
    lease = store.acquire("n", "h", ttl=5)
    gated = GatedStore(store)
    gated.raise_error = True
    gated.proceed.set()
    lost: list[Lease] = []
    keeper = LeaseKeeper(gated, lease, ttl=5, interval=0.01, on_lost=lost.append).start()
    keeper.join(2)
    assert lost == [lease] and keeper.lost


def test_corrupt_store_is_set_aside_not_destroyed(tmp_path):
    path = tmp_path / "leases.sqlite3"
    garbage = b"definitely not sqlite " * 500
    path.write_bytes(garbage)
    with LeaseStore(path) as s:
        assert s.acquire("n", "h", ttl=5).epoch > 1  # above the recreated store's floor (never reissued)
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("leases.sqlite3.corrupt-")]
    assert len(kept) == 1 and kept[0].read_bytes() == garbage


def test_a_recreated_store_never_reissues_an_epoch_the_corrupt_one_granted(tmp_path):
    path = tmp_path / "leases.sqlite3"
    with LeaseStore(path) as s:
        for _ in range(3):
            lease = s.acquire("resume:h:s1", "h", ttl=5)
            assert lease is not None and s.release(lease)
        granted = lease.epoch
    assert granted == 3
    before = int(time.time() * 1000)
    path.write_bytes(b"\0garbage where the lease store was\0" * 300)  # e.g. a torn disk write
    with LeaseStore(path) as s:
        first = s.acquire("resume:h:s1", "h", ttl=5)
        assert first is not None and first.epoch > granted and first.epoch > before
        assert s.release(first)
        assert s.acquire("resume:h:s1", "h", ttl=5).epoch == first.epoch + 1  # still strictly +1 after
        other = s.acquire("resume:h:s2", "h", ttl=5)  # a name the lost store may also have granted
        assert other is not None and other.epoch > before
    # Another process opening the recreated store keeps the floor too.
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from hermes_tray_core.stores.lease import LeaseStore; "
         "print(LeaseStore(sys.argv[1]).acquire('resume:h:s3', 'p', ttl=5).epoch)", str(path)],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
    assert int(out.stdout) > before


def test_a_schema_1_store_is_upgraded_in_place_and_keeps_counting(tmp_path):
    import sqlite3

    path = tmp_path / "leases.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL DEFAULT '', epoch INTEGER "
                 "NOT NULL DEFAULT 0, acquired_at REAL, expires_at REAL, owner_pid INTEGER, owner_start REAL, "
                 "owner_ns INTEGER)")
    conn.execute("INSERT INTO leases (name, holder, epoch) VALUES ('n', '', 7)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with LeaseStore(path) as s:
        assert s.acquire("n", "h", ttl=5).epoch == 8
        assert s.acquire("fresh", "h", ttl=5).epoch == 1
