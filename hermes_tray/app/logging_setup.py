"""Rotating private log in the user log dir (0700 dir, 0600 files). Identity only, never prompts."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

from hermes_tray_core import ensure_private_dir, log_dir

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    """Every file it opens (including after a rollover) is 0600 and never a symlink (core.stores.logfiles)."""

    def _open(self):  # noqa: ANN202 - stdlib override
        from hermes_tray_core import open_private_append

        # backslashreplace: a path that is not UTF-8 (a home named so) is logged as escapes, never a logging error
        return os.fdopen(open_private_append(self.baseFilename), "a", encoding=self.encoding or "utf-8",
                         errors="backslashreplace")


def setup_logging(name: str = "hermes-tray", *, verbose: bool = False) -> Path | None:
    """Log to ``<log dir>/<name>.log`` (1 MB × 3) and, when verbose or on a terminal, stderr."""
    root = logging.getLogger()
    if getattr(root, "_hermes_tray_configured", False):
        return None
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    path: Path | None = None
    try:
        directory = ensure_private_dir(log_dir())
        path = directory / f"{name}.log"
        handler = _PrivateRotatingHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8")
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
    except OSError as exc:
        print(f"hermes-tray: cannot write the log ({exc}); logging to stderr", file=sys.stderr)
        verbose = True
    if verbose or (sys.stderr is not None and sys.stderr.isatty()):
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(logging.Formatter(_FORMAT))
        err.setLevel(logging.DEBUG if verbose else logging.WARNING)
        root.addHandler(err)
    # desktop-notifier logs whole notifications (prompt excerpts) at DEBUG: never let that through
    logging.getLogger("desktop_notifier").setLevel(logging.INFO)
    root._hermes_tray_configured = True  # type: ignore[attr-defined]
    return path
