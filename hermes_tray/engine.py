"""The one place the Qt shell calls into ``core``: a thin adapter, no engine logic.

Everything here delegates: scanning (``core.scanner``), skipping (``core.skip``), resuming
(``core.resume``), backend config (``core.backend_config``), tray settings (``core.settings``)
and the decision journal (``core.decisions``). If a ``core`` interface changes, this file is
what changes in the shell.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_tray.app.settings_model import BackendValues
from hermes_tray.controller import Outcome

log = logging.getLogger(__name__)


def _decisions():
    """``core.decisions`` (issue 3), or None while it has not landed."""
    try:
        from hermes_tray_core import decisions
    except ImportError:
        return None
    return decisions


class CoreEngine:
    """Adapter from the controller's :class:`~hermes_tray.controller.Engine` protocol to ``core``."""

    def __init__(self, explicit_homes: Sequence[str] | None = None) -> None:
        self.explicit_homes = list(explicit_homes) if explicit_homes else None
        self._scanner = None
        self._scanner_homes: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._memory_journal: list[dict[str, Any]] = []  # only while core.decisions is missing

    # --- homes and scanning (detector thread) -------------------------------------------------
    def homes(self) -> list[Any]:
        from hermes_tray_core.homes import discover_homes

        extra = ()
        try:
            extra = self.settings().homes
        except Exception:
            pass
        return discover_homes(explicit=self.explicit_homes, extra=extra)

    def scan(self, homes: Sequence[Any]) -> tuple[Sequence[Any], Sequence[str], dict[str, Any]]:
        from hermes_tray_core.scanner import Scanner, default_cache_file

        key = tuple(str(h.path) for h in homes)
        if self._scanner is None or key != self._scanner_homes:
            # the CLI's cache too: a warm start re-parses neither journals nor config.yaml
            self._scanner = Scanner(list(homes), cache_file=default_cache_file())
            self._scanner_homes = key
        result = self._scanner.scan()
        problems: list[str] = []
        details: list[dict[str, Any]] = []  # the same problems, with where to look (the views' banner)
        enabled: list[bool] = []
        for report in result.homes:
            desktop = str(report.path / "desktop")
            for p in report.problems:
                problems.append(f"{report.profile}: {p}")
                marker = report.markers in ("corrupt", "unreadable") and "interrupted_turns" in p
                details.append({"text": problems[-1], "folder": desktop if marker else
                                (str(report.path) if report.exists else ""), "attention": report.exists})
            for u in report.unsupported:
                problems.append(f"{report.profile}: {u} (not supported yet)")
                details.append({"text": problems[-1], "folder": desktop, "attention": True})
            if report.exists:
                enabled.append(bool(report.config.enabled))
        backend_enabled: bool | None = True
        if enabled and not any(enabled):
            backend_enabled = False
        elif enabled and not all(enabled):
            backend_enabled = None
        return result.turns, problems, {
            "backend_enabled": backend_enabled,
            "problem_details": details,
            "homes_found": any(r.exists for r in result.homes),
            "watching": [str(r.path) for r in result.homes],
        }

    def watch_plan(self, homes: Sequence[Any]) -> tuple[list[Path], list[Path]]:
        dirs: list[Path] = []
        files: list[Path] = []
        for h in homes:
            dirs += [h.path / "desktop", h.path / "profiles", h.webui_journal_dir]
            files += [h.marker_file, h.config_file]
        if self.explicit_homes is None:
            from hermes_tray_core.paths import settings_file

            files.append(settings_file())  # homes added there (the CLI, another tray) are picked up
        return dirs, files

    def writers(self, homes: Sequence[Any], records: Sequence[Any]) -> list[tuple[int, float | None]]:
        """Live marker writers to watch for exit (from the entries the scanner read)."""
        out: dict[int, float | None] = {}
        for r in records:
            if getattr(r, "writer", None) != "alive":
                continue
            entry = getattr(r, "entry", None) or {}
            pid = entry.get("writer_pid")
            start = entry.get("writer_start_time")
            if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
                out[pid] = float(start) if isinstance(start, (int, float)) and not isinstance(start, bool) else None
        return list(out.items())

    # --- actions (GUI thread unless noted) ------------------------------------------------------
    def skip(self, record: Any, *, origin: str) -> tuple[bool, str]:
        """Skip unless the entry changed or a resume holds the turn right now (``core.skip``)."""
        from hermes_tray_core import skip as core_skip

        expected = dict(getattr(record, "entry", None) or {})
        # journalled inside the skip's claim (record() never raises): a resume after it finds the turn answered
        res = core_skip.skip_turn(record.home, record.session_key, expected, via=f"tray-{origin}",
                                  on_skipped=lambda: self.record("skipped", record, via=origin))
        if res.ok:
            return True, ""
        log.info("skip refused (%s): %s", res.outcome, getattr(record, "session_key", "?"))
        if res.outcome == core_skip.RESUMING:
            return False, "This turn is being resumed right now; it was not skipped."
        if res.outcome == core_skip.CHANGED:
            return False, "The turn changed since it was shown; it was left in place."
        return False, res.message

    def resume(
        self, record: Any, *, origin: str, on_progress: Callable[[Any], None], stop: threading.Event
    ) -> Outcome:
        """Runs on a worker thread; the engine claims, re-checks, dispatches and journals."""
        from hermes_tray_core import resume as core_resume

        expected = dict(getattr(record, "entry", None) or {})
        result = core_resume.resume_turn(
            record.home, record.session_key, expected, on_progress=on_progress, stop=stop, via=f"tray-{origin}"
        )
        return _outcome(result)

    def set_backend(self, home_paths: Sequence[str], **changes: Any) -> list[str]:
        """Write Hermes' auto-continue keys (menu toggle, settings dialog); journal each value that changed."""
        from hermes_tray_core.backend_config import (
            BackendConfigError,
            read_backend_config,
            write_auto_continue,
        )

        problems = []
        for home in home_paths:
            before = read_backend_config(home).auto_continue
            try:
                after = write_auto_continue(home, **changes).auto_continue
            except BackendConfigError as exc:
                problems.append(f"{home}: {exc}")
            except OSError as exc:
                problems.append(f"{home}: {exc.strerror or exc}")
            else:
                log.info("backend config of %s changed: %s", home, changes)
                for key in changes:
                    if changes[key] is not None:
                        self._record_config(home, key, getattr(before, key, None), getattr(after, key, None))
        return problems

    def _record_config(self, home: str | None, key: str, old: Any, new: Any) -> None:
        """A ``config-changed`` event (by the tray) when the value really changed; bookkeeping never raises."""
        if old == new and type(old) is type(new):
            return
        d = _decisions()
        if d is None:
            return
        try:
            d.record_config_change(home=home, key=key, old=old, new=new, by="tray")
        except Exception:
            log.warning("could not journal the change of %s", key, exc_info=True)

    def backend_values(self, home_path: str) -> BackendValues:
        from hermes_tray_core.backend_config import read_backend_config

        cfg = read_backend_config(home_path)
        ac = cfg.auto_continue
        return BackendValues(
            enabled=bool(ac.enabled),
            freshness_minutes=int(ac.freshness_minutes),
            max_attempts=int(ac.max_attempts),
            error=cfg.error,
        )

    # --- settings -----------------------------------------------------------------------------
    def settings(self) -> Any:
        from hermes_tray_core.settings import SettingsError, TraySettings, load_settings

        try:
            return load_settings()
        except SettingsError as exc:
            log.warning("tray settings unusable, using defaults: %s", exc)
            return TraySettings()

    def update_settings(self, changes: dict[str, Any]) -> Any:
        """Write the tray's own settings (menu, settings dialog); journal each value that changed."""
        from hermes_tray_core.settings import update_settings

        old = self.settings().to_dict()
        if changes.get("hermes_command", 0) is None:
            # "unset": write everything except the key (update_settings merges)
            from hermes_tray_core.settings import load_settings, save_settings, with_changes

            current = load_settings()
            new = with_changes(current, **{k: v for k, v in changes.items() if k != "hermes_command"}, hermes_command=None)
            save_settings(new)
        else:
            new = update_settings(changes)
        now = new.to_dict()
        for key in changes:
            self._record_config(None, key, old.get(key), now.get(key))
        return new

    # --- decision journal ---------------------------------------------------------------------
    def record(self, event: str, record: Any, **fields: Any) -> None:
        """Journal a decision about a turn (``core.decisions`` vocabulary): identity only, never prompt text.

        Bookkeeping: it never raises. A journal that cannot be written (disk full, a broken state
        directory) is logged; it must not turn the skip or resume it records into a failure.
        """
        try:
            self._record(event, record, **fields)
        except Exception:
            log.warning("could not journal %r for %s", event, getattr(record, "session_key", "?"), exc_info=True)

    def _record(self, event: str, record: Any, **fields: Any) -> None:
        home = str(getattr(record, "home", ""))
        key = str(getattr(record, "session_key", ""))
        started = getattr(record, "started_at", None)
        d = _decisions()
        if d is None:
            import time

            with self._lock:
                self._memory_journal.append({"created_at": time.time(), "event": event, "home": home,
                                             "session_key": key, "started_at": started, **fields})
            return
        d.record(event, home=home, session_key=key, started_at=started,
                 profile=str(getattr(record, "profile", "")), attempts=getattr(record, "attempts", None), **fields)

    def _events(self, record: Any) -> list[str]:
        home = str(getattr(record, "home", ""))
        key = str(getattr(record, "session_key", ""))
        started = getattr(record, "started_at", None)
        d = _decisions()
        if d is None:
            return [e["event"] for e in self._memory_journal
                    if e["home"] == home and e["session_key"] == key and e.get("started_at") == started]
        return d.default_journal().events_for(home, key, started)

    def asked_before(self, record: Any) -> bool:
        """Notified or decided already (by this tray before a restart, the helper, or the CLI)."""
        d = _decisions()
        answered = d.ANSWERED if d is not None else {"approved", "skipped", "dispatched"}
        return any(e == "notified" or e in answered for e in self._events(record))

    def skipped_before(self, record: Any) -> bool:
        """This very turn (same start) was skipped: it reappearing means a writer resurrected it."""
        return "skipped" in self._events(record)

    def history(self, limit: int = 500) -> list[Any]:
        d = _decisions()
        if d is None:
            return list(reversed(self._memory_journal[-limit:]))
        return list(d.history(limit))


def _outcome(result: Any) -> Outcome:
    """Adapt the engine's result object to the controller's :class:`Outcome`."""
    if isinstance(result, Outcome):
        return result
    outcome = str(getattr(result, "outcome", "error") or "error")
    cont = getattr(result, "continuation", None)
    answer = getattr(result, "answer", None) or getattr(cont, "answer", None) or ""
    message = str(getattr(result, "message", "") or "")
    return Outcome(
        outcome=outcome,
        message=message,
        answer=str(answer),
        attempts=getattr(cont, "attempt", None),
        reason=str(getattr(result, "code", "") or "") if outcome == "refused" else "",
    )

