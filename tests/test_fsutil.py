"""hermes_tray_core.stores.fsutil: private, durable, symlink-refusing file primitives, with real files and processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_tray_core.stores import fsutil
from hermes_tray_core.stores.fsutil import UnsafePathError

FORK = mp.get_context("fork")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def leftovers(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if re.fullmatch(r"\..+\.\d+\.[0-9a-f]{8}\.tmp", n))


@pytest.fixture
def loose_umask():
    old = os.umask(0)  # the most permissive umask: modes must still come out private
    yield
    os.umask(old)


def test_atomic_write_is_private_and_leaves_no_temp_file(tmp_path: Path, loose_umask) -> None:
    target = tmp_path / "f.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    fsutil.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert mode(target) == 0o600
    assert leftovers(tmp_path) == []


def test_before_replace_can_abandon_the_write(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    seen: list[bytes] = []

    def hook() -> None:
        (tmp_file,) = leftovers(tmp_path)  # the temp file is complete when the hook runs
        seen.append((tmp_path / tmp_file).read_bytes())
        raise RuntimeError("changed under us")

    with pytest.raises(RuntimeError):
        fsutil.atomic_write_bytes(target, b"new", before_replace=hook)
    assert seen == [b"new"]
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


def test_atomic_write_refuses_a_symlinked_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "f.json"
    link.symlink_to(victim)
    with pytest.raises(UnsafePathError):
        fsutil.atomic_write_bytes(link, b"new")
    assert victim.read_text() == "keep" and link.is_symlink()
    assert leftovers(tmp_path) == []


def test_ensure_private_dir_creates_0700_and_leaves_existing_parents(tmp_path: Path, loose_umask) -> None:
    os.chmod(tmp_path, 0o755)
    target = tmp_path / "a" / "b" / "c"
    assert fsutil.ensure_private_dir(target) == target
    for d in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert mode(d) == 0o700
    assert mode(tmp_path) == 0o755
    fsutil.ensure_private_dir(target)  # idempotent


def test_ensure_private_dir_refuses_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(UnsafePathError):
        fsutil.ensure_private_dir(tmp_path / "link")


def _hold_lock(path: str, held, release) -> None:
    with fsutil.locked(Path(path)):
        held.set()
        release.wait(30)


def test_lock_excludes_another_process_until_it_releases(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    held, release = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold_lock, args=(str(lock), held, release))
    child.start()
    try:
        assert held.wait(20)
        fd = fsutil.open_private_lockfile(lock)
        try:
            assert fsutil.try_lock_fd(fd) is False
            release.set()
            t0 = time.monotonic()
            fsutil.lock_fd(fd)  # blocks until the child lets go, then succeeds
            assert time.monotonic() - t0 < 20
            fsutil.unlock_fd(fd)
        finally:
            os.close(fd)
    finally:
        release.set()
        child.join(20)
    assert mode(lock) == 0o600


def test_lock_of_a_killed_holder_is_released_by_the_kernel(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    held, release = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold_lock, args=(str(lock), held, release))
    child.start()
    assert held.wait(20)
    child.kill()
    child.join()
    with fsutil.locked(lock):
        pass


def test_lock_refuses_a_symlinked_lock_path(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "x.lock").symlink_to(victim)
    with pytest.raises(UnsafePathError), fsutil.locked(tmp_path / "x.lock"):
        pass
    assert victim.read_text() == "keep"


def test_lock_refuses_a_non_regular_file(tmp_path: Path) -> None:
    (tmp_path / "x.lock").mkdir()
    with pytest.raises(OSError), fsutil.locked(tmp_path / "x.lock"):
        pass


def test_file_signature_changes_when_the_file_is_replaced_with_same_size(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert fsutil.file_signature(target) is None
    target.write_bytes(b"aaaa")
    before = fsutil.file_signature(target)
    fsutil.atomic_write_bytes(target, b"bbbb")
    assert fsutil.file_signature(target) != before


def test_set_aside_keeps_the_bytes_privately(tmp_path: Path) -> None:
    target = tmp_path / "interrupted_turns.json"
    target.write_bytes(b"{corrupt")
    os.chmod(target, 0o644)
    dest = fsutil.set_aside(target, "corrupt")
    assert dest is not None and not target.exists()
    assert dest.name.startswith("interrupted_turns.json.corrupt-")
    assert dest.read_bytes() == b"{corrupt" and mode(dest) == 0o600
    assert fsutil.set_aside(target, "corrupt") is None  # nothing there any more


def _tmp_for(target: Path, pid: int, nonce: str = "0badf00d") -> Path:
    p = target.with_name(f".{target.name}.{pid}.{nonce}.tmp")
    p.write_text("partial")
    return p


def test_sweep_removes_only_dead_writers_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        dead = _tmp_for(target, gone.pid)
        live = _tmp_for(target, sleeper.pid)
        mine = _tmp_for(target, os.getpid())
        other_file = _tmp_for(tmp_path / "other.json", gone.pid)  # another target's temp: not ours to judge
        unrelated = tmp_path / "notes.tmp"
        unrelated.write_text("x")
        assert fsutil.sweep_stale_temps(target) == 1
        assert not dead.exists()
        assert live.exists() and mine.exists() and other_file.exists() and unrelated.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sweep_removes_temp_file_of_a_recycled_pid(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        old = _tmp_for(target, sleeper.pid)
        an_hour_ago = time.time() - 3600
        os.utime(old, (an_hour_ago, an_hour_ago))  # written long before the process now holding that pid
        assert fsutil.sweep_stale_temps(target) == 1
        assert not old.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sweep_removes_temp_file_of_a_killed_unreaped_writer(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        litter = _tmp_for(target, child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while fsutil.sweep_stale_temps(target) == 0:  # a zombie cannot be mid-write
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not litter.exists()
    finally:
        child.wait()


def test_atomic_write_is_0600_even_under_a_umask_that_strips_owner_bits(tmp_path: Path) -> None:
    old = os.umask(0o377)
    try:
        fsutil.atomic_write_bytes(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert mode(tmp_path / "f") == 0o600
