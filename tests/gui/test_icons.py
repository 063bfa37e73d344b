"""Icon states: every state has a legible icon at every tray size, and the tray shows the right one."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage

from hermes_tray.app.icons import SIZES, VARIANTS, IconState, icon_file, tray_icon
from hermes_tray.model.viewstate import RunningItem, ViewState, turn_item

STATES = [s.value for s in IconState]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("state", STATES)
def test_every_size_is_rendered_and_not_blank(qapp, state: str, variant: str) -> None:
    assert Path(icon_file(state, variant)).is_file(), "SVG source missing"
    for size in SIZES:
        img = QImage(icon_file(state, variant, size))
        assert (img.width(), img.height()) == (size, size)
        opaque = sum(1 for x in range(size) for y in range(size) if img.pixelColor(x, y).alpha() > 128)
        assert opaque > size * size * 0.08, f"{state}-{variant}@{size} is almost empty"


def _has_hue(img: QImage, hue_range: tuple[int, int]) -> bool:
    for x in range(img.width()):
        for y in range(img.height()):
            c: QColor = img.pixelColor(x, y)
            if c.alpha() > 200 and c.saturation() > 120 and hue_range[0] <= c.hue() <= hue_range[1]:
                return True
    return False


def test_states_are_distinguishable_at_16px(qapp) -> None:
    """At the smallest tray size, attention is orange and busy is blue: a glance tells them apart."""
    attention = QImage(icon_file("attention", "dark", 16))
    busy = QImage(icon_file("busy", "dark", 16))
    idle = QImage(icon_file("idle", "dark", 16))
    assert _has_hue(attention, (20, 45))
    assert _has_hue(busy, (200, 225))
    assert not _has_hue(idle, (0, 359))


def test_light_and_dark_variants_contrast_with_their_panels(qapp) -> None:
    dark = QImage(icon_file("idle", "dark", 22))  # for dark panels: a light glyph
    light = QImage(icon_file("idle", "light", 22))

    def mean_lightness(img: QImage) -> float:
        vals = [img.pixelColor(x, y).lightness() for x in range(22) for y in range(22) if img.pixelColor(x, y).alpha() > 200]
        return sum(vals) / len(vals)

    assert mean_lightness(dark) > 200
    assert mean_lightness(light) < 80


def test_icon_offers_every_tray_size(qapp) -> None:
    icon = tray_icon(IconState.ATTENTION, "dark")
    sizes = {s.width() for s in icon.availableSizes()}
    assert {16, 22, 24, 32, 48}.issubset(sizes)


def test_view_state_picks_icon(rec) -> None:
    pending = (turn_item(rec("a"), show_prompts=True),)
    assert ViewState().icon_state == "idle"
    assert ViewState(pending=pending).icon_state == "attention"
    assert ViewState(pending=pending, running=(RunningItem("k", "t", 3, "streaming"),)).icon_state == "busy"
    assert ViewState(backend_enabled=False).icon_state == "paused"


def test_tray_presence_switches_icon_and_tooltip(qapp, rec, monkeypatch) -> None:
    from PySide6.QtWidgets import QMenu, QSystemTrayIcon

    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    presence = TrayPresence(QMenu())
    presence.start()
    assert presence.icon is not None
    idle_key = presence.icon.icon().cacheKey()
    presence.set_state(ViewState(pending=(turn_item(rec("a"), show_prompts=True), turn_item(rec("b"), show_prompts=True))))
    assert presence.icon.icon().cacheKey() != idle_key
    assert "2 interrupted turns waiting" in presence.icon.toolTip()
    presence.set_state(ViewState(running=(RunningItem("k", "Fix the flaky test", 75, "streaming"),)))
    assert "Resuming Fix the flaky test — 1:15 — streaming" in presence.icon.toolTip()
    presence.hide()


def test_no_tray_falls_back_to_status_window(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QMenu, QSystemTrayIcon

    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: False))
    presence = TrayPresence(QMenu(), wait_seconds=0.3)
    with qtbot.waitSignal(presence.unavailable, timeout=3000):
        presence.start()
    assert presence.icon is None


def test_status_window_stands_in_for_the_icon(qtbot, rec) -> None:
    from hermes_tray.app.status_window import StatusWindow

    w = StatusWindow()
    qtbot.addWidget(w)
    w.set_state(ViewState(pending=(turn_item(rec("a"), show_prompts=True),)))
    assert "1 interrupted turn waiting" in w.text.text()
    assert w.open_button.isDefault()
    with qtbot.waitSignal(w.open_requested):
        w.open_button.click()


BADGED = ("attention", "busy", "paused", "finished", "gave-up")


def _file(state: str, variant: str, size: int) -> str:
    from hermes_tray.resources import resource_path

    return str(resource_path("icons", "png", str(size), f"hermes-tray-{state}-{variant}.png"))


@pytest.mark.parametrize("variant", ("light", "dark"))
@pytest.mark.parametrize("state", BADGED)
def test_badges_are_whole_and_the_h_stays_an_h(qapp, state: str, variant: str) -> None:
    """Before: the badge ran off the top edge and cut the H's right stem ("H" read "h" at 22 px)."""
    big = QImage(_file(state, variant, 64))
    assert max(big.pixelColor(x, 0).alpha() for x in range(64)) == 0, "the badge is cut at the top"
    assert max(big.pixelColor(63, y).alpha() for y in range(64)) < 40, "the badge is cut at the right"
    for size in (16, 22, 24):
        badged, idle = QImage(_file(state, variant, size)), QImage(_file("idle", variant, size))
        # the H (both stems, full height, and the bar) is drawn exactly as without a badge
        # (paused dims the whole glyph: compare where it is drawn, not how bright)
        lo, hi = int(size * 15 / 64), int(size * 41 / 64)
        top, bottom = int(size * 22 / 64) + 1, int(size * 50 / 64)
        for x in range(lo, hi):
            for y in range(top, bottom):
                a, b = badged.pixelColor(x, y).alpha(), idle.pixelColor(x, y).alpha()
                if state == "paused":
                    assert (a > 0) == (b > 0), (state, variant, size, x, y)
                else:
                    assert abs(a - b) <= 2, (state, variant, size, x, y, a, b)


def test_one_notification_icon_per_kind(qapp) -> None:
    from hermes_tray.resources import note_icon_file

    files = {kind: note_icon_file(kind) for kind in ("waiting", "finished", "gave-up")}
    assert len(set(files.values())) == 3
    for path in files.values():
        assert Path(path).is_file()
    assert _has_hue(QImage(files["waiting"]), (20, 45))  # orange "!"
    assert _has_hue(QImage(files["finished"]), (120, 160))  # green check
    red = QImage(files["gave-up"])
    assert _has_hue(red, (0, 10)) or _has_hue(red, (350, 359))  # red cross


def _luminance(r: float, g: float, b: float) -> float:
    """WCAG relative luminance of an sRGB colour (0..255 channels)."""
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


@pytest.mark.parametrize("size", (16, 22, 24))
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize(("variant", "panel"), (("light", (245, 247, 250)), ("dark", (31, 41, 51))))
def test_every_state_stands_out_on_its_panel(qapp, state: str, variant: str, panel: tuple, size: int) -> None:
    """The H and its ring (the badge aside), composited over a typical light or dark panel, keep at least
    WCAG's 3:1 contrast for graphics in every state — "paused" included, which is drawn dimmed."""
    img = QImage(icon_file(state, variant, size))
    glyph = []
    for x in range(size):
        for y in range(size):
            if x > size * 0.55 and y < size * 0.45:
                continue  # the badge's corner
            c = img.pixelColor(x, y)
            a = c.alphaF()
            if a < 0.4:
                continue
            glyph.append(tuple(a * ch + (1 - a) * p for ch, p in zip((c.red(), c.green(), c.blue()), panel,
                                                                     strict=True)))
    assert glyph, "no glyph drawn"
    mean = tuple(sum(px[i] for px in glyph) / len(glyph) for i in range(3))
    lum, bg = _luminance(*mean), _luminance(*panel)
    ratio = (max(lum, bg) + 0.05) / (min(lum, bg) + 0.05)
    assert ratio >= 3.0, (state, variant, size, round(ratio, 2))


@pytest.mark.parametrize("kind", ("waiting", "finished", "gave-up", "info"))
@pytest.mark.parametrize("bubble", ((255, 255, 255), (245, 245, 245), (34, 34, 34), (48, 48, 48)),
                         ids=("white", "light grey", "dunst dark", "gnome dark"))
def test_a_notification_icon_reads_on_light_and_dark_bubbles(qapp, kind: str, bubble: tuple) -> None:
    """Before: the notes used the light-panel glyph, a dark H nearly invisible on a dark theme's bubble (dunst's
    default is #222222). Now its outline or its body contrasts at least 3:1 with the bubble over much of the
    glyph, on light and dark bubbles alike (the badge's corner aside)."""
    from hermes_tray.resources import note_icon_file

    img = QImage(note_icon_file(kind))
    size = img.width()
    drawn = contrasting = 0
    bg = _luminance(*bubble)
    for x in range(size):
        for y in range(size):
            if x > size * 0.55 and y < size * 0.45:
                continue
            c = img.pixelColor(x, y)
            a = c.alphaF()
            if a < 0.4:
                continue
            drawn += 1
            px = tuple(a * ch + (1 - a) * b for ch, b in zip((c.red(), c.green(), c.blue()), bubble, strict=True))
            lum = _luminance(*px)
            contrasting += (max(lum, bg) + 0.05) / (min(lum, bg) + 0.05) >= 3.0
    assert drawn and contrasting / drawn >= 0.3, (kind, bubble, round(contrasting / max(drawn, 1), 2))
