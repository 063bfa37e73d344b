"""The continuation note, byte for byte as Hermes submits it: an older Hermes (0.19.0) resumes without
continuing, so the tray submits it itself, and the model sees one wording whichever side continued the turn.
"""

from __future__ import annotations

NOTE_PREFIX = (
    "[System note: Your previous turn was interrupted mid-run — the app or its backend process "
    "stopped before the turn could finish. Some of the work may already be complete; check the "
    "current state before redoing anything, then finish the task. The interrupted request was:]"
)

# What a backend-side continuation announces before its first message.start.
RESUMING_STATUS_TEXT = "Resuming interrupted turn…"


def continuation_note(original_prompt: str) -> str:
    """The note + the ORIGINAL prompt (markers always keep the original)."""
    return NOTE_PREFIX + "\n\n" + original_prompt


def is_continuation_note(text: str) -> bool:
    """``text`` is a continuation note (a note is never nested in a note)."""
    return isinstance(text, str) and text.startswith(NOTE_PREFIX)


__all__ = ["NOTE_PREFIX", "RESUMING_STATUS_TEXT", "continuation_note", "is_continuation_note"]
