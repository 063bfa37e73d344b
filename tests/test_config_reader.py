"""The tray reads a changed config.yaml in a short-lived process of its own (``hermes-tray config show
--json``), so PyYAML never stays resident in the long-running tray; what it reads must be exactly what
the engine reads in-process (Hermes' coercions, warnings, a file Hermes cannot parse)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_tray.engine import read_configs_in_child
from hermes_tray_core.backend_config import read_backend_config
from hermes_tray_core.homes import discover_homes
from hermes_tray_core.scanner import Scanner, config_problems
from tests.test_backend_config import COERCIONS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_managed_overlay(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(tmp_path / "no-managed-scope"))  # never the machine's /etc/hermes


def _homes(tmp_path: Path) -> list[Path]:
    texts = [f"desktop:\n  auto_continue: {block}\n" for block, _expected, _warned in COERCIONS]
    texts += ["desktop:\n  auto_continue: [unclosed\n", "# nothing about auto-continue\nmodel: {provider: x}\n"]
    homes = []
    for i, text in enumerate(texts):
        home = tmp_path / f"h{i:02d}"
        home.mkdir()
        (home / "config.yaml").write_text(text, encoding="utf-8")
        homes.append(home)
    return homes


def test_the_reader_process_reads_every_value_exactly_as_the_engine_does(tmp_path) -> None:
    homes = [discover_homes(explicit=[str(h)])[0].path for h in _homes(tmp_path)]
    got = read_configs_in_child(homes, timeout=60)  # one process for all of them (no time limit under test load)
    assert set(got) == set(homes)
    for home in homes:
        cfg = read_backend_config(home)
        assert got[home] == (cfg.auto_continue, config_problems(cfg.warnings, cfg.error)), home
        # the same types too (20 stays 20, not 20.0): the scan cache is shared with `status --json`
        assert [type(v) for v in got[home][0]] == [type(v) for v in cfg.auto_continue], home


def test_a_failing_reader_process_leaves_the_reading_to_the_scanner(tmp_path, monkeypatch) -> None:
    (home,) = _homes(tmp_path)[-2:-1]  # the unparseable one
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    assert read_configs_in_child([home]) == {}
    report = Scanner(discover_homes(explicit=[str(home)]), config_reader=read_configs_in_child).scan().homes[0]
    assert any("falls back to the defaults" in p for p in report.problems)  # read in-process instead


def test_a_file_that_changes_after_it_was_handed_over_is_read_again(tmp_path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    cfg = home / "config.yaml"
    cfg.write_text("desktop:\n  auto_continue:\n    max_attempts: 3\n")

    def reader(paths):
        answer = read_configs_in_child(paths, timeout=60)
        cfg.write_text("desktop:\n  auto_continue:\n    max_attempts: 5\n")  # edited right after it was read
        st = cfg.stat()
        os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        return answer

    report = Scanner(discover_homes(explicit=[str(home)]), config_reader=reader).scan().homes[0]
    assert report.config.max_attempts == 5  # the edit, not the answer about the file before it


def test_the_tray_engine_never_loads_pyyaml(tmp_path) -> None:
    """The engine the tray runs (first scan, cache empty): config values right, PyYAML never imported."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("desktop:\n  auto_continue:\n    enabled: off\n    max_attempts: 4\n")
    script = textwrap.dedent(f"""
        import sys
        from hermes_tray.engine import CoreEngine
        engine = CoreEngine(explicit_homes=[{str(home)!r}])
        engine.scan(engine.homes())
        cfg = engine._scanner.scan().homes[0].config
        print("VALUES", cfg.enabled, cfg.max_attempts)
        print("YAML", sorted(m for m in sys.modules if m == "yaml" or m.startswith("yaml.")))
    """)
    env = {**os.environ, "HERMES_TRAY_CACHE_DIR": str(tmp_path / "cache"), "HERMES_MANAGED_DIR": str(tmp_path / "m")}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "VALUES False 4" in proc.stdout
    assert "YAML []" in proc.stdout
