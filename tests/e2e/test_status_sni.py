"""On a StatusNotifierItem panel (KDE, GNOME with AppIndicator) the item's ``Status`` says whether the
tray wants a look: ``NeedsAttention`` while a turn waits, ``Active`` once it is skipped or resumed and
finished. The tooltip follows, and the turn's Resume / Skip entries work when clicked over dbusmenu.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import start_tray, wait_for


@pytest.fixture
def demo(tmp_path):
    from hermes_tray.demo.home import create_demo

    d = create_demo(tmp_path / "demo", die_after=None, continuation_seconds=1.0)
    yield d
    d.cleanup()


def _item(d) -> dict:
    items = d.tray_items()
    return next((i for i in items if i.get("Id") == "hermes-tray"), {})


def _labels(item: dict) -> list[str]:
    return [m["label"] for m in item.get("menu", [])]


def _status(d, status: str, tip: str, what: str) -> dict:
    def ok() -> dict:
        item = _item(d)
        return item if item.get("Status") == status and tip in item.get("ToolTip", ["", [], ""])[2] else {}

    return wait_for(ok, 20, f"{what}: Status {status} with {tip!r} in the tooltip (last: {_item(d)})")


def test_status_needs_attention_while_a_turn_waits(sni_desktop, demo, tmp_path) -> None:
    from hermes_tray_core.markers.turn_marker import read_turn_marker

    d, key = sni_desktop, demo.session_key
    tray = start_tray(d, demo, tmp_path)
    try:
        shown = tray.wait_event(lambda e: e["event"] == "tray-shown", what="tray item")
        assert shown["backend"] == "sni"  # our own item, not Qt's (which is always Active)
        tray.wait_event(lambda e: e["event"] == "scan" and e["verdicts"].get(key) == "running", what="running turn")
        _status(d, "Active", "No interrupted turns", "a turn running in Hermes is no reason to look")

        # a crash leaves a turn waiting: the panel is asked to highlight the item
        assert demo.crash_backend()
        item = _status(d, "NeedsAttention", "1 interrupted turn waiting", "interrupted turn")
        assert "Resume" in _labels(item) and "Skip" in _labels(item)
        assert item["IconName"] == ""  # pixmaps only: the same rendered icons as the menu's QIcon

        # Skip from the panel's menu: nothing waits any more
        d.tray_activate("Skip")
        _status(d, "Active", "No interrupted turns", "after Skip")
        wait_for(lambda: read_turn_marker(demo.home, key) is None, 10, "skipped marker gone")

        # another crash, then Resume from the menu: Active while it runs and after it finished
        demo.start_turn()
        tray.wait_event(lambda e: e["event"] == "scan" and e["verdicts"].get(key) == "running"
                        and e["t"] > shown["t"], what="second running turn")
        assert demo.crash_backend()
        _status(d, "NeedsAttention", "1 interrupted turn waiting", "second interrupted turn")
        d.tray_activate("Resume")
        wait_for(lambda: read_turn_marker(demo.home, key) is None, 30, "resumed turn finished")
        item = _status(d, "Active", "No interrupted turns", "after the continuation finished")
        assert "Resume" not in _labels(item)
    finally:
        assert tray.stop() == 0
    wait_for(lambda: not _item(d), 10, "item gone from the watcher after quitting")
