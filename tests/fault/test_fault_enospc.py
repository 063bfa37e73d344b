"""Resource limits: a full disk. Writes fail cleanly, nothing half-written replaces a good file,
and the user is told.

The home sits on a real, tiny ``tmpfs`` (mounted by the test when it runs as root; CI does),
filled to the last page — real ENOSPC from the kernel, for data writes, temp files, fsync and
SQLite. Without root, the same checks run against a simulated ENOSPC (``os.write`` raising),
except the SQLite ones.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_tray_core.turn import Turn

GOOD_KEY = "20261129_120000_good"


def _try_mount(path: Path, size: str = "1m") -> bool:
    if os.name != "posix" or os.geteuid() != 0 or os.environ.get("HERMES_TRAY_FAULT_SIMULATE_ENOSPC") == "1":
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


def _fill(mount: Path) -> None:
    """Fill the filesystem to ENOSPC, page by page."""
    fd = os.open(mount / "zz-filler", os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 4096
    with contextlib.suppress(OSError):
        while True:
            os.write(fd, chunk)
    os.close(fd)
    for i in range(10_000):  # and tiny files into any slack, till even a one-byte file fails
        try:
            fd = os.open(mount / f"zz-f{i}", os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            break
        try:
            os.write(fd, b"x")
        except OSError:
            break
        finally:
            os.close(fd)


class Disk:
    def __init__(self, root: Path, real: bool):
        self.root, self.real = root, real
        self._patch = None

    @contextlib.contextmanager
    def full(self):
        if self.real:
            _fill(self.root)
            try:
                yield
            finally:
                for p in self.root.glob("zz-*"):
                    p.unlink()
        else:  # simulated: every write to a regular file fails with ENOSPC
            real_write = os.write

            def write(fd, data):
                if fd > 2 and os.path.isfile(f"/proc/self/fd/{fd}"):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real_write(fd, data)

            os.write = write
            try:
                yield
            finally:
                os.write = real_write


@pytest.fixture
def disk(tmp_path, monkeypatch):
    mnt = tmp_path / "small-fs"
    real = _try_mount(mnt)
    if not real:
        mnt.mkdir(exist_ok=True)
    for var in ("STATE", "CONFIG", "CACHE", "LOG", "RUNTIME"):
        monkeypatch.setenv(f"HERMES_TRAY_{var}_DIR", str(tmp_path / "tray" / var.lower()))
    try:
        yield Disk(mnt, real)
    finally:
        if real:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _home(disk: Disk) -> tuple[Path, bytes]:
    from hermes_tray_core.markers import store as markers

    home = disk.root / "home"
    home.mkdir()
    markers.MarkerStore(home).record(GOOD_KEY, "the good marker " + "x" * 20_000)
    markers.MarkerStore(home).record("20261129_120000_other", "another")
    return home, (home / "desktop" / "interrupted_turns.json").read_bytes()


def _no_litter(d: Path) -> None:
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")], os.listdir(d)


def test_marker_writes_fail_cleanly(disk):
    from hermes_tray_core.markers import store as markers
    from hermes_tray_core.markers import turn_marker

    home, good = _home(disk)
    path = home / "desktop" / "interrupted_turns.json"
    entry = markers.list_turn_markers(home)["20261129_120000_other"]
    with disk.full():
        with pytest.raises(OSError) as exc:
            markers.MarkerStore(home).record("20261129_120000_new", "p" * 5000)
        assert exc.value.errno == errno.ENOSPC and str(path) in str(exc.value), exc.value
        with pytest.raises(OSError):
            markers.remove_marker_if_unchanged(home, "20261129_120000_other", entry)
        turn_marker.record_turn_start(home, "20261129_120000_new", "p" * 5000)  # Hermes call: silent
        turn_marker.clear_turn_marker(home, GOOD_KEY)
        assert path.read_bytes() == good, "a failed write replaced the good file"
        _no_litter(path.parent)
        assert set(markers.list_turn_markers(home)) == {GOOD_KEY, "20261129_120000_other"}
    # Space is back: the next write works and nothing is lost.
    markers.MarkerStore(home).record("20261129_120000_new", "p")
    assert set(markers.list_turn_markers(home)) == {GOOD_KEY, "20261129_120000_other", "20261129_120000_new"}


def test_ledger_writes_fail_cleanly_and_lose_nothing(disk):
    if not disk.real:
        pytest.skip("SQLite's ENOSPC needs a real full filesystem (root + tmpfs)")
    from hermes_tray_core.stores.ledger import Ledger
    from hermes_tray_core.turn import TurnId

    book = Ledger(disk.root / "ledger.sqlite3")
    for i in range(3):
        book.record("notified", TurnId(str(disk.root), f"s{i}", 1.0, 0))
    with disk.full():
        try:
            for i in range(3, 400):  # until the pages SQLite already has run out
                book.record("notified", TurnId(str(disk.root), f"s{i}", 1.0, 0), reason="b" * 400)
        except Exception:  # noqa: BLE001 - any clean error is acceptable here
            pass
    book.record("notified", TurnId(str(disk.root), "after", 1.0, 0))
    kept = [e["session_key"] for e in reversed(book.history(1000))]
    assert kept[:3] == ["s0", "s1", "s2"] and kept[-1] == "after", "a decision was lost"
    import sqlite3

    con = sqlite3.connect(book.path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_config_writes_fail_cleanly(disk):
    from hermes_tray_core.hermes import config_edit as backend_config
    from hermes_tray_core.stores import settings

    home = disk.root / "home"
    home.mkdir()
    original = "# mine\ndesktop:\n  auto_continue:\n    enabled: true\n" + "# pad\n" * 2000
    (home / "config.yaml").write_text(original)
    toml = disk.root / "cfg" / "config.toml"
    settings.update_settings({"mode": "ask"}, toml)
    toml_before = toml.read_bytes()
    with disk.full():
        with pytest.raises((backend_config.BackendConfigError, OSError)) as exc:
            backend_config.write_auto_continue(home, enabled=False)
        assert str(exc.value)
        with pytest.raises((settings.SettingsError, OSError)):
            settings.update_settings({"mode": "off", "homes": ["/x" * 3000]}, toml)
    assert (home / "config.yaml").read_text() == original
    assert toml.read_bytes() == toml_before
    _no_litter(home)
    _no_litter(toml.parent)


def test_lease_store_on_a_full_disk_refuses(disk):
    if not disk.real:
        pytest.skip("SQLite's ENOSPC needs a real full filesystem (root + tmpfs)")
    from hermes_tray_core.stores.lease import LeaseStore

    db = disk.root / "leases.sqlite3"
    store = LeaseStore(db)
    lease = store.acquire("resume:/h:a", "t1", ttl=60)
    assert lease is not None and store.release(lease)
    with disk.full():
        # Either it still fits in the pages SQLite already has, or it fails with an error — never a
        # corrupt database, never two holders.
        store2 = LeaseStore(db)
        try:
            got = [store2.acquire(f"resume:/h:{i}", "t2", ttl=60) for i in range(200)]
        except Exception as exc:  # noqa: BLE001 - any clean error is acceptable here
            got = [exc]
    import sqlite3

    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    again = LeaseStore(db).acquire("resume:/h:a", "t3", ttl=60)
    assert again is not None and again.epoch > lease.epoch
    assert got  # ran


def test_cli_skip_on_a_full_disk_tells_the_user(disk, tmp_path):
    home, good = _home(disk)
    env = {**os.environ}
    with disk.full():
        if not disk.real:
            pytest.skip("the CLI runs in a subprocess: needs the real full filesystem")
        r = subprocess.run([sys.executable, "-m", "hermes_tray", "skip", "20261129_120000_other",
                            "--home", str(home), "--force"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    msg = (r.stdout + r.stderr).lower()
    assert "no space" in msg or "disk" in msg or "enospc" in msg, r.stdout + r.stderr
    assert "traceback" not in msg, r.stderr
    assert (home / "desktop" / "interrupted_turns.json").read_bytes() == good


def test_resume_claim_on_a_full_state_disk_refuses_cleanly(disk, monkeypatch):
    """The tray's own state dir (its ledger and claims) on a full disk: resume refuses, says why."""
    if not disk.real:
        pytest.skip("needs the real full filesystem")
    from hermes_tray_core.continuing.resume import resume_turn

    home, _good = _home(disk)
    state = disk.root / "tray-state"
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(state))
    entry = json.loads((home / "desktop" / "interrupted_turns.json").read_text())[GOOD_KEY]
    with disk.full():
        res = resume_turn(Turn.of(home, GOOD_KEY, entry))
    assert not res.ok and res.exit_code in (1, 3)
    assert res.message
    assert hashlib.sha256((home / "desktop" / "interrupted_turns.json").read_bytes()).hexdigest() == \
        hashlib.sha256(_good).hexdigest()
