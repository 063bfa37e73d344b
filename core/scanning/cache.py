"""The scan cache: what a scan parsed of the WebUI journals and config.yaml files, kept between scans (and
processes, with a file), keyed by file signature; summaries only, never prompt text. A cache file that is
damaged, of another version or unwritable is rebuilt: never a reason for a scan to fail.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_tray_core.deciding.policy import AutoContinueConfig
from hermes_tray_core.errors import DEBUG, bookkeeping
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.scanning.webui import valid_summary

logger = get_logger(__name__)

__all__ = ["CACHE_VERSION", "MISS", "ScanCache", "default_cache_file"]

CACHE_VERSION = 3
MISS = object()  # no usable entry: read the file


def default_cache_file() -> Path:
    from hermes_tray_core.stores import paths

    return paths.cache_dir() / "scan-cache.json"


class ScanCache:
    """The cache, persisted at ``path`` (None: this process only). Not thread-safe: one per scanner."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        # Both hold what the cache file held (JSON): each use checks its shape.
        self._journals: dict[str, list[Any]] = {}  # "<journal dir>/<sid>" -> [signature] or [signature, summary]
        self._configs: dict[str, list[Any]] = {}  # config.yaml path -> [sig, [enabled, fresh, attempts], problems]
        self._dirty = False
        if path is not None:
            try:
                with open(path, "rb") as fh:
                    doc = json.loads(fh.read())
                if isinstance(doc, dict) and doc.get("version") == CACHE_VERSION:
                    j, c = doc.get("journals"), doc.get("configs")
                    self._journals = j if isinstance(j, dict) else {}
                    self._configs = c if isinstance(c, dict) else {}
            except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deep: start afresh
                self._journals, self._configs = {}, {}

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        # a cache is an optimisation: it never fails a scan
        with bookkeeping(logger, "could not save the scan cache %s", self.path, level=DEBUG):
            from hermes_tray_core.stores.fsutil import atomic_write_bytes, ensure_private_dir

            ensure_private_dir(self.path.parent)
            doc = {"version": CACHE_VERSION, "journals": self._journals, "configs": self._configs}
            # no fsync (most of a cold `status`'s write): a cache lost to a power cut is rebuilt
            atomic_write_bytes(self.path, json.dumps(doc, separators=(",", ":")).encode(), durable=False)
            self._dirty = False

    def config(self, key: str, sig: Sequence[object]) -> tuple[AutoContinueConfig, list[str]] | None:
        """A config.yaml's effective settings and problems, if cached under this signature."""
        cached = self._configs.get(key)
        if isinstance(cached, list) and len(cached) == 3 and cached[0] == sig:
            try:
                e, f, a, m = cached[1]
                if type(e) is bool and type(a) is int and isinstance(f, (int, float)) and math.isfinite(f):
                    return AutoContinueConfig(e, f, a, tuple(str(k) for k in m)), [str(p) for p in cached[2]]
            except (TypeError, ValueError):
                pass  # a damaged cache entry: read the file
        return None

    def put_config(self, key: str, sig: Sequence[object], ac: AutoContinueConfig, problems: list[str]) -> None:
        self._configs[key] = [sig, [ac.enabled, ac.freshness_minutes, ac.max_attempts, list(ac.managed)], problems]
        self._dirty = True

    def summary(self, ckey: str, sig: str) -> Any:
        """A WebUI journal's summary (None: nothing pending or malformed), or :data:`MISS`."""
        cached = self._journals.get(ckey)
        if type(cached) is list and cached and cached[0] == sig:
            summary = cached[1] if len(cached) > 1 else None
            if summary is None or valid_summary(summary):
                return summary
        return MISS  # not cached, changed, or a damaged entry (never trusted: read the file)

    def put_summary(self, ckey: str, sig: str, summary: dict[str, Any]) -> dict[str, Any] | None:
        """Keep ``summary`` (only [sig] when nothing is pending or malformed); what it gives back."""
        keep = None if not summary["pending"] and not summary["malformed"] else summary
        self._journals[ckey] = [sig] if keep is None else [sig, keep]
        self._dirty = True
        return keep

    def forget_journals(self, live: set[str], dirs: set[str]) -> None:
        """Drop the journals under ``dirs`` (the homes scanned now) that are not in ``live``."""
        for key in [k for k in self._journals if k not in live and k.rsplit(os.sep, 1)[0] in dirs]:
            del self._journals[key]
            self._dirty = True
