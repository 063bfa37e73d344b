from hermes_tray.cli import entry

entry()
