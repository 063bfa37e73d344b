"""A problem is a state on the panel too: over StatusNotifierItem the item's ``Status`` is
``NeedsAttention``, the tooltip carries the problem line and the menu's elided entry, which opens the
turns window with the banner."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import start_tray, wait_for


@pytest.fixture
def demo(tmp_path):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, start_turn=False)
    (d.home / "desktop").mkdir(exist_ok=True)
    (d.home / "desktop" / "interrupted_turns.json").write_text('{"torn": {"prompt": "half a wri')
    yield d
    d.cleanup()


def _item(d) -> dict:
    items = d.tray_items()
    return next((i for i in items if i.get("Id") == "hermes-tray"), {})


def test_corrupt_marker_store_shows_in_the_sni_tooltip_and_menu(sni_desktop, demo, tmp_path) -> None:
    tray = start_tray(sni_desktop, demo, tmp_path)
    try:
        wait_for(lambda: "corrupt" in str(_item(sni_desktop).get("ToolTip", "")), 20, "problem in the tooltip")
        item = _item(sni_desktop)
        tip = item["ToolTip"][2]
        assert "Cannot read the interrupted turns in" in tip and "⚠" in tip  # never "No interrupted turns"
        assert "No interrupted turns" not in tip
        assert item["Status"] == "NeedsAttention"  # nothing waits, but the corrupt store needs a look
        labels = [m["label"] for m in item.get("menu", [])]
        problem = next(label for label in labels if label.startswith("⚠"))
        assert len(problem) <= 70 and problem.endswith("…")  # elided: the menu keeps a sane width
        sni_desktop.tray_activate(problem)
        tray.wait_event(lambda e: e["event"] == "window" and e.get("name") == "prompt", 10, "turns window")
    finally:
        assert tray.stop() == 0
