"""The tray's own StatusNotifierItem and its dbusmenu export, over a real (private) session bus.

Each test gets its own ``dbus-daemon``; a panel is played by a client connection (jeepney, on a
worker thread so the Qt event loop keeps serving) and, where a watcher is needed, by
``tests/support/sni_watcher.py`` running as its own process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("jeepney")

from jeepney import DBusAddress, MessageType, new_method_call  # noqa: E402
from jeepney.bus_messages import MatchRule, message_bus  # noqa: E402
from jeepney.io.blocking import open_dbus_connection  # noqa: E402
from PySide6.QtGui import QActionGroup, QImage  # noqa: E402
from PySide6.QtWidgets import QMenu, QSystemTrayIcon  # noqa: E402

from hermes_tray.model.viewstate import Problem, ViewState, turn_item  # noqa: E402

WATCHER_SCRIPT = Path(__file__).resolve().parents[1] / "support" / "sni_watcher.py"
MENU = "com.canonical.dbusmenu"
ITEM = "org.kde.StatusNotifierItem"


@pytest.fixture
def bus(monkeypatch, tmp_path):
    """A private session bus; this process's jeepney connections go to it."""
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon not installed")
    proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
                            stdout=subprocess.PIPE, text=True)
    address = proc.stdout.readline().strip()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
    yield address
    proc.terminate()
    proc.wait(timeout=5)


class Watcher:
    """``sni_watcher.py`` as a process: a panel's watcher + host, started and killed at will."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(WATCHER_SCRIPT), *args], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.lines: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=5)


@pytest.fixture
def watcher(bus):
    w = Watcher()
    yield w
    w.stop()


class Panel:
    """What a host does: calls the item and its menu, and listens to their signals."""

    def __init__(self, qtbot) -> None:
        self.qtbot = qtbot
        self.pool = ThreadPoolExecutor(1)  # one thread owns the blocking connection
        self.conn = self._run(lambda: open_dbus_connection("SESSION"))
        self.signals: deque = deque(maxlen=200)
        rule = MatchRule(type="signal")
        self._run(lambda: self.conn.send_and_get_reply(message_bus.AddMatch(rule)))
        self.conn.filter(rule, queue=self.signals)

    def _run(self, fn):
        fut = self.pool.submit(fn)
        self.qtbot.waitUntil(fut.done, timeout=5000)
        return fut.result()

    def call(self, name: str, path: str, iface: str, method: str, sig: str | None = None, body: tuple = ()):
        msg = new_method_call(DBusAddress(path, bus_name=name, interface=iface), method, sig, body)
        reply = self._run(lambda: self.conn.send_and_get_reply(msg, timeout=5))
        assert reply.header.message_type == MessageType.method_return, reply.body
        return reply.body

    def props(self, name: str) -> dict:
        (props,) = self.call(name, "/StatusNotifierItem", "org.freedesktop.DBus.Properties", "GetAll", "s", (ITEM,))
        return {k: v[1] for k, v in props.items()}

    def wait_signal(self, member: str, timeout: float = 5.0, pred=lambda m: True):
        def seen():
            self._run(lambda: self._drain())
            return next((m for m in self.signals if m.header.fields.get(3) == member and pred(m)), None)

        self.qtbot.waitUntil(lambda: seen() is not None, timeout=int(timeout * 1000))
        msg = seen()
        self.signals.remove(msg)
        return msg

    def _drain(self) -> None:
        try:
            while True:
                self.conn.recv_messages(timeout=0.02)
        except TimeoutError:
            pass

    def has_owner(self, name: str) -> bool:
        return bool(self._run(lambda: self.conn.send_and_get_reply(message_bus.NameHasOwner(name))).body[0])

    def close(self) -> None:
        self.conn.close()
        self.pool.shutdown()


@pytest.fixture
def panel(bus, qtbot):
    p = Panel(qtbot)
    yield p
    p.close()


def _labels(node) -> list[str]:
    """Depth-first labels of a GetLayout tree (separators as ``---``)."""
    out = []
    for _sig, (_id, props, kids) in node[2]:
        out.append("---" if props.get("type", ("s", ""))[1] == "separator" else props["label"][1])
        out += _labels((_id, props, kids))
    return out


def _walk(node) -> list:
    """Every entry of a GetLayout tree, depth first."""
    out = []
    for _sig, child in node[2]:
        out.append(child)
        out += _walk(child)
    return out


def _find(node, label: str):
    for _sig, child in node[2]:
        if child[1].get("label", ("s", ""))[1] == label:
            return child
        found = _find(child, label)
        if found is not None:
            return found
    return None


def test_menu_layout_clicks_and_updates_over_dbusmenu(qtbot, bus, panel) -> None:
    from hermes_tray.app.sni.bus import SessionLink
    from hermes_tray.app.sni.dbusmenu import MenuExporter

    menu = QMenu()
    clicked: list[str] = []
    menu.addAction("Open turns window…").triggered.connect(lambda: clicked.append("open"))
    menu.addAction("Save && quit").triggered.connect(lambda: clicked.append("amp"))
    off = menu.addAction("No interrupted turns")
    off.setEnabled(False)
    off.triggered.connect(lambda: clicked.append("disabled"))
    menu.addAction("hidden").setVisible(False)
    menu.addSeparator()
    toggle = menu.addAction("Hermes auto-continue")
    toggle.setCheckable(True)
    toggle.setChecked(True)
    sub = menu.addMenu("When a turn is interrupted")
    group = QActionGroup(sub)
    for label in ("Ask me", "Resume automatically"):
        act = sub.addAction(label)
        act.setCheckable(True)
        act.setChecked(label == "Ask me")
        group.addAction(act)
    link = SessionLink()
    exporter = MenuExporter(menu, link, "/MenuBar")
    try:
        revision, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        assert _labels(root) == ["Open turns window…", "Save & quit", "No interrupted turns", "hidden", "---",
                                 "Hermes auto-continue", "When a turn is interrupted", "Ask me",
                                 "Resume automatically"]
        assert _find(root, "No interrupted turns")[1]["enabled"] == ("b", False)
        assert _find(root, "hidden")[1]["visible"] == ("b", False)
        t = _find(root, "Hermes auto-continue")[1]
        assert t["toggle-type"] == ("s", "checkmark") and t["toggle-state"] == ("i", 1)
        s = _find(root, "When a turn is interrupted")
        assert s[1]["children-display"] == ("s", "submenu")
        assert [c[1][1]["toggle-type"][1] for c in s[2]] == ["radio", "radio"]
        assert [c[1][1]["toggle-state"][1] for c in s[2]] == [1, 0]
        xml = panel.call(link.unique_name, "/MenuBar", "org.freedesktop.DBus.Introspectable", "Introspect")[0]
        assert 'interface name="com.canonical.dbusmenu"' in xml
        (version,) = panel.call(link.unique_name, "/MenuBar", "org.freedesktop.DBus.Properties", "Get", "ss",
                                (MENU, "Version"))
        assert version == ("u", 3)

        def click(label: str) -> None:
            item_id = _find(root, label)[0]
            panel.call(link.unique_name, "/MenuBar", MENU, "Event", "isvu", (item_id, "clicked", ("i", 0), 0))

        click("Open turns window…")
        qtbot.waitUntil(lambda: clicked == ["open"])
        click("No interrupted turns")  # disabled: a click does nothing
        click("Save & quit")
        qtbot.waitUntil(lambda: clicked == ["open", "amp"])
        click("Hermes auto-continue")  # a checkable entry toggles, as in the QMenu
        qtbot.waitUntil(lambda: not toggle.isChecked())
        click("Resume automatically")
        qtbot.waitUntil(lambda: group.checkedAction().text() == "Resume automatically")

        # the tray rebuilds its menu per state: hosts hear LayoutUpdated once and see the new entries
        panel.signals.clear()
        stale = _find(root, "Open turns window…")[0]
        menu.clear()
        menu.addAction("1 interrupted turn").triggered.connect(lambda: clicked.append("new"))
        menu.addAction("Quit")
        updated = panel.wait_signal("LayoutUpdated", pred=lambda m: m.body[0] == exporter.revision)
        assert updated.body[0] > revision and updated.body[1] == 0
        revision2, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        assert revision2 == updated.body[0] and _labels(root) == ["1 interrupted turn", "Quit"]
        panel.call(link.unique_name, "/MenuBar", MENU, "Event", "isvu", (stale, "clicked", ("i", 0), 0))
        click("1 interrupted turn")
        qtbot.waitUntil(lambda: clicked[-1] == "new")
        assert "open" not in clicked[2:]  # the stale id reached nothing

        # a menu filled when it opens: AboutToShow runs its aboutToShow and says the layout changed
        menu.aboutToShow.connect(lambda: menu.addAction("Filled on open") if len(menu.actions()) == 2 else None)
        (need_update,) = panel.call(link.unique_name, "/MenuBar", MENU, "AboutToShow", "i", (0,))
        assert need_update is True
        _, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        assert _labels(root) == ["1 interrupted turn", "Quit", "Filled on open"]
    finally:
        exporter.close()
        link.close()


def test_a_click_that_crosses_a_menu_rebuild_lands_on_the_same_entry(qtbot, bus, panel) -> None:
    """The tray rebuilds its menu whenever its state changes (the first scan, a new turn); a host may send a
    click for the layout it fetched just before. The same entry (same label and place, or the same turn)
    keeps its id, so the click lands; an entry that is gone, or a new one that only looks alike, is not hit."""
    from hermes_tray.app.sni.bus import SessionLink
    from hermes_tray.app.sni.dbusmenu import MenuExporter

    menu = QMenu()
    clicked: list[str] = []

    def build(turns: list[str], *, loading: bool) -> None:
        menu.clear()
        if loading:
            menu.addAction("Looking for interrupted turns…").setEnabled(False)
        for key in turns:
            sub = menu.addMenu(f"Turn {key} — {len(clicked)} s ago")  # the label changes, the turn does not
            sub.menuAction().setData(key)
            sub.addAction("Resume").triggered.connect(lambda _=False, k=key: clicked.append(f"resume {k}"))
        menu.addAction("Demo: crash the backend").triggered.connect(lambda: clicked.append("crash"))
        menu.addAction("Quit").triggered.connect(lambda: clicked.append("quit"))

    def ids(root) -> dict[str, int]:
        return {label: _find(root, label)[0] for label in _labels(root)}

    build([], loading=True)
    link = SessionLink()
    exporter = MenuExporter(menu, link, "/MenuBar")
    try:
        _rev, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        before = ids(root)
        build(["a"], loading=False)  # the first scan lands between the host's GetLayout and the click
        panel.call(link.unique_name, "/MenuBar", MENU, "Event", "isvu",
                   (before["Demo: crash the backend"], "clicked", ("i", 0), 0))
        qtbot.waitUntil(lambda: clicked == ["crash"])
        panel.call(link.unique_name, "/MenuBar", MENU, "Event", "isvu",
                   (before["Looking for interrupted turns…"], "clicked", ("i", 0), 0))  # gone: nothing
        _rev, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        resume_a = _find(root, "Resume")[0]
        build(["b", "a"], loading=False)  # a new turn above; turn a's entries keep their ids
        panel.call(link.unique_name, "/MenuBar", MENU, "Event", "isvu", (resume_a, "clicked", ("i", 0), 0))
        qtbot.waitUntil(lambda: clicked[-1] == "resume a")
        _rev, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        every = [n[0] for n in _walk(root)]
        assert len(every) == len(set(every))  # no two entries ever share an id
        assert clicked == ["crash", "resume a"]
    finally:
        exporter.close()
        link.close()


def _waiting_state(rec) -> ViewState:
    return ViewState(pending=(turn_item(rec("a"), show_prompts=True),))


def test_item_status_icons_tooltip_and_clicks(qtbot, monkeypatch, watcher, panel, rec) -> None:
    from PySide6.QtCore import QCoreApplication

    from hermes_tray.app.icons import IconState, tray_icon
    from hermes_tray.app.sni.item import icon_pixmaps
    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    presence = TrayPresence(QMenu())
    with qtbot.waitSignal(presence.shown, timeout=5000):
        presence.start()
    assert presence.backend == "sni" and not presence.findChildren(QSystemTrayIcon)  # one icon, ours
    qtbot.waitUntil(lambda: len(watcher.lines) == 1)
    name = watcher.lines[0]["registered"].split("/")[0]
    assert watcher.lines[0]["registered"] == f"{name}/StatusNotifierItem"

    p = panel.props(name)
    app_name = QCoreApplication.applicationName()
    assert (p["Id"], p["Title"], p["Category"], p["Status"]) == (app_name, app_name, "ApplicationStatus", "Active")
    assert (p["IconName"], p["ItemIsMenu"], p["WindowId"], p["Menu"]) == ("", False, 0, "/MenuBar")
    assert p["ToolTip"][2] == ViewState().tooltip() and p["ToolTip"][0] == "" and p["ToolTip"][3] == ""
    assert [(w, h) for w, h, _ in p["IconPixmap"]] == [(s, s) for s in (16, 22, 24, 32, 48)]
    assert p["AttentionIconPixmap"] == icon_pixmaps(tray_icon(IconState.ATTENTION))
    # ARGB32 in network byte order: an opaque pixel reads alpha, red, green, blue
    w, h, data = p["IconPixmap"][-1]
    img = tray_icon(IconState.IDLE).pixmap(48, 48).toImage().convertToFormat(QImage.Format.Format_ARGB32)
    x, y = next((x, y) for y in range(h) for x in range(w) if img.pixelColor(x, y).alpha() == 255)
    c = img.pixelColor(x, y)
    assert tuple(data[(y * w + x) * 4:(y * w + x) * 4 + 4]) == (255, c.red(), c.green(), c.blue())
    xml = panel.call(name, "/StatusNotifierItem", "org.freedesktop.DBus.Introspectable", "Introspect")[0]
    assert 'interface name="org.kde.StatusNotifierItem"' in xml and "NewStatus" in xml

    # a turn waits: NeedsAttention, with the new icon and tooltip announced
    panel.signals.clear()
    presence.set_state(_waiting_state(rec))
    assert panel.wait_signal("NewStatus").body == ("NeedsAttention",)
    panel.wait_signal("NewIcon")
    panel.wait_signal("NewToolTip")
    p = panel.props(name)
    assert p["Status"] == "NeedsAttention" and "1 interrupted turn waiting" in p["ToolTip"][2]
    assert p["IconPixmap"] == p["AttentionIconPixmap"]

    # nothing waits, but a problem stands: still NeedsAttention; a missing home alone is not one
    presence.set_state(ViewState(problems=(Problem("marker store is corrupt"),)))
    assert panel.props(name)["Status"] == "NeedsAttention"
    presence.set_state(ViewState(problems=(Problem("home does not exist yet", attention=False),)))
    assert panel.wait_signal("NewStatus").body == ("Active",)
    assert panel.props(name)["Status"] == "Active"

    # left click = Activate: the turns window opens (TrayPresence.clicked)
    with qtbot.waitSignal(presence.clicked, timeout=3000):
        panel.call(name, "/StatusNotifierItem", ITEM, "Activate", "ii", (10, 10))

    presence.hide()  # quit: the item leaves the bus, the watcher's NameOwnerChanged drops it
    qtbot.waitUntil(lambda: not panel.has_owner(name), timeout=3000)


def test_watcher_restart_registers_the_item_again(qtbot, monkeypatch, watcher, panel) -> None:
    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    presence = TrayPresence(QMenu())
    with qtbot.waitSignal(presence.shown, timeout=5000):
        presence.start()
    qtbot.waitUntil(lambda: len(watcher.lines) == 1)
    watcher.stop()  # the panel crashed …
    again = Watcher()  # … and came back: it knows no items until they register again
    try:
        qtbot.waitUntil(lambda: len(again.lines) == 1, timeout=5000)
        assert again.lines[0]["registered"] == watcher.lines[0]["registered"]
        assert presence.backend == "sni" and not presence.findChildren(QSystemTrayIcon)
    finally:
        presence.hide()
        again.stop()


def test_refused_registration_falls_back_to_one_qt_icon(qtbot, monkeypatch, bus, panel) -> None:
    from hermes_tray.app.tray_icon import TrayPresence

    refusing = Watcher("--refuse")
    try:
        monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
        presence = TrayPresence(QMenu())
        with qtbot.waitSignal(presence.shown, timeout=5000):
            presence.start()
        assert presence.backend == "qt" and isinstance(presence.icon, QSystemTrayIcon)
        assert len(presence.findChildren(QSystemTrayIcon)) == 1
        qtbot.waitUntil(lambda: len(refusing.lines) == 1)
        qtbot.waitUntil(lambda: not panel.has_owner(refusing.lines[0]["refused"]), timeout=3000)  # our item left
        presence.hide()
    finally:
        refusing.stop()


def test_a_watcher_that_never_answers_gets_the_qt_icon_instead(qtbot, monkeypatch, bus, panel) -> None:
    from hermes_tray.app.sni import item
    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(item, "REGISTER_TIMEOUT_MS", 300)  # a hung panel, found out sooner than 3 s
    hung = Watcher("--silent")
    try:
        monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
        presence = TrayPresence(QMenu())
        presence.start()
        assert presence.registering and presence.icon is None
        with qtbot.waitSignal(presence.shown, timeout=3000):
            pass
        assert presence.backend == "qt" and len(presence.findChildren(QSystemTrayIcon)) == 1
        qtbot.waitUntil(lambda: len(hung.lines) == 1)
        assert not panel.has_owner(hung.lines[0]["ignored"])  # our item left the bus: never two icons
        presence.hide()
    finally:
        hung.stop()


def test_no_watcher_means_qt_icon_at_once(qtbot, monkeypatch, bus) -> None:
    from hermes_tray.app.tray_icon import TrayPresence

    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    presence = TrayPresence(QMenu())
    with qtbot.waitSignal(presence.shown, timeout=1000):
        presence.start()
    assert presence.backend == "qt" and len(presence.findChildren(QSystemTrayIcon)) == 1
    presence.hide()


def test_an_entry_freed_on_another_thread_starts_no_timer_there(qtbot, qtlog, bus, panel) -> None:
    """Issue 25.10. Before: Quit on an SNI desktop printed "QObject::startTimer: Timers cannot be started from
    another thread": Python's garbage collector, run by a resume's worker thread, freed an old menu entry
    there, and the exporter's filter started its timer on that thread. Now the change is handed to its
    own thread, and the panel still hears LayoutUpdated."""
    import gc

    from PySide6.QtGui import QAction

    from hermes_tray.app.sni.bus import SessionLink
    from hermes_tray.app.sni.dbusmenu import MenuExporter

    menu = QMenu()
    menu.addAction("Quit")
    doomed = [QAction("Resume")]  # owned by Python, as an entry the garbage collector can free
    menu.addAction(doomed[0])
    link = SessionLink()
    exporter = MenuExporter(menu, link, "/MenuBar")
    try:
        qtbot.wait(50)  # the exporter's own start-up changes are sent first
        before = exporter.revision
        panel.signals.clear()

        def free_elsewhere() -> None:
            doomed.clear()  # the last reference: the C++ QAction is deleted on this thread
            gc.collect()

        t = threading.Thread(target=free_elsewhere, name="resume-worker")
        t.start()
        t.join(5)
        updated = panel.wait_signal("LayoutUpdated", pred=lambda m: m.body[0] == exporter.revision)
        assert exporter.revision > before and updated.body[0] == exporter.revision
        assert [a.text() for a in menu.actions()] == ["Quit"]
        assert not [r for r in qtlog.records if "startTimer" in r.message], [r.message for r in qtlog.records]
        _revision, root = panel.call(link.unique_name, "/MenuBar", MENU, "GetLayout", "iias", (0, -1, []))
        assert _labels(root) == ["Quit"]
    finally:
        exporter.close()
        link.close()
