"""config.yaml: Hermes' defaults and coercions, minimal round-trip edits, refusal on bad YAML."""

from __future__ import annotations

import os
import stat

import pytest

from hermes_tray_core.deciding.policy import MAX_FRESHNESS_MINUTES, AutoContinueConfig
from hermes_tray_core.hermes.config import read_backend_config
from hermes_tray_core.hermes.config_edit import BackendConfigError, parse_value, write_auto_continue
from hermes_tray_core.numbers import INT_CAP

COMMENTED = """\
# Hermes configuration — hand-edited, keep my notes!
model:
  provider: custom   # local server
  base_url: "http://127.0.0.1:8080/v1"
  default: 'qwen'

desktop:
    # how the desktop app behaves
    theme: dark
    auto_continue:
        enabled: true      # flip to stop auto-continue
        freshness_minutes: 15
    shortcuts: [a, b]

toolsets:
  - web
  - terminal   # needs docker
"""


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(tmp_path / "no-managed-scope"))  # never the machine's /etc/hermes


def home_with(tmp_path, text: str | None, name="home"):
    home = tmp_path / name
    home.mkdir()
    if text is not None:
        (home / "config.yaml").write_text(text, encoding="utf-8", newline="")
    return home


def test_missing_file_and_missing_block_give_hermes_defaults(tmp_path):
    assert read_backend_config(home_with(tmp_path, None, "a")).auto_continue == AutoContinueConfig(True, 15, 2)
    cfg = read_backend_config(home_with(tmp_path, "model: {provider: x}\n", "b"))
    assert cfg.exists and cfg.auto_continue == AutoContinueConfig(True, 15, 2) and not cfg.warnings


# Hermes' coercions (tui_gateway ``_auto_continue_config``), stated in words — the table below is their
# consequence, value by value:
#   enabled            absent/null -> true; a bool as is; a string -> true iff strip().lower() is one of
#                      "1", "true", "yes", "on"; anything else -> Python truth (0 false, 2 true, [] false).
#   freshness_minutes  float(value) (absent -> 15; TypeError/ValueError -> 15), then max(0, .) (NaN -> 0);
#                      an int too large for a float raises (OverflowError is not caught).
#   max_attempts       int(value) (TypeError/ValueError -> 2), then a result < 0 -> 2; int(inf) raises.
# Where Hermes raises it cannot auto-continue anything: the tray reads that home as disabled.
BIG = "1" + "0" * 400
INF = MAX_FRESHNESS_MINUTES
COERCIONS = [
    # (block, (enabled, freshness_minutes, max_attempts), warning words or None)
    ("{enabled: 0}", (False, 15, 2), "reads as false"),
    ("{enabled: '0'}", (False, 15, 2), "reads as false"),
    ("{enabled: ''}", (False, 15, 2), "reads as false"),
    ("{enabled: y}", (False, 15, 2), "reads as false"),  # PyYAML: 'y' is a string, not in Hermes' set
    ("{enabled: ' Yes '}", (True, 15, 2), "reads as true"),
    ("{enabled: '1'}", (True, 15, 2), "reads as true"),
    ("{enabled: 'on'}", (True, 15, 2), "reads as true"),
    ("{enabled: 'off'}", (False, 15, 2), "reads as false"),
    ("{enabled: maybe}", (False, 15, 2), "reads as false"),
    ("{enabled: 2}", (True, 15, 2), "reads as true"),
    ("{enabled: 0.0}", (False, 15, 2), "reads as false"),
    ("{enabled: .nan}", (True, 15, 2), "reads as true"),
    ("{enabled: []}", (False, 15, 2), "reads as false"),
    ("{enabled: [0]}", (True, 15, 2), "reads as true"),
    ("{enabled: 2024-01-01}", (True, 15, 2), "reads as true"),
    ("{enabled: null}", (True, 15, 2), None),
    ("{enabled: no}", (False, 15, 2), None),  # YAML 1.1 bool
    ("{enabled: false, freshness_minutes: 120, max_attempts: 5}", (False, 120, 5), None),
    ("{freshness_minutes: 0}", (True, 0, 2), "every interrupted turn is stale"),
    ("{freshness_minutes: -5}", (True, 0, 2), "every interrupted turn is stale"),
    ("{freshness_minutes: .nan}", (True, 0, 2), "every interrupted turn is stale"),
    ("{freshness_minutes: '-inf'}", (True, 0, 2), "every interrupted turn is stale"),
    ("{freshness_minutes: .inf}", (True, INF, 2), None),
    ("{freshness_minutes: 1.0e+400}", (True, INF, 2), None),
    ("{freshness_minutes: true}", (True, 1, 2), None),
    ("{freshness_minutes: '30'}", (True, 30, 2), None),
    ("{freshness_minutes: ' 7.5 '}", (True, 7.5, 2), None),
    ("{freshness_minutes: '1_000'}", (True, 1000, 2), None),
    ("{freshness_minutes: null}", (True, 15, 2), "not a number"),
    ("{freshness_minutes: soon}", (True, 15, 2), "not a number"),
    ("{freshness_minutes: [1]}", (True, 15, 2), "not a number"),
    (f"{{freshness_minutes: {BIG}}}", (False, 15, 2), "cannot auto-continue"),
    ("{max_attempts: 3.7}", (True, 15, 3), "reads as 3"),
    ("{max_attempts: '3.0'}", (True, 15, 2), "reads as 2"),
    ("{max_attempts: true}", (True, 15, 1), "reads as 1"),
    ("{max_attempts: false}", (True, 15, 0), "reads as 0"),
    ("{max_attempts: '3'}", (True, 15, 3), "reads as 3"),
    ("{max_attempts: ' 4 '}", (True, 15, 4), "reads as 4"),
    ("{max_attempts: -1}", (True, 15, 2), "reads as 2"),
    ("{max_attempts: '-1'}", (True, 15, 2), "reads as 2"),
    ("{max_attempts: -0.5}", (True, 15, 0), "reads as 0"),
    ("{max_attempts: .nan}", (True, 15, 2), "reads as 2"),
    ("{max_attempts: null}", (True, 15, 2), None),
    ("{max_attempts: 0}", (True, 15, 0), None),
    (f"{{max_attempts: {BIG}}}", (True, 15, INT_CAP), None),
    ("{max_attempts: .inf}", (False, 15, 2), "cannot auto-continue"),
    ("[1, 2]", (True, 15, 2), "not a mapping"),
]


@pytest.mark.parametrize("block, expected, warned", COERCIONS, ids=[c[0][:40] for c in COERCIONS])
def test_every_value_reads_as_hermes_reads_it(tmp_path, block, expected, warned):
    cfg = read_backend_config(home_with(tmp_path, f"desktop:\n  auto_continue: {block}\n"))
    ac = cfg.auto_continue
    assert (ac.enabled, ac.freshness_minutes, ac.max_attempts) == expected, cfg.warnings
    if warned is None:
        assert not cfg.warnings
    else:
        assert len(cfg.warnings) == 1 and warned in cfg.warnings[0]
        assert len(cfg.warnings[0]) < 200


def test_unparseable_file_reads_as_defaults_with_error(tmp_path):
    cfg = read_backend_config(home_with(tmp_path, "desktop:\n  auto_continue: [unclosed\n"))
    assert cfg.auto_continue == AutoContinueConfig()
    assert cfg.error and "not valid YAML" in cfg.error and "line" in cfg.error


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    import difflib

    diff = [d for d in difflib.ndiff(before.splitlines(), after.splitlines()) if d[:1] in "+-"]
    return diff


def test_edit_changes_only_the_edited_lines(tmp_path):
    home = home_with(tmp_path, COMMENTED)
    os.chmod(home / "config.yaml", 0o640)
    cfg = write_auto_continue(home, enabled=False, freshness_minutes=45)
    after = (home / "config.yaml").read_text(encoding="utf-8")
    assert cfg.auto_continue == AutoContinueConfig(False, 45, 2)
    assert _changed_lines(COMMENTED, after) == [
        "-         enabled: true      # flip to stop auto-continue",
        "+         enabled: false      # flip to stop auto-continue",
        "-         freshness_minutes: 15",
        "+         freshness_minutes: 45",
    ]
    # Everything else is byte-for-byte the same.
    assert after.replace("enabled: false ", "enabled: true ").replace("minutes: 45", "minutes: 15") == COMMENTED
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o640  # the user's mode is kept
    assert read_backend_config(home).auto_continue == AutoContinueConfig(False, 45, 2)


def test_new_key_is_inserted_inside_the_existing_block(tmp_path):
    home = home_with(tmp_path, COMMENTED)
    write_auto_continue(home, max_attempts=4)
    after = (home / "config.yaml").read_text()
    assert _changed_lines(COMMENTED, after) == ["+         max_attempts: 4"]
    assert read_backend_config(home).auto_continue.max_attempts == 4


def test_missing_block_is_added_under_existing_desktop(tmp_path):
    text = "# top\ndesktop:\n  theme: dark  # mine\nother: 1\n"
    home = home_with(tmp_path, text)
    write_auto_continue(home, enabled=False)
    after = (home / "config.yaml").read_text()
    assert _changed_lines(text, after) == ["+   auto_continue:", "+     enabled: false"]
    assert read_backend_config(home).auto_continue.enabled is False


def test_missing_file_is_created_private(tmp_path):
    home = home_with(tmp_path, None)
    write_auto_continue(home, enabled=False)
    path = home / "config.yaml"
    assert read_backend_config(home).auto_continue.enabled is False
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_crlf_and_comments_only_files(tmp_path):
    crlf = "# windows\r\ndesktop:\r\n  auto_continue:\r\n    enabled: true\r\n"
    home = home_with(tmp_path, crlf, "crlf")
    write_auto_continue(home, enabled=False)
    assert (home / "config.yaml").read_bytes() == crlf.replace("true", "false").encode()
    only_comments = "# nothing configured yet\n"
    home2 = home_with(tmp_path, only_comments, "comments")
    write_auto_continue(home2, max_attempts=3)
    after = (home2 / "config.yaml").read_text()
    assert after.startswith(only_comments)
    assert read_backend_config(home2).auto_continue.max_attempts == 3


def test_flow_style_block_is_edited_by_the_round_trip_fallback(tmp_path):
    text = "# keep\nmodel: {provider: x}\ndesktop: {auto_continue: {enabled: true}}\n"
    home = home_with(tmp_path, text)
    write_auto_continue(home, enabled=False)
    after = (home / "config.yaml").read_text()
    assert "# keep" in after and "provider: x" in after
    assert read_backend_config(home).auto_continue.enabled is False


def test_unchanged_value_does_not_rewrite(tmp_path):
    home = home_with(tmp_path, COMMENTED)
    before = os.stat(home / "config.yaml")
    write_auto_continue(home, enabled=True)
    assert os.stat(home / "config.yaml").st_ino == before.st_ino


@pytest.mark.parametrize(
    "text, words",
    [
        ("desktop:\n  auto_continue: [unclosed\n", "not valid YAML"),
        ("desktop: [1, 2]\n", "desktop is not a mapping"),
        ("- just\n- a list\n", "not a mapping"),
        ("desktop:\n  auto_continue: off\n", "auto_continue is not a mapping"),
    ],
)
def test_refuses_and_leaves_file_untouched(tmp_path, text, words):
    home = home_with(tmp_path, text)
    with pytest.raises(BackendConfigError, match=words):
        write_auto_continue(home, enabled=False)
    assert (home / "config.yaml").read_text() == text
    # No temp-file litter; config.yaml.lock is Hermes' own lock file, which newer Hermes keeps there as well.
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml", "config.yaml.lock"]


BROKEN_ATTEMPTS = "desktop:\n  auto_continue:\n    enabled: true\n    freshness_minutes: 30\n    max_attempts: .inf\n"


@pytest.mark.parametrize("change", [{"freshness_minutes": 1}, {"freshness_minutes": 30}, {"max_attempts": 3}])
def test_a_change_hermes_would_ignore_is_refused_and_says_why(tmp_path, change):
    """With ``max_attempts: .inf`` Hermes fails reading the block (int() overflows), so a new freshness would
    not take effect: refused, with the reason, the file untouched — never reported as done. Writing a good
    ``max_attempts`` over the broken one is the fix, and works."""
    home = home_with(tmp_path, BROKEN_ATTEMPTS)
    if "max_attempts" in change:
        out = write_auto_continue(home, **change)
        assert out.auto_continue.max_attempts == 3 and out.auto_continue.enabled is True
        assert read_backend_config(home).auto_continue.max_attempts == 3
        return
    with pytest.raises(BackendConfigError, match=r"would not use desktop\.auto_continue\.freshness_minutes.*"
                                                 r"max_attempts: inf.*fix that first"):
        write_auto_continue(home, **change)
    assert (home / "config.yaml").read_text() == BROKEN_ATTEMPTS


def test_disabling_works_even_where_hermes_cannot_read_the_block(tmp_path):
    home = home_with(tmp_path, BROKEN_ATTEMPTS)
    out = write_auto_continue(home, enabled=False)
    assert out.auto_continue.enabled is False
    assert "enabled: false" in (home / "config.yaml").read_text()


def test_symlinked_config_is_refused(tmp_path):
    home = home_with(tmp_path, None)
    real = tmp_path / "dotfiles.yaml"
    real.write_text("desktop: {}\n")
    (home / "config.yaml").symlink_to(real)
    with pytest.raises(BackendConfigError, match="symlink"):
        write_auto_continue(home, enabled=False)
    assert real.read_text() == "desktop: {}\n"


def test_bad_values_are_refused(tmp_path):
    home = home_with(tmp_path, COMMENTED)
    for kw in ({"freshness_minutes": 0}, {"max_attempts": -1}, {"enabled": "no"}, {"max_attempts": 1.5}):
        with pytest.raises(BackendConfigError):
            write_auto_continue(home, **kw)
    assert (home / "config.yaml").read_text() == COMMENTED
    assert parse_value("enabled", "off") is False
    assert parse_value("freshness_minutes", "90") == 90
    with pytest.raises(BackendConfigError, match="whole number"):
        parse_value("max_attempts", "two")


BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
) + "desktop:\n  auto_continue:\n    enabled: *i\n"


def test_yaml_alias_bomb_is_never_expanded(tmp_path):
    home = home_with(tmp_path, BOMB)
    cfg = read_backend_config(home)
    assert cfg.auto_continue.enabled is True and len(" ".join(cfg.warnings)) < 300
    assert "a list reads as true" in cfg.warnings[0]
    with pytest.raises(BackendConfigError, match="too many values"):
        write_auto_continue(home, enabled=False)
    assert (home / "config.yaml").read_text() == BOMB


# ── read exactly as Hermes does (PyYAML, YAML 1.1), write so that Hermes reads back what was meant ──

HERMES_READS = [
    # YAML text of the value, what Hermes' yaml.safe_load gives (ruamel.yaml / YAML 1.2 differs on most)
    ("enabled: off", {"enabled": False}),
    ("enabled: no", {"enabled": False}),
    ("enabled: On", {"enabled": True}),
    ("freshness_minutes: 1_0", {"freshness_minutes": 10}),
    ("max_attempts: 010", {"max_attempts": 8}),  # YAML 1.1 octal; ruamel.yaml reads 10
    ("max_attempts: 0o10", {"max_attempts": "0o10"}),  # a string in YAML 1.1; ruamel.yaml reads 8
    ("freshness_minutes: 1:30", {"freshness_minutes": 90}),  # sexagesimal; a string in YAML 1.2
    ("max_attempts: 09", {"max_attempts": "09"}),  # not an int in YAML 1.1
    ("max_attempts: ~", {"max_attempts": None}),
    ("max_attempts: 3\n    max_attempts: 1", {"max_attempts": 1}),  # duplicate key: the last wins, no error
]


@pytest.mark.parametrize("line, hermes", HERMES_READS)
def test_values_are_read_exactly_as_hermes_reads_them(tmp_path, line, hermes):
    import yaml

    text = f"desktop:\n  auto_continue:\n    {line}\n"
    block = yaml.safe_load(text)["desktop"]["auto_continue"]  # Hermes 0.19.0's own call
    assert block == hermes and [type(v) for v in block.values()] == [type(v) for v in hermes.values()]
    cfg = read_backend_config(home_with(tmp_path, text))
    assert cfg.error is None
    expected, _warnings = __import__("hermes_tray_core.hermes.config", fromlist=["x"]).coerce_auto_continue(block)
    assert cfg.auto_continue == expected


def test_disagreements_with_yaml_1_2_resolve_the_hermes_way(tmp_path):
    cfg = read_backend_config(home_with(tmp_path, "desktop:\n  auto_continue:\n    max_attempts: 010\n"
                                                  "    freshness_minutes: 1:30\n    enabled: off\n"))
    assert cfg.auto_continue == AutoContinueConfig(False, 90, 8) and not cfg.warnings
    cfg = read_backend_config(home_with(tmp_path, "desktop:\n  auto_continue:\n    max_attempts: 0o10\n", "b"))
    assert cfg.auto_continue.max_attempts == 2 and "max_attempts" in cfg.warnings[0]


@pytest.mark.parametrize("line, key, value", [
    ("max_attempts: 010", "max_attempts", 10),  # Hermes reads 8: setting 10 is a change, not a no-op
    ("enabled: off", "enabled", True),
    ("enabled: 'yes'", "enabled", False),
    ("freshness_minutes: 1:30", "freshness_minutes", 90),  # Hermes reads 90 already: left as it is
    ("freshness_minutes: 15", "freshness_minutes", 0.00001),  # 1e-05 would be a string in YAML 1.1
    ("freshness_minutes: 15", "freshness_minutes", 2.5e-07),
    ("freshness_minutes: 15", "freshness_minutes", 2.5),
])
def test_after_a_write_pyyaml_reads_back_the_intended_values(tmp_path, line, key, value):
    import yaml

    text = f"# keep me\nother: 010\ndesktop:\n  auto_continue:\n    {line}  # note\n"
    home = home_with(tmp_path, text)
    before = yaml.safe_load(text)
    cfg = write_auto_continue(home, **{key: value})
    after_text = (home / "config.yaml").read_text()
    after = yaml.safe_load(after_text)
    block = after["desktop"]["auto_continue"]
    assert block[key] == value and type(block[key]) is type(value), after_text
    assert after["other"] == before["other"] == 8  # everything else reads as before
    assert "# keep me" in after_text and "# note" in after_text
    assert getattr(cfg.auto_continue, key) == value
    assert getattr(read_backend_config(home).auto_continue, key) == value


def test_a_file_hermes_reads_but_the_editor_cannot_is_left_unchanged(tmp_path):
    text = "desktop:\n  auto_continue:\n    enabled: true\n  auto_continue:\n    enabled: false\n"
    home = home_with(tmp_path, text)
    assert read_backend_config(home).auto_continue.enabled is False  # Hermes: the last key wins
    with pytest.raises(BackendConfigError, match="edited safely"):
        write_auto_continue(home, enabled=True)
    assert (home / "config.yaml").read_text() == text


def test_reading_never_imports_ruamel(tmp_path):
    import subprocess
    import sys

    home = home_with(tmp_path, COMMENTED)
    code = ("import sys; from hermes_tray_core.hermes.config import read_backend_config; "
            f"c = read_backend_config({str(home)!r}); assert c.auto_continue.enabled is True; "
            "print('ruamel.yaml' in sys.modules, 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]
