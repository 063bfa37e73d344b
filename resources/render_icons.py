"""Render the tray icon SVG sources to PNGs at every size a tray or notification asks for.

PNGs are committed so the running app never needs an SVG renderer (some panels ask for a
pixmap at a size no icon engine was asked about). Re-run after editing an SVG:

    QT_QPA_PLATFORM=offscreen python resources/render_icons.py

Output: ``resources/icons/png/<size>/hermes-tray-<state>-<variant>.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
HERE = Path(__file__).resolve().parent
SVG_DIR = HERE / "icons" / "svg"
PNG_DIR = HERE / "icons" / "png"


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
            if not render(svg, size).save(str(target), "PNG"):
                print(f"could not write {target}", file=sys.stderr)
                return 1
    print(f"rendered {len(sources)} icons x {len(SIZES)} sizes into {PNG_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
