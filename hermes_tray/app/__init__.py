"""The Qt application: tray icon, menu, prompt window, settings, history and start-up."""
