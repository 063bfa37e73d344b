"""Tray settings: defaults, validation with clear messages, private atomic writes."""

from __future__ import annotations

import stat

import pytest

from hermes_tray_core.stores import paths
from hermes_tray_core.stores.settings import (
    SettingsError,
    TraySettings,
    load_settings,
    parse_value,
    update_settings,
)


@pytest.fixture()
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_CONFIG_DIR", str(tmp_path / "cfg"))
    return tmp_path / "cfg" / "config.toml"


def test_missing_file_gives_defaults(cfg):
    s = load_settings()
    assert (s.mode, s.notify, s.show_prompts, s.homes, s.hermes_command) == ("ask", True, True, (), None)
    assert paths.settings_file() == cfg


def test_full_file_round_trips(cfg):
    cfg.parent.mkdir()
    cfg.write_text('mode = "auto"\nnotify = false\nshow_prompts = false\nhomes = ["~/h1", "/srv/h2"]\n'
                   'hermes_command = ["/opt/hermes/bin/hermes"]\n')
    s = load_settings()
    assert s.mode == "auto" and s.notify is False and s.show_prompts is False
    assert s.homes == ("~/h1", "/srv/h2")
    assert s.home_paths()[0].is_absolute()
    assert s.hermes_command == ("/opt/hermes/bin/hermes",)


@pytest.mark.parametrize(
    "text, words",
    [
        ('mode = "sometimes"\n', ["mode", "ask, auto, list", "'sometimes'"]),
        ('notify = "yes"\n', ["notify", "true or false"]),
        ('show_prompts = 1\n', ["show_prompts", "true or false"]),
        ('homes = "/one/home"\n', ["homes", "list"]),
        ('hermes_command = []\n', ["hermes_command", "empty"]),
        ('hermes_command = [""]\n', ["hermes_command", "non-empty"]),
        ('moed = "ask"\n', ["moed", "unknown setting", "mode, notify"]),
        ('mode = \n', ["not valid TOML"]),
    ],
)
def test_invalid_files_name_key_and_allowed_values(cfg, text, words):
    cfg.parent.mkdir()
    cfg.write_text(text)
    with pytest.raises(SettingsError) as info:
        load_settings()
    for w in words:
        assert w in str(info.value)
    assert str(cfg) in str(info.value)


def test_update_is_private_and_keeps_other_keys(cfg):
    update_settings({"homes": ["/a"]})
    s = update_settings({"mode": "list"})
    assert s.mode == "list" and s.homes == ("/a",)
    assert load_settings() == s
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert stat.S_IMODE(cfg.parent.stat().st_mode) == 0o700


def test_rejected_update_leaves_file_untouched(cfg):
    update_settings({"mode": "auto"})
    before = cfg.read_bytes()
    with pytest.raises(SettingsError, match="mode"):
        update_settings({"mode": "loud"})
    assert cfg.read_bytes() == before


def test_parse_value_from_command_line():
    assert parse_value("notify", "false") is False
    assert parse_value("show_prompts", "on") is True
    assert parse_value("mode", " auto ") == "auto"
    assert parse_value("hermes_command", "uv run 'hermes agent'") == ["uv", "run", "hermes agent"]
    with pytest.raises(SettingsError, match="notify: must be true or false"):
        parse_value("notify", "maybe")
    with pytest.raises(SettingsError, match="unknown setting"):
        parse_value("colour", "red")


def test_defaults_dataclass_is_equal_regardless_of_path(tmp_path):
    assert TraySettings(path=tmp_path) == TraySettings()


def test_hermes_command_can_be_unset(cfg):
    update_settings({"hermes_command": ["/opt/h/bin/python"], "mode": "off"})
    s = update_settings({"hermes_command": None})
    assert s.hermes_command is None and s.mode == "list"
    assert "hermes_command" not in cfg.read_text()


def test_mode_off_is_read_as_list(cfg):
    """"off" was the older name of "Only list them": a file or a `config set` saying it still works."""
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('mode = "off"\n')
    assert load_settings().mode == "list"
    assert update_settings({"mode": "off"}).mode == "list"
    assert 'mode = "list"' in cfg.read_text()


def test_setting_a_bad_value_fixes_it_other_bad_keys_still_refuse(cfg):
    cfg.parent.mkdir()
    cfg.write_text('mode = "loud"\nnotify = false\n')
    s = update_settings({"mode": "auto"})
    assert (s.mode, s.notify) == ("auto", False)
    cfg.write_text('mode = "loud"\ncolour = "red"\n')
    with pytest.raises(SettingsError, match="colour"):
        update_settings({"mode": "auto"})
    assert "loud" in cfg.read_text()
