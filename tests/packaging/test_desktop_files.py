"""Every desktop entry the project ships or writes passes desktop-file-validate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _pkg_helpers import ROOT, need_tool, run

from hermes_tray.autostart.desktop_entry import read_entry, render_template

TEMPLATES = sorted((ROOT / "resources").rglob("*.desktop.in")) + sorted((ROOT / "packaging").rglob("*.desktop.in"))
SHIPPED = sorted((ROOT / "resources").rglob("*.desktop")) + sorted((ROOT / "packaging").rglob("*.desktop"))


def validate(path: Path) -> None:
    tool = need_tool("desktop-file-validate", "apt-get install desktop-file-utils")
    result = run([tool, str(path)])
    assert result.returncode == 0 and not result.stdout.strip(), f"{path.name}: {result.stdout}{result.stderr}"


def test_templates_exist() -> None:
    names = {p.name for p in TEMPLATES}
    assert {"hermes-tray.desktop.in", "hermes-tray-autostart.desktop.in"} <= names


@pytest.mark.parametrize("template", TEMPLATES + SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_template_validates_as_is(template: Path, tmp_path: Path) -> None:
    copy = tmp_path / template.name.removesuffix(".in")
    shutil.copyfile(template, copy)
    validate(copy)


@pytest.mark.parametrize("name", ["hermes-tray.desktop.in", "hermes-tray-autostart.desktop.in"])
def test_rendered_entries_validate(name: str, tmp_path: Path) -> None:
    argv = ["/home/a user/.local/opt/hermes-tray/hermes-tray", "--opt=50%"]
    out = tmp_path / name.removesuffix(".in")
    out.write_text(render_template(name, argv))
    validate(out)
    entry = read_entry(out)
    assert entry is not None
    assert entry["Icon"] == "hermes-tray" and entry["X-GNOME-UsesNotifications"] == "true"


def test_autostart_entry_keys() -> None:
    entry = read_entry(ROOT / "resources" / "desktop" / "hermes-tray-autostart.desktop.in")
    assert entry is not None
    assert int(entry["X-GNOME-Autostart-Delay"]) > 0
    assert entry["X-KDE-autostart-after"] == "panel"
    assert entry["X-GNOME-Autostart-enabled"] == "true"
