"""Hermes' interrupted-turn marker file, as the tray reads and writes it."""
