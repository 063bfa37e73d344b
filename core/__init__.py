"""hermes-tray's engine: markers, process liveness, leases, journal, policy. Nothing in it imports Qt.

Its face is importable from the package itself (``from hermes_tray_core import Scanner, resume_turn``); the
shell imports the engine through it alone (an import-linter contract). Each name is loaded on first use (PEP
562), so ``hermes-tray status`` pays only for the modules it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: name -> the module that owns it ("module:attribute" where the face names it differently: an
#: attribute whose own name says too little outside its module, like ``hermes.reach``'s ``look``)
_FACE = {
    # finding homes, scanning, judging
    "discover_homes": "hermes.homes", "Home": "hermes.homes",
    "look_at_homes": "hermes.reach:look", "HomeAccess": "hermes.reach:Access",
    "is_hermes_home": "hermes.paths",
    "Scanner": "scanning.scanner", "scan": "scanning.scanner", "default_cache_file": "scanning.cache",
    "TurnRecord": "deciding.records", "HomeReport": "deciding.records", "ScanResult": "deciding.records",
    "decide": "deciding.policy", "decide_webui": "deciding.policy", "Decision": "deciding.policy",
    "Seen": "deciding.policy",
    "age_text": "deciding.policy", "restate_age": "deciding.policy",
    "judge": "deciding.policy", "Facts": "deciding.policy",
    "AskOnce": "deciding.ask_once", "record_notified": "deciding.ask_once", "snoozed_until": "deciding.ask_once",
    "turn_key": "deciding.ask_once", "waiting": "deciding.ask_once",
    # what a turn did and why it stopped; remind me later
    "TurnProgress": "hermes.progress", "ProgressStep": "hermes.progress", "cause_words": "deciding.causes", "ExitWitness": "deciding.witness",
    "remind_at": "deciding.snooze", "snooze_turn": "deciding.snooze",
    # resuming and skipping
    "resume_turn": "continuing.resume", "ResumeResult": "continuing.resume",
    "skip_turn": "continuing.skip", "SkipResult": "continuing.skip", "write_problem": "continuing.writable",
    "Progress": "continuing.gateway", "GatewayOptions": "continuing.gateway",
    "Listener": "continuing.listener", "Callbacks": "continuing.listener",
    "StopRequest": "continuing.results", "settle_orphaned_runs": "continuing.orphans",
    "find_hermes": "backend.install", "HermesSettingsError": "backend.install",
    "probe_capabilities": "backend.capabilities", "HermesNotFound": "backend.rpc",
    # markers
    "MarkerStore": "markers.store", "MarkerStoreError": "markers.store", "list_turn_markers": "markers.store",
    "record_turn_start": "markers.turn_marker", "clear_turn_marker": "markers.turn_marker",
    "read_turn_marker": "markers.turn_marker", "exchange_support": "markers.turn_marker",
    "marker_writer_state": "markers.entries", "normalize_marker": "markers.entries", "wait_for_marker_settle": "markers.settle:wait",
    # Hermes' own files and processes
    "AutoContinueConfig": "hermes.config", "read_backend_config": "hermes.config",
    "BackendConfigError": "hermes.config_edit", "write_auto_continue": "hermes.config_edit",
    "parse_config_value": "hermes.config_edit:parse_value",
    "HomeState": "hermes.state_db_batch", "parse_holder": "hermes.state_db",
    "HermesProcesses": "hermes.processes",
    "RESUMING_STATUS_TEXT": "hermes.note", "continuation_note": "hermes.note",
    "is_continuation_note": "hermes.note",
    "find_live_backend": "backend.running", "who_serves": "backend.running", "settings_hermes_command": "backend.install",
    # the tray's own stores
    "Ledger": "stores.ledger", "ledger": "stores.ledger", "TurnStatus": "stores.ledger",
    "TraySettings": "stores.settings", "SettingsError": "stores.settings", "load_settings": "stores.settings",
    "save_settings": "stores.settings", "update_settings": "stores.settings",
    "with_changes": "stores.settings",
    "validate_settings": "stores.settings:validate", "parse_setting_value": "stores.settings:parse_value",
    "SETTING_KEYS": "stores.settings:KEYS", "MIN_IDLE_TIMEOUT": "stores.settings",
    "MAX_IDLE_TIMEOUT": "stores.settings",
    "settings_file": "stores.paths", "state_dir": "stores.paths", "cache_dir": "stores.paths",
    "log_dir": "stores.paths", "runtime_dir": "stores.paths", "ledger_db": "stores.paths",
    "ensure_private_dir": "stores.fsutil", "atomic_write_bytes": "stores.fsutil", "os_error_text": "stores.fsutil",
    "open_private_lockfile": "stores.fsutil", "try_lock_fd": "stores.fsutil", "unlock_fd": "stores.fsutil",
    "open_private_append": "stores.logfiles",
    # processes
    "process_liveness": "process.identity", "own_identity": "process.identity",
    "own_pidns": "process.identity",
    "child_environment": "process.child_env",
    # the shared vocabulary
    "Verdict": "vocab", "WriterState": "vocab", "ReasonCode": "vocab", "Outcome": "vocab", "Mode": "vocab",
    "TurnSource": "vocab", "Refusal": "vocab", "SkipOutcome": "vocab", "RanIn": "vocab", "StopCause": "vocab",
    "StepKind": "vocab", "StopReason": "vocab", "Event": "vocab", "Moment": "vocab",
    "InvalidIdError": "keys", "validate_session_id": "keys", "strict_finite": "numbers",
    "TrayError": "errors",
    "json_int": "numbers", "json_number": "numbers",
    # one turn, typed where it enters
    "Turn": "turn", "TurnId": "turn", "TurnKey": "turn", "Marker": "turn", "HomePath": "keys", "home_path": "keys",
}

#: the face, for ``import *`` and for type checkers (re-exported names); the same names as ``_FACE``
__all__ = [
    "__version__", "discover_homes", "Home", "look_at_homes", "HomeAccess", "is_hermes_home",
    "Scanner", "scan", "default_cache_file", "TurnRecord",
    "HomeReport", "ScanResult", "decide", "decide_webui", "Decision", "Seen", "age_text", "restate_age", "judge",
    "Facts", "AskOnce", "record_notified", "snoozed_until", "turn_key", "waiting", "TurnProgress", "ProgressStep", "cause_words", "ExitWitness", "remind_at",
    "snooze_turn", "resume_turn", "ResumeResult", "skip_turn", "SkipResult", "write_problem",
    "Progress", "GatewayOptions", "Listener", "Callbacks", "StopRequest", "settle_orphaned_runs", "find_hermes",
    "probe_capabilities", "HermesNotFound",
    "HermesSettingsError", "MarkerStore", "MarkerStoreError", "record_turn_start", "clear_turn_marker",
    "read_turn_marker", "marker_writer_state", "list_turn_markers", "normalize_marker", "exchange_support",
    "wait_for_marker_settle", "AutoContinueConfig", "BackendConfigError", "read_backend_config",
    "write_auto_continue", "parse_config_value", "HomeState", "parse_holder", "HermesProcesses",
    "RESUMING_STATUS_TEXT", "continuation_note", "is_continuation_note", "find_live_backend", "who_serves",
    "settings_hermes_command", "Ledger", "ledger", "TurnStatus", "TraySettings", "SettingsError",
    "load_settings", "save_settings", "update_settings", "with_changes", "validate_settings",
    "parse_setting_value", "SETTING_KEYS", "MIN_IDLE_TIMEOUT", "MAX_IDLE_TIMEOUT", "settings_file",
    "state_dir", "cache_dir", "log_dir", "runtime_dir", "ledger_db",
    "ensure_private_dir", "atomic_write_bytes", "os_error_text", "open_private_lockfile", "try_lock_fd", "unlock_fd",
    "open_private_append", "process_liveness", "own_identity", "own_pidns", "child_environment", "Verdict",
    "WriterState", "ReasonCode", "Outcome", "Mode", "TurnSource", "Refusal", "SkipOutcome", "RanIn",
    "StopCause", "StepKind", "StopReason", "Event", "Moment", "InvalidIdError", "validate_session_id", "strict_finite",
    "TrayError",
    "json_int", "json_number",
    "Turn", "TurnId", "TurnKey", "Marker", "HomePath", "home_path",
]

if TYPE_CHECKING:  # the same names, typed (tests/test_engine_face.py keeps the three lists in step)
    from hermes_tray_core.backend.capabilities import probe_capabilities
    from hermes_tray_core.backend.install import HermesSettingsError, find_hermes, settings_hermes_command
    from hermes_tray_core.backend.rpc import HermesNotFound
    from hermes_tray_core.backend.running import find_live_backend, who_serves
    from hermes_tray_core.continuing.gateway import GatewayOptions, Progress
    from hermes_tray_core.continuing.listener import Callbacks, Listener
    from hermes_tray_core.continuing.orphans import settle_orphaned_runs
    from hermes_tray_core.continuing.results import StopRequest
    from hermes_tray_core.continuing.resume import ResumeResult, resume_turn
    from hermes_tray_core.continuing.skip import SkipResult, skip_turn
    from hermes_tray_core.continuing.writable import write_problem
    from hermes_tray_core.deciding.ask_once import AskOnce, record_notified, snoozed_until, turn_key, waiting
    from hermes_tray_core.deciding.causes import cause_words
    from hermes_tray_core.deciding.policy import (
        Decision,
        Facts,
        Seen,
        age_text,
        decide,
        decide_webui,
        judge,
        restate_age,
    )
    from hermes_tray_core.deciding.records import HomeReport, ScanResult, TurnRecord
    from hermes_tray_core.deciding.snooze import remind_at, snooze_turn
    from hermes_tray_core.deciding.witness import ExitWitness
    from hermes_tray_core.errors import TrayError
    from hermes_tray_core.hermes.config import AutoContinueConfig, read_backend_config
    from hermes_tray_core.hermes.config_edit import BackendConfigError, write_auto_continue
    from hermes_tray_core.hermes.config_edit import parse_value as parse_config_value
    from hermes_tray_core.hermes.homes import Home, discover_homes
    from hermes_tray_core.hermes.note import RESUMING_STATUS_TEXT, continuation_note, is_continuation_note
    from hermes_tray_core.hermes.paths import is_hermes_home
    from hermes_tray_core.hermes.processes import HermesProcesses
    from hermes_tray_core.hermes.progress import ProgressStep, TurnProgress
    from hermes_tray_core.hermes.reach import Access as HomeAccess
    from hermes_tray_core.hermes.reach import look as look_at_homes
    from hermes_tray_core.hermes.state_db import parse_holder
    from hermes_tray_core.hermes.state_db_batch import HomeState
    from hermes_tray_core.keys import HomePath, InvalidIdError, home_path, validate_session_id
    from hermes_tray_core.markers.entries import marker_writer_state, normalize_marker
    from hermes_tray_core.markers.settle import wait as wait_for_marker_settle
    from hermes_tray_core.markers.store import MarkerStore, MarkerStoreError, list_turn_markers
    from hermes_tray_core.markers.turn_marker import (
        clear_turn_marker,
        exchange_support,
        read_turn_marker,
        record_turn_start,
    )
    from hermes_tray_core.numbers import json_int, json_number, strict_finite
    from hermes_tray_core.process.child_env import child_environment
    from hermes_tray_core.process.identity import own_identity, own_pidns, process_liveness
    from hermes_tray_core.scanning.cache import default_cache_file
    from hermes_tray_core.scanning.scanner import Scanner, scan
    from hermes_tray_core.stores.fsutil import (
        atomic_write_bytes,
        ensure_private_dir,
        open_private_lockfile,
        os_error_text,
        try_lock_fd,
        unlock_fd,
    )
    from hermes_tray_core.stores.ledger import Ledger, TurnStatus, ledger
    from hermes_tray_core.stores.logfiles import open_private_append
    from hermes_tray_core.stores.paths import (
        cache_dir,
        ledger_db,
        log_dir,
        runtime_dir,
        settings_file,
        state_dir,
    )
    from hermes_tray_core.stores.settings import KEYS as SETTING_KEYS
    from hermes_tray_core.stores.settings import (
        MAX_IDLE_TIMEOUT,
        MIN_IDLE_TIMEOUT,
        SettingsError,
        TraySettings,
        load_settings,
        save_settings,
        update_settings,
        with_changes,
    )
    from hermes_tray_core.stores.settings import parse_value as parse_setting_value
    from hermes_tray_core.stores.settings import validate as validate_settings
    from hermes_tray_core.turn import Marker, Turn, TurnId, TurnKey
    from hermes_tray_core.vocab import (
        Event,
        Mode,
        Moment,
        Outcome,
        RanIn,
        ReasonCode,
        Refusal,
        SkipOutcome,
        StepKind,
        StopCause,
        StopReason,
        TurnSource,
        Verdict,
        WriterState,
    )

def __getattr__(name: str) -> object:
    spec = _FACE.get(name)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = spec.partition(":")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute or name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
