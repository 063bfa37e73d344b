"""The About box: which hermes-tray this is, which Hermes it found, which homes it watches, where to
read more, and the licences of what it is built on. The Hermes version is asked off the GUI thread
(it runs Hermes' interpreter once; cached by ``core.continuing.gateway`` afterwards)."""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from hermes_tray.app.icons import app_icon
from hermes_tray.demo import SIMULATED_DISTRIBUTION, hermes_label
from hermes_tray.format import short_path
from hermes_tray.notices import about_html, shipped_file

log = logging.getLogger(__name__)

#: places on the web that exist (hermes-tray itself is not published: its read me ships with it, ``readme_file``)
LINKS = (("Hermes Agent", "https://pypi.org/project/hermes-agent/"),)
README_NAME = "README.md"
#: what the tray is built on, and under which licence (docs/architecture.md "Dependencies and why" says why each is there)
LICENCES = (("hermes-tray", "MIT"), ("Qt / PySide6", "LGPL-3.0"), ("desktop-notifier", "MIT"),
            ("psutil", "BSD-3-Clause"), ("platformdirs", "MIT"), ("ruamel.yaml", "MIT"), ("PyYAML", "MIT"),
            ("tomli-w", "MIT"), ("jeepney", "MIT"), ("websockets", "BSD-3-Clause"))


def hermes_found(hermes_command: Sequence[str] | None) -> str:
    """"Hermes Agent 0.19.0 (/path/to/python)" or what went wrong finding it. Blocking: off the GUI thread."""
    try:
        from hermes_tray_core import find_hermes, probe_capabilities

        install = find_hermes(hermes_command)
    except Exception as exc:  # boundary: About says what went wrong finding Hermes
        return f"not found ({exc})"
    try:
        caps = probe_capabilities(install)
    except Exception as exc:  # boundary: asking Hermes, another program, for its version
        log.info("could not ask %s for its version: %r", install.python, exc)
        return f"found at {install.python}, version unknown"
    if caps.auto_continue is None:
        return f"{short_path(install.python)}: not usable ({caps.detail or 'it did not answer'})"
    continues = {True: "continues interrupted turns itself", False: "the tray continues its turns",
                 None: "cannot tell what it can do"}[caps.auto_continue]
    label = hermes_label(caps.version, caps.distribution)
    if caps.distribution == SIMULATED_DISTRIBUTION:  # its interpreter is a throwaway folder of the demo's
        return f"{label} — {continues}"
    return f"{label} at {short_path(install.python)} — {continues}"


def readme_file() -> Path | None:
    """hermes-tray's read me as this installation has it (outside a bundle: the text its metadata carries)."""
    from importlib import metadata

    def description() -> str | None:
        try:
            return metadata.metadata("hermes-tray")["Description"]
        except metadata.PackageNotFoundError:
            return None

    return shipped_file(README_NAME, description)


def readme_link() -> str:
    """The About box's link to the read me ("" when there is none to open)."""
    path = readme_file()
    return f'<a href="{html.escape(path.as_uri(), quote=True)}">Read me</a>' if path is not None else ""


class AboutDialog(QDialog):
    _answered = Signal(str, str)  # which line ("hermes", "notices", "readme"), its text

    def __init__(self, homes: Sequence[str], hermes_command: Sequence[str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from hermes_tray_core import __version__

        self.setWindowTitle("About")
        self.setWindowIcon(app_icon())
        lay = QVBoxLayout(self)
        self.text = QLabel()
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setOpenExternalLinks(False)  # opened here: a link no program opens shows where it points
        self.text.linkActivated.connect(self.open_link)
        self.shown_path: Any = None
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.text.setAccessibleName("About Hermes Tray")
        self.text.setMinimumWidth(480)
        lay.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.version = __version__
        self.homes = list(homes)
        self.hermes = "looking…"
        self.notices = ""  # the MIT line and the third-party notices link (the file is written off the GUI thread)
        self.readme = ""  # the link to the read me (written off the GUI thread too)
        self._render()
        self._answered.connect(self._got)
        for name, work in (("hermes", lambda: hermes_found(hermes_command)), ("notices", about_html),
                           ("readme", readme_link)):
            threading.Thread(target=self._answer, args=(self._answered, name, work), name=f"about-{name}",
                             daemon=True).start()

    def open_link(self, link: str) -> None:
        """A web link in the browser, the third-party notices with the desktop's program; where nothing
        opens it, a window shows the path (or address) with Copy."""
        from hermes_tray.app.reveal import open_or_show, path_box

        url = QUrl(link)
        if url.isLocalFile():
            what = "Read me" if url.fileName() == README_NAME else "Third-party notices"
            self.shown_path = open_or_show(what, url.toLocalFile(), self)
        elif not QDesktopServices.openUrl(url):
            self.shown_path = path_box("Web page", link, self)
            self.shown_path.show()

    @staticmethod
    def _answer(signal: Any, name: str, work: Callable[[], str]) -> None:
        """Off the GUI thread: compute, then hand the text over — unless the box was closed and deleted
        meanwhile (Qt then says "Signal source has been deleted"): nobody is left to show it."""
        text = work()
        with suppress(RuntimeError):
            signal.emit(name, text)

    def _got(self, name: str, text: str) -> None:
        setattr(self, name, text)  # self.hermes, self.notices or self.readme
        self._render()

    def _render(self) -> None:
        e = html.escape
        homes = "".join(f"<li>{e(short_path(h))}</li>" for h in self.homes) or "<li>none yet</li>"
        links = " · ".join([*(f'<a href="{e(u)}">{e(n)}</a>' for n, u in LINKS), *filter(None, [self.readme])])
        lic = ", ".join(f"{e(n)} ({e(licence)})" for n, licence in LICENCES)
        self.text.setText(
            f"<h3>Hermes Tray {e(self.version)}</h3>"
            "<p>Notices interrupted Hermes Agent turns and lets you resume, skip or disable auto-continue.</p>"
            f"<p><b>Hermes:</b> {e(self.hermes)}</p>"
            f"<p><b>Homes watched:</b></p><ul>{homes}</ul>"
            f"<p>{links}</p>"
            f"<p><small><b>Licences:</b> {lic}.{self.notices}</small></p>")
        self.adjustSize()  # the Hermes line arrives later and may add lines: never cut the licences
