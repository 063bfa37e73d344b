"""hermes-tray's engine: markers, process liveness, leases, journal, policy.

Nothing in this package imports Qt, so a Hermes backend or a headless helper can embed it.

Its face — what a caller needs to find, scan, judge, resume and skip interrupted turns — is importable
from the package itself (``from hermes_tray_core import Scanner, resume_turn``). Each name is loaded on
first use (PEP 562), so importing the package costs nothing: ``hermes-tray status`` pays only for the
modules it uses. Everything else lives in the module named for its job.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: name -> the module that owns it
_FACE = {
    "discover_homes": "hermes.homes", "Home": "hermes.homes",
    "Scanner": "scanning.scanner", "scan": "scanning.scanner", "TurnRecord": "deciding.records", "HomeReport": "deciding.records",
    "ScanResult": "deciding.records",
    "decide": "deciding.policy", "decide_webui": "deciding.policy", "AutoContinueConfig": "hermes.config", "Decision": "deciding.policy",
    "age_text": "deciding.policy",
    "resume_turn": "continuing.resume", "ResumeResult": "continuing.resume", "skip_turn": "continuing.skip", "SkipResult": "continuing.skip",
    "MarkerStore": "markers.store", "record_turn_start": "markers.turn_marker", "clear_turn_marker": "markers.turn_marker",
    "read_turn_marker": "markers.turn_marker", "marker_writer_state": "markers.entries", "list_turn_markers": "markers.store",
    "DecisionJournal": "stores.decisions",
    "Verdict": "vocab", "WriterState": "vocab", "ReasonCode": "vocab", "Outcome": "vocab", "Mode": "vocab", "TurnSource": "vocab",
}

__all__ = ["__version__", *_FACE]


def __getattr__(name: str) -> object:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
