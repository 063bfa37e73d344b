"""hermes-tray: the desktop shell (tray, prompt window, notifier, settings, CLI, helper, demo)."""

from hermes_tray_core import __version__

__all__ = ["__version__"]
