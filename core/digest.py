"""SHA-256 without loading OpenSSL.

``hashlib.sha256`` is OpenSSL's on most builds: its first use maps libcrypto (about 3 MB resident)
into the process. The tray only needs short digests of its own identifiers (decision journal turn
ids, cache keys), and CPython's built-in implementation gives the same digests, so an idle tray
does without libcrypto (measured with tests/bench/bench_tray.py).
"""

from __future__ import annotations

__all__ = ["sha256_hex"]

try:  # CPython 3.12+
    from _sha2 import sha256 as _sha256
except ImportError:  # pragma: no cover - depends on the interpreter
    try:  # CPython 3.11 and older
        from _sha256 import sha256 as _sha256  # type: ignore[no-redef]
    except ImportError:  # an interpreter without the built-in module
        from hashlib import sha256 as _sha256  # type: ignore[no-redef]


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data`` (identical to ``hashlib.sha256(data).hexdigest()``)."""
    return _sha256(data).hexdigest()
