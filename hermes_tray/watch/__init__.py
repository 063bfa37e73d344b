"""Background detection: file-system and process-exit watching, off the GUI thread."""

