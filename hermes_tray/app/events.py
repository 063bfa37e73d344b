"""Machine-readable progress lines for tests and benchmarks (``HERMES_TRAY_EVENTS=-`` → stdout).

Identity and counts only, never prompt text. Off unless the variable is set.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_target = os.environ.get("HERMES_TRAY_EVENTS", "")


def enabled() -> bool:
    return bool(_target)


def emit(event: str, **fields: Any) -> None:
    if not _target:
        return
    line = json.dumps({"event": event, "t": time.time(), **fields}, default=str)
    if _target == "-":
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    else:
        fd = os.open(_target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def emit_scan(report: Any, **extra: Any) -> None:
    """The ``scan`` event, one shape for the tray and the helper: why it ran, when it woke, each
    session's verdict; ``extra`` adds the caller's own counts."""
    if not _target:
        return
    emit(
        "scan",
        reason=report.reason,
        woke=report.started,
        verdicts={str(getattr(r, "session_key", "")): getattr(r, "verdict", "") for r in report.records},
        **extra,
    )
