"""The app icon (menu entry, Windows executable and installer, macOS .app): one SVG source,
rendered PNGs and .ico/.icns that match it, and a tile that stands out on light and dark menus."""

from __future__ import annotations

import importlib.util

import pytest
from _pkg_helpers import ROOT, load_build_module

ICONS = ROOT / "resources" / "icons"
SVG = ICONS / "svg" / "hermes-tray.svg"


@pytest.fixture(scope="module")
def render_icons(qapp):
    spec = importlib.util.spec_from_file_location("hermes_tray_render_icons", ROOT / "resources" / "render_icons.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def luminance(r: int, g: int, b: int) -> float:
    """WCAG relative luminance of an sRGB colour."""
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def test_launcher_uses_the_app_icon_at_every_size() -> None:
    build = load_build_module()
    sources = build.app_icon_sources()
    assert sources["scalable"] == SVG
    assert {k for k in sources if k != "scalable"} == {f"{s}x{s}" for s in build.ICON_SIZES}
    assert all(p.name == "hermes-tray.png" for k, p in sources.items() if k != "scalable")


def test_rendered_pngs_match_the_svg(render_icons) -> None:
    from PySide6.QtGui import QImage

    for size in (16, 48, 256):
        committed = QImage(str(ICONS / "png" / str(size) / "hermes-tray.png"))
        fresh = render_icons.render(SVG, size).convertToFormat(committed.format())
        assert committed.size() == fresh.size()
        diff = max(abs(committed.pixelColor(x, y).alpha() - fresh.pixelColor(x, y).alpha())
                   for x in range(size) for y in range(0, size, max(1, size // 32)))
        assert diff <= 8, f"{size}px PNG is stale: re-run resources/render_icons.py"


def test_ico_and_icns_hold_every_size(qapp) -> None:
    from PySide6.QtGui import QImageReader

    for name, expected in (("hermes-tray.ico", {16, 24, 32, 48, 64, 128, 256}), ("hermes-tray.icns", {16, 32, 128, 256, 512})):
        reader = QImageReader(str(ICONS / name))
        sizes = set()
        for i in range(reader.imageCount()):
            reader.jumpToImage(i)
            image = reader.read()
            assert not image.isNull(), (name, i, reader.errorString())
            sizes.add(image.width())
        assert expected <= sizes, (name, sizes)


def test_tile_reads_on_light_and_dark_backgrounds(qapp) -> None:
    """An opaque mid-tone tile: at least 3:1 against white and against black (WCAG's figure for
    graphics), with the white glyph at least 3:1 against the tile."""
    from PySide6.QtGui import QImage

    image = QImage(str(ICONS / "png" / "48" / "hermes-tray.png"))
    tile = [image.pixelColor(x, 8) for x in range(14, 34)] + [image.pixelColor(6, y) for y in range(14, 34)]
    assert all(c.alpha() == 255 for c in tile)  # opaque: the panel behind does not show through
    tile_lum = sum(luminance(c.red(), c.green(), c.blue()) for c in tile) / len(tile)
    assert contrast(tile_lum, 1.0) >= 3.0 and contrast(tile_lum, 0.0) >= 3.0, tile_lum
    centre = image.pixelColor(24, 24)  # the H's crossbar
    assert contrast(luminance(centre.red(), centre.green(), centre.blue()), tile_lum) >= 3.0
