"""One way for tests to step into a verified exchange (``hermes_tray_core.stores.exchange``) between its
syscalls: around each real exchange call, ``before(n)`` and ``after(n)`` run (n = 0 for ours going in,
k for put-back round k). ``before`` may return an OSError: that exchange then fails as the syscall would
(it does not run); anything it raises is an outside exception landing right before the syscall."""

from __future__ import annotations

from collections.abc import Callable

from hermes_tray_core.stores import exchange as atomic_exchange


def hooked_parts(before: Callable[[int], OSError | None] | None = None,
                 after: Callable[[int], None] | None = None, calls: list[int] | None = None):
    """A replacement for ``atomic_exchange._verified_parts`` (monkeypatch it in)."""
    real = atomic_exchange._verified_parts
    made = calls if calls is not None else []

    def parts():
        exchange, signature, next_path = real()

        def hooked(path: str, target: str) -> OSError | None:
            n = len(made)
            made.append(n)
            if before is not None:
                failed = before(n)
                if isinstance(failed, OSError):
                    return failed
            out = exchange(path, target)
            if after is not None:
                after(n)
            return out

        return hooked, signature, next_path

    return parts
