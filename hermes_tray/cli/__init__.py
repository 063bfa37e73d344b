"""``hermes-tray`` command line. Qt-free: commands start fast and work over SSH with no display."""

from hermes_tray.cli.main import entry, main

__all__ = ["entry", "main"]
