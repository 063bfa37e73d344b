"""The tray's SHA-256 (no OpenSSL) gives exactly hashlib's digests: journal turn ids stay the same."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from hermes_tray_core.digest import sha256_hex


@given(st.binary(max_size=4096))
def test_same_digest_as_hashlib(data: bytes) -> None:
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_an_idle_tray_does_not_load_openssl() -> None:
    """What the tray imports to show its icon, scan and ask once maps no libcrypto (bench_tray's RSS)."""
    code = ("import sys, hermes_tray.app.application, hermes_tray.controller, hermes_tray.engine, "
            "hermes_tray_core.stores.ledger, hermes_tray_core.stores.lease, hermes_tray_core.hermes.config; "
            "print(sorted(m for m in ('_hashlib', '_ssl', 'secrets') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", f"loaded: {run.stdout.strip()}"
