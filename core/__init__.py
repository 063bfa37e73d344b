"""hermes-tray's engine: markers, process liveness, leases, journal, policy.

Nothing in this package imports Qt, so a Hermes backend or a headless helper can embed it.
"""

__version__ = "0.1.0"
