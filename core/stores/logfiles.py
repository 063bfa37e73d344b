"""The tray's own log files: private (0600), appended to, never through a symlink (``O_NOFOLLOW``; an existing
file narrowed to 0600 by its fd). The gateway's per-continuation logs are pruned to the newest
:data:`KEEP_GATEWAY_LOGS`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from pathlib import Path

from hermes_tray_core.stores.fsutil import FILE_MODE, NONBLOCK, UnsafePathError, open_regular

logger = logging.getLogger(__name__)

KEEP_GATEWAY_LOGS = 20
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def open_private_append(path: Path | str) -> int:
    """Open ``path`` for appending, 0600; :class:`UnsafePathError` for a link or a non-regular file."""
    name = os.fspath(path)
    try:
        fd = open_regular(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NONBLOCK, "log path is not a regular file")
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader (NONBLOCK: it fails at once instead of hanging)
            raise UnsafePathError(errno.ENXIO, "log path is not a regular file", name) from None
        raise
    try:
        if os.name != "nt":
            os.fchmod(fd, FILE_MODE)  # an existing file narrowed by its fd
            if NONBLOCK:
                os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def safe_file_part(text: str) -> str:
    """``text`` as part of a file name anywhere (a session key may hold ``:``, which Windows forbids)."""
    return _UNSAFE_CHARS.sub("_", text)


def prune_logs(directory: Path | str, *, keep: int = KEEP_GATEWAY_LOGS, suffix: str = ".log") -> int:
    """Delete all but the newest ``keep`` ``*<suffix>`` files in ``directory``; how many. Never raises."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    logs: list[tuple[float, str, str]] = []
    for e in entries:
        try:
            if e.name.endswith(suffix) and e.is_file(follow_symlinks=False):
                logs.append((e.stat(follow_symlinks=False).st_mtime, e.name, e.path))
        except OSError:
            continue
    logs.sort(reverse=True)
    removed = 0
    for _mtime, _name, path in logs[max(0, keep):]:
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    return removed


__all__ = ["KEEP_GATEWAY_LOGS", "open_private_append", "prune_logs", "safe_file_part"]
