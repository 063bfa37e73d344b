"""A tray that fails before it shows anything says so and exits; it never lives on invisible.

Qt runs the start-up in event-loop callbacks, where an exception is only printed: the process would live on with
no icon, window or notification (as a wheel without a subpackage once did). Until the tray has shown something
such an exception is fatal: logged and printed, a message box where a display exists, what the tray started
stopped, a non-zero exit. After that an unexpected error is logged and the tray goes on: its icon shows problems.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMessageBox

log = logging.getLogger(__name__)

EXIT_START_FAILED = 1


class StartupGuard:
    """Installed as ``sys.excepthook`` for the tray's life (:meth:`install` / :meth:`remove`)."""

    def __init__(self, *, visible: Callable[[], bool], stop: Callable[[], None], exit_loop: Callable[[int], None],
                 log_path: Callable[[], str] | None = None) -> None:
        self._visible, self._stop, self._exit = visible, stop, exit_loop
        self._log_path = log_path
        self._previous = sys.excepthook
        self.failed: str | None = None
        self._box: QMessageBox | None = None  # kept alive while it is shown

    def install(self) -> StartupGuard:
        self._previous = sys.excepthook
        sys.excepthook = self._hook
        return self

    def remove(self) -> None:
        if sys.excepthook is self._hook:
            sys.excepthook = self._previous

    def _hook(self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if self.failed is not None:
            log.error("error after the start-up failure", exc_info=(kind, exc, tb))
            return
        try:
            visible = self._visible()
        except Exception:  # boundary: the start-up failure's hook must not fail itself
            visible = False
        if visible and not issubclass(kind, (SystemExit, KeyboardInterrupt)):
            log.error("unexpected error", exc_info=(kind, exc, tb))
            self._previous(kind, exc, tb)
            return
        from hermes_tray.words import error_text

        self.fail(error_text(exc), (kind, exc, tb))

    def fail(self, why: str, exc_info: tuple | None = None) -> None:
        """Start-up failed before anything was shown: say it, stop what was started, exit non-zero."""
        self.failed = why
        log.critical("hermes-tray could not start: %s", why, exc_info=exc_info)
        where = ""
        if self._log_path is not None:
            try:
                where = self._log_path()
            except Exception:  # boundary: the start-up failure's hook must not fail itself
                where = ""
        lines = [f"hermes-tray could not start: {why}"]
        if where:
            lines.append(f"The log has the details: {where}")
        sys.stderr.write("\n".join(lines) + "\n")
        if exc_info is not None and log.isEnabledFor(logging.DEBUG):
            sys.stderr.write("".join(traceback.format_exception(*exc_info)))
        sys.stderr.flush()
        try:
            self._stop()
        except Exception:  # boundary: the start-up failure's hook must not fail itself
            log.exception("could not stop everything after the start-up failure")
        if not self._show_box("\n\n".join(lines)):
            self._exit(EXIT_START_FAILED)

    def _show_box(self, text: str) -> bool:
        """A message box the user closes; the loop ends when it is closed. False when none can show."""
        try:
            from PySide6.QtWidgets import QApplication, QMessageBox

            app = QApplication.instance()
            if not isinstance(app, QApplication) or app.platformName() in ("offscreen", "minimal"):
                return False  # no screen a person looks at: stderr and the log said it
            box = QMessageBox(QMessageBox.Icon.Critical, "Hermes Tray", text, QMessageBox.StandardButton.Close)
            box.setObjectName("start-failed")
            box.finished.connect(lambda _r: self._exit(EXIT_START_FAILED))
            box.show()
            self._box = box
            return True
        except Exception:  # boundary: the start-up failure's hook must not fail itself
            log.exception("could not show the start-up failure")
            return False
