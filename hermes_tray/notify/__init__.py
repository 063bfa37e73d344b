"""Desktop notifications behind a small interface: desktop-notifier where a server exists, the log elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_tray.notify.note import Action, Note

if TYPE_CHECKING:  # the notifiers are Qt objects: loaded with the notifier, not with the package
    from hermes_tray.notify.base import Notifier

__all__ = ["Action", "Note", "make_notifier"]


def make_notifier(app_name: str = "Hermes Tray", *, allow_desktop: bool = True, lazy: bool = True) -> Notifier:
    """The best notifier this session offers, created when first needed; never raises."""
    if lazy:
        from hermes_tray.notify.lazy import LazyNotifier

        return LazyNotifier(lambda: make_notifier(app_name, allow_desktop=allow_desktop, lazy=False))
    from hermes_tray.notify.log import LogNotifier

    if allow_desktop:
        try:
            from hermes_tray.notify.desktop import DesktopNotifierBackend, desktop_available

            if desktop_available():
                return DesktopNotifierBackend(app_name)
        except Exception:  # boundary: an import or bus problem must never stop the tray
            import logging

            logging.getLogger(__name__).warning("desktop notifications unavailable", exc_info=True)
    return LogNotifier()
