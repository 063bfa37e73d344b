"""Home discovery: env / platform default, profiles, extra homes, --home, WebUI journal dirs."""

from __future__ import annotations

import pytest

from hermes_tray_core.hermes.homes import default_root, discover_homes


@pytest.fixture()
def root(tmp_path):
    r = tmp_path / "hermes"
    for name in ("work", "side-2", "Bad_Name", "-dash", "x" * 65):
        (r / "profiles" / name).mkdir(parents=True)
    (r / "profiles" / "afile").write_text("not a dir")
    return r


def test_hermes_home_and_valid_profiles_only(root):
    homes = discover_homes(env={"HERMES_HOME": str(root)})
    assert [(h.path, h.profile, h.origin) for h in homes] == [
        (root, "default", "env"),
        (root / "profiles" / "side-2", "side-2", "profile"),
        (root / "profiles" / "work", "work", "profile"),
    ]
    assert homes[0].marker_file == root / "desktop" / "interrupted_turns.json"
    assert homes[1].webui_journal_dir == root / "profiles" / "side-2" / "webui" / "sessions" / "_turn_journal"


def test_platform_default_when_no_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    path, origin = default_root({})
    assert origin == "default"
    assert path == tmp_path / ".hermes"
    homes = discover_homes(env={})
    assert homes[0].path == tmp_path / ".hermes"  # listed even before Hermes created it


def test_webui_state_dir_env_applies_to_the_root_home(root, tmp_path):
    state = tmp_path / "webui-state"
    homes = discover_homes(env={"HERMES_HOME": str(root), "HERMES_WEBUI_STATE_DIR": str(state)})
    assert homes[0].webui_journal_dir == state / "sessions" / "_turn_journal"
    assert homes[1].webui_journal_dir.is_relative_to(root / "profiles")


def test_extra_homes_from_settings_are_added_deduplicated(root, tmp_path):
    other = tmp_path / "other"
    (other / "profiles" / "p1").mkdir(parents=True)
    homes = discover_homes(env={"HERMES_HOME": str(root)}, extra=[str(other), str(root), str(root / "profiles" / "work")])
    paths = [h.path for h in homes]
    assert paths.count(root) == 1 and paths.count(root / "profiles" / "work") == 1
    assert other in paths and other / "profiles" / "p1" in paths
    assert next(h for h in homes if h.path == other).origin == "settings"


def test_explicit_homes_replace_discovery(root, tmp_path):
    one = tmp_path / "one"
    homes = discover_homes(explicit=[str(one), str(root / "profiles" / "work")], env={"HERMES_HOME": str(root)})
    assert [(h.path, h.profile, h.origin) for h in homes] == [
        (one, "default", "cli"),
        (root / "profiles" / "work", "work", "cli"),
    ]


def test_a_profile_hermes_home_also_watches_its_root_and_sibling_profiles(root, tmp_path):
    work = root / "profiles" / "work"
    state = tmp_path / "webui-state"
    homes = discover_homes(env={"HERMES_HOME": str(work), "HERMES_WEBUI_STATE_DIR": str(state)})
    assert [(h.path, h.profile, h.origin) for h in homes] == [
        (work, "work", "env"),
        (root, "default", "root"),
        (root / "profiles" / "side-2", "side-2", "profile"),
    ]
    # The WebUI state dir of the environment belongs to the home the environment points at.
    assert homes[0].webui_journal_dir == state / "sessions" / "_turn_journal"
    assert homes[1].webui_journal_dir == root / "webui" / "sessions" / "_turn_journal"
    # A profile HERMES_HOME that does not exist yet still brings in its root.
    new = root / "profiles" / "new-one"
    assert [h.path for h in discover_homes(env={"HERMES_HOME": str(new)})][:2] == [new, root]


def test_a_profile_hermes_home_root_is_scanned(root, tmp_path, monkeypatch):
    import json
    import time

    from hermes_tray_core.scanning.scanner import scan

    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "tray-state"))
    entry = {"attempts": 0, "prompt": "p", "started_at": time.time(), "auto_continue": True}
    for home, key in ((root, "in-root"), (root / "profiles" / "side-2", "in-sibling")):
        (home / "desktop").mkdir(parents=True, exist_ok=True)
        (home / "desktop" / "interrupted_turns.json").write_text(json.dumps({key: entry}))
    result = scan(discover_homes(env={"HERMES_HOME": str(root / "profiles" / "work")}))
    assert {t.session_key for t in result.turns} == {"in-root", "in-sibling"}
