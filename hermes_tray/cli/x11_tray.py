"""Is there an XEmbed system tray on this X display? Asked without Qt, for ``doctor``, which otherwise called a
trayer, stalonetray or i3bar desktop "no system tray" while the icon was docked there.

Such a tray owns the selection ``_NET_SYSTEM_TRAY_S<screen>``. Asked through libX11 with ctypes (three calls):
libX11 is on every X11 desktop; python-xlib would be a new dependency for one question.
"""

from __future__ import annotations

import ctypes
import os


def xembed_tray(display: str | None = None) -> str | None:
    """The selection a running XEmbed tray owns on ``display`` (default ``$DISPLAY``), e.g.
    ``"_NET_SYSTEM_TRAY_S0"``; None when none does, or the display or libX11 cannot be reached."""
    display = display if display is not None else os.environ.get("DISPLAY")
    if not display:
        return None
    try:
        x = ctypes.CDLL("libX11.so.6")
    except OSError:
        return None
    x.XOpenDisplay.argtypes, x.XOpenDisplay.restype = [ctypes.c_char_p], ctypes.c_void_p
    x.XDefaultScreen.argtypes, x.XDefaultScreen.restype = [ctypes.c_void_p], ctypes.c_int
    x.XInternAtom.argtypes, x.XInternAtom.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], ctypes.c_ulong
    x.XGetSelectionOwner.argtypes, x.XGetSelectionOwner.restype = [ctypes.c_void_p, ctypes.c_ulong], ctypes.c_ulong
    x.XCloseDisplay.argtypes, x.XCloseDisplay.restype = [ctypes.c_void_p], ctypes.c_int
    dpy = x.XOpenDisplay(display.encode())
    if not dpy:
        return None
    try:
        selection = f"_NET_SYSTEM_TRAY_S{x.XDefaultScreen(dpy)}"
        atom = x.XInternAtom(dpy, selection.encode(), 1)  # only if it exists: no tray ever ran → no atom
        return selection if atom and x.XGetSelectionOwner(dpy, atom) else None
    finally:
        x.XCloseDisplay(dpy)
