"""What the tray may do with each interrupted turn (Hermes' order), and what to ask the user once."""
