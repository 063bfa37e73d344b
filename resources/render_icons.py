"""Render the tray icon SVG sources to PNGs at every size a tray or notification asks for.

PNGs are committed so the running app never needs an SVG renderer (some panels ask for a
pixmap at a size no icon engine was asked about). Re-run after editing an SVG:

    QT_QPA_PLATFORM=offscreen python resources/render_icons.py

Output: ``resources/icons/png/<size>/<svg name>.png`` for every SVG (the tray's
``hermes-tray-<state>-<variant>`` glyphs and the app icon ``hermes-tray``), plus the app icon as
``resources/icons/hermes-tray.ico`` (Windows executable and installer) and ``hermes-tray.icns``
(macOS .app). Both containers hold PNG images, written here byte by byte (no extra tool).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
HERE = Path(__file__).resolve().parent
SVG_DIR = HERE / "icons" / "svg"
PNG_DIR = HERE / "icons" / "png"
APP_ICON = SVG_DIR / "hermes-tray.svg"
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns element types holding PNG data, by pixel size (the @2x types share sizes with 1x ones).
ICNS_TYPES = ((b"icp4", 16), (b"icp5", 32), (b"ic11", 32), (b"icp6", 64), (b"ic12", 64), (b"ic07", 128),
              (b"ic08", 256), (b"ic13", 256), (b"ic09", 512), (b"ic14", 512), (b"ic10", 1024))


def render(svg: Path, size: int) -> QImage:
    """Draw ``svg`` into a transparent ``size`` × ``size`` ARGB image, antialiased."""
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg}: not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # PySide6 6.11 takes str; its stubs say bytes
        raise OSError("could not encode a PNG")
    return bytes(data.data())


def ico(svg: Path) -> bytes:
    """A Windows .ico with one PNG image per size (PNG entries: Windows Vista and later)."""
    images = [png_bytes(render(svg, size)) for size in ICO_SIZES]
    out = struct.pack("<HHH", 0, 1, len(images))
    offset = 6 + 16 * len(images)
    for size, data in zip(ICO_SIZES, images, strict=True):
        side = 0 if size >= 256 else size  # 0 means 256
        out += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    return out + b"".join(images)


def icns(svg: Path) -> bytes:
    """A macOS .icns: ``icns`` + big-endian length, then (type, length, PNG) elements."""
    rendered = {size: png_bytes(render(svg, size)) for size in {s for _, s in ICNS_TYPES}}
    body = b"".join(kind + struct.pack(">I", 8 + len(rendered[size])) + rendered[size] for kind, size in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    sources = sorted(SVG_DIR.glob("*.svg"))
    if not sources:
        print(f"no SVG sources in {SVG_DIR}", file=sys.stderr)
        return 1
    for size in SIZES:
        out_dir = PNG_DIR / str(size)
        out_dir.mkdir(parents=True, exist_ok=True)
        for svg in sources:
            target = out_dir / f"{svg.stem}.png"
            if not render(svg, size).save(str(target)):
                print(f"could not write {target}", file=sys.stderr)
                return 1
    print(f"rendered {len(sources)} icons x {len(SIZES)} sizes into {PNG_DIR}")
    if APP_ICON.is_file():
        (HERE / "icons" / "hermes-tray.ico").write_bytes(ico(APP_ICON))
        (HERE / "icons" / "hermes-tray.icns").write_bytes(icns(APP_ICON))
        print(f"wrote the app icon as {HERE / 'icons' / 'hermes-tray.ico'} and .icns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
