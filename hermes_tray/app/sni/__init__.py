"""The tray's own StatusNotifierItem on Linux (``item``), its menu over dbusmenu (``dbusmenu``), and
the jeepney connection both share (``bus``): Qt's D-Bus tray cannot say ``NeedsAttention``."""
