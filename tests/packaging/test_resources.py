"""Resources load from a source checkout (here); the wheel and frozen cases are in test_wheel / test_bundle.

The suite imports the installed product, so the checkout's layout is checked with the checkout's own copy
of ``hermes_tray/resources.py``, loaded by path under a private name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _pkg_helpers import ROOT

from hermes_tray.resources import resource_path, resource_root


def _checkout_resources():
    import importlib.util

    spec = importlib.util.spec_from_file_location("checkout_hermes_tray_resources", ROOT / "hermes_tray" / "resources.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_source_checkout_layout() -> None:
    checkout = _checkout_resources()
    root = checkout.resource_root()
    assert root.resolve() == (ROOT / "resources").resolve()
    assert checkout.resource_path("desktop", "hermes-tray.desktop.in").is_file()
    assert checkout.resource_path("desktop", "hermes-tray-autostart.desktop.in").read_text().startswith("[Desktop Entry]")
    assert checkout.resource_path("desktop", "hermes-tray-helper.service.in").is_file()


def test_the_installed_product_finds_its_resources_beside_its_code() -> None:
    root = resource_root()
    assert (root / "desktop" / "hermes-tray.desktop.in").is_file()
    assert resource_path("desktop", "hermes-tray-helper.service.in").is_file()


def test_source_checkout_has_icons() -> None:
    icons = _checkout_resources().resource_path("icons")
    if not icons.is_dir():
        pytest.skip("resources/icons not there yet")
    assert any(icons.rglob("*.png")) and any(icons.rglob("*.svg"))


def test_wheel_link_points_at_resources() -> None:
    """hermes_tray/_resources -> ../resources is how the wheel picks up the top-level folder."""
    link = ROOT / "hermes_tray" / "_resources"
    assert link.is_symlink() and os.readlink(link) == "../resources"


def test_frozen_layout_is_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resource_root() == tmp_path / "resources"
    assert resource_path("icons", "x.png") == tmp_path / "resources" / "icons" / "x.png"
