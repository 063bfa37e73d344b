"""A directory made read-only for real, the same way for root and for a normal user.

Root ignores file permissions (CI may run the suite as root), so as root the directory is bind-mounted onto
itself and remounted read-only: every write fails with "Read-only file system", for Hermes' processes too, open
files included. A normal user cannot mount, and needs no mount: the write bits of the directory and of
everything under it are taken away (as the mount does, files and subfolders too), which the kernel enforces
for that user and its children. Undone on exit either way.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*argv: str) -> bool:
    return subprocess.run(list(argv), capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a directory) cannot be written while the block runs."""
    path = Path(path)
    if os.name != "posix":
        pytest.skip("read-only directories are made with POSIX mounts or permissions")
    if os.geteuid() == 0:
        if not _run("mount", "--bind", str(path), str(path)):
            pytest.skip("running as root without the right to mount: cannot make a directory read-only")
        try:
            if not _run("mount", "-o", "remount,bind,ro", str(path)):
                pytest.skip("cannot remount a bind mount read-only here")
            yield
        finally:
            _run("umount", "-l", str(path))
        return
    modes = {p: p.stat().st_mode & 0o7777 for p in [path, *path.rglob("*")] if not p.is_symlink()}
    for p, mode in modes.items():
        p.chmod(mode & ~0o222)
    try:
        yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def is_read_only(path: Path) -> bool:
    """What the kernel says for this process (the check the product makes too, independently of it: a write)."""
    probe = Path(path) / ".write-probe"
    try:
        probe.write_bytes(b"")
    except OSError:
        return True
    probe.unlink()
    return False
