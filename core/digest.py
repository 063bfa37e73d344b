"""SHA-256 without loading OpenSSL.

``hashlib.sha256`` is OpenSSL's on most builds, and its first use maps libcrypto into the process; CPython's
built-in implementation gives the same digests, so an idle tray does without it (docs/performance.md).
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
    """SHA-256 of a continuation note (``surrogatepass``: a prompt may hold a lone surrogate)."""
    return sha256_hex(note.encode("utf-8", "surrogatepass"))
