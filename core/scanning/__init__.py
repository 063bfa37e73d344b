"""Scanning the homes: every marker and WebUI turn, judged, with what each home holds."""
