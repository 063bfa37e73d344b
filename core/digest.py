"""SHA-256 without loading OpenSSL.

``hashlib.sha256`` is OpenSSL's on most builds: its first use maps libcrypto into the process. The tray
only needs digests to recognise things by (decision journal turn ids, config lock names, continuation notes, a host
token's fingerprint), and CPython's built-in implementation gives the same digests, so an idle tray does
without libcrypto.

Measured (tests/bench/bench_tricks.py, one run, 2026-12-03): the idle tray holds 69.7 MB resident
against 73.3 MB with ``hashlib.sha256`` (+3.6 MB, 1.05x; 3 side-by-side runs on the test desktop);
``hermes-tray status`` takes 151.3 against 158.4 ms of CPU cold, 94.0 against 97.7 warm (median of 41
alternated runs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

__all__ = ["note_digest", "sha256_hex"]


class _Digest(Protocol):
    def hexdigest(self) -> str: ...


def _builtin_sha256() -> Callable[[bytes], _Digest]:
    """CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before), else hashlib's."""
    for name in ("_sha2", "_sha256"):  # private modules: imported by name, as typeshed has no stubs for them
        try:
            found: Callable[[bytes], _Digest] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):  # pragma: no cover - depends on the interpreter
            continue
        return found
    from hashlib import sha256  # pragma: no cover - an interpreter without the built-in module

    return sha256  # pragma: no cover


_sha256 = _builtin_sha256()


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data`` (identical to ``hashlib.sha256(data).hexdigest()``)."""
    return _sha256(data).hexdigest()


def note_digest(note: str) -> str:
    """SHA-256 of a continuation note as UTF-8 (``surrogatepass``: a prompt may hold a lone surrogate), as the
    marker and the journal keep it."""
    return sha256_hex(note.encode("utf-8", "surrogatepass"))
