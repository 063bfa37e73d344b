"""The tray's own durable files: atomic writes and exchange, leases, the decision journal, settings, logs."""
