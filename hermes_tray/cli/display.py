"""Is there a screen for the tray? Asked before Qt is imported: over SSH or from a service with no ``DISPLAY``, Qt
aborted with a misleading ``libxcb-cursor0`` message after the demo's backend had started. Now nothing starts,
and the user reads what ``doctor`` knows.
"""

from __future__ import annotations

import logging
import os
import sys

# platforms that need no screen: an explicit choice (tests, VNC, a headless renderer) is honoured
_HEADLESS_PLATFORMS = ("offscreen", "minimal", "vnc", "eglfs", "linuxfb", "vkkhrdisplay")


def needs_display() -> bool:
    """True on desktops whose Qt would open a display connection (X11/Wayland: Linux, BSD)."""
    if sys.platform in ("win32", "darwin"):
        return False
    platform = os.environ.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    return not platform.startswith(_HEADLESS_PLATFORMS)


def display_missing() -> bool:
    return needs_display() and not (os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY"))


def no_display_report() -> str:
    """What to print instead of starting: the cause, what works here, and doctor's desktop checks."""
    lines = [
        "hermes-tray: no display found (DISPLAY and WAYLAND_DISPLAY are unset, e.g. over SSH or in a "
        "service), so the tray cannot show. Nothing was started.",
        "Without a display:",
        "  hermes-tray helper     watches and resumes in the background (no window; notifications when "
        "a session bus is there)",
        "  hermes-tray status     lists interrupted turns; resume / skip / doctor work too",
        "Or start the tray from your desktop session.",
    ]
    try:
        from hermes_tray.cli.doctor import check_desktop

        _info, problems = check_desktop()
    except Exception:  # boundary: the advice above stands without doctor's details (the log has why)
        logging.getLogger(__name__).exception("doctor could not check the desktop")
        problems = ["doctor could not check the desktop (the log says why)"]
    others = [p for p in problems if not p.startswith("no graphical session")]
    if others:
        lines.append("doctor also found:")
        lines.extend(f"  - {p}" for p in others)
    return "\n".join(lines)


def refuse_without_display() -> int | None:
    """EXIT_REFUSED (after saying why) when there is no screen for the tray, or Qt cannot load its platform
    plugin there (a missing library: ``qt_platform``); None when the tray can show. The tray and the demo ask it
    before anything starts."""
    if not display_missing():
        from hermes_tray.cli.qt_platform import refuse_without_qt_platform

        return refuse_without_qt_platform()
    from hermes_tray.cli.exits import EXIT_REFUSED

    print(no_display_report(), file=sys.stderr)
    return EXIT_REFUSED
