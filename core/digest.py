"""SHA-256 without loading OpenSSL.

``hashlib.sha256`` is OpenSSL's on most builds: its first use maps libcrypto into the process. The tray
only needs short digests of its own identifiers (decision journal turn ids, config lock names), and
CPython's built-in implementation gives the same digests, so an idle tray does without libcrypto.

Measured (tests/bench/bench_tricks.py, one run, 2026-12-03): the idle tray holds 69.7 MB resident
against 73.3 MB with ``hashlib.sha256`` (+3.6 MB, 1.05x; 3 side-by-side runs on the test desktop);
``hermes-tray status`` takes 151.3 against 158.4 ms of CPU cold, 94.0 against 97.7 warm (median of 41
alternated runs).
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
