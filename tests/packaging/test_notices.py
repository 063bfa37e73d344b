"""Third-party notices: what the About box links to, in a pip install and in a frozen bundle.

The frozen bundle's own generated file is checked on the real bundle in test_bundle.py; the
installed wheel's in test_wheel.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from hermes_tray import notices


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HERMES_TRAY_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_pip_install_notices_come_from_installed_metadata(cache: Path) -> None:
    from importlib import metadata

    path = notices.notices_file()
    assert path == cache / notices.NOTICES_NAME and (path.stat().st_mode & 0o777) == 0o600
    text = path.read_text()
    for name in ("PySide6-Essentials", "shiboken6", "psutil", "websockets"):
        dist = metadata.distribution(name)
        assert f"\n{dist.metadata['Name']} {dist.version}\n" in text, name  # the installed version
    psutil = metadata.distribution("psutil")
    assert "Licence: BSD-3-Clause" in text and psutil.read_text("LICENSE").strip()[:200] in text
    qt = text[text.index("Qt and Qt for Python (LGPL-3.0)"):]
    assert "https://download.qt.io/official_releases/QtForPython/pyside6/" in qt
    assert "replace them with your own build" in qt
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in qt and "GNU GENERAL PUBLIC LICENSE" in qt
    assert text.count("GNU LESSER GENERAL PUBLIC LICENSE\n") == 1  # once, not per Qt distribution


def test_frozen_app_reads_the_bundled_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / notices.NOTICES_NAME).write_text("bundled")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert notices.notices_file() == tmp_path / notices.NOTICES_NAME
    (tmp_path / notices.NOTICES_NAME).unlink()
    assert notices.notices_file() is None  # said so in the About box, not invented
    assert "could not be found" in notices.about_html()


def test_about_box_links_to_the_notices(cache: Path, qtbot) -> None:
    """The About box the user opens carries a clickable link to the notices file."""
    from hermes_tray.app.about import AboutDialog

    dlg = AboutDialog([], None)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: notices.NOTICES_NAME + '"' in dlg.text.text(), timeout=10_000)
    text = dlg.text.text()
    (href,) = [h for h in re.findall(r'<a href="([^"]+)">', text)
               if h.startswith("file:") and h.endswith(notices.NOTICES_NAME)]  # the read me is the other file link
    target = Path(unquote(urlparse(href).path))
    assert target == cache / notices.NOTICES_NAME and "PySide6" in target.read_text()
    assert "MIT licence" in text
    # a click opens it with the desktop's viewer, or shows its path with Copy where none opens it (AboutDialog
    # .open_link, issue 25.10: tests/gui/test_application.py)
    from PySide6.QtCore import Qt

    assert dlg.text.textInteractionFlags() & Qt.TextInteractionFlag.LinksAccessibleByMouse
