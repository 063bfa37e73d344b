"""Config parity against the real peer: every table value and every managed-overlay case is read by the
installed hermes-agent 0.19.0 itself — its gateway's ``_load_cfg`` (PyYAML + the managed overlay of
``hermes_cli/managed_scope.py``), its ``utils.is_truthy_value`` and its ``_coerce_int_config_value`` —
composed as Hermes' ``_auto_continue_config`` composes them (0.19.0 predates that function; its
composition is stated in tests/test_backend_config.py), and the tray must read the same.
"""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest

from hermes_tray_core.deciding.policy import MAX_FRESHNESS_MINUTES
from hermes_tray_core.hermes.config import read_backend_config
from hermes_tray_core.hermes.config_edit import ManagedValueError, write_auto_continue
from hermes_tray_core.numbers import INT_CAP
from tests.integration.hermes_venv import venv_path, venv_python
from tests.test_backend_config import COERCIONS

# Runs inside Hermes' own interpreter: real helpers only, plus the three-line composition.
ORACLE = r"""
import json, math, os, sys
import utils
from tui_gateway import server
out = []
for home, managed in json.load(sys.stdin):
    os.environ["HERMES_MANAGED_DIR"] = managed
    server._hermes_home = home
    try:
        cfg = server._load_cfg()
        desktop = cfg.get("desktop")
        block = desktop.get("auto_continue") if isinstance(desktop, dict) else None
        block = block if isinstance(block, dict) else {}
        enabled = utils.is_truthy_value(block.get("enabled"), default=True)
        try:
            minutes = float(block.get("freshness_minutes", 15))
        except (TypeError, ValueError):
            minutes = 15.0
        minutes = max(0.0, minutes)
        attempts = server._coerce_int_config_value(block.get("max_attempts"), 2, min_value=0)
        out.append([enabled, "inf" if math.isinf(minutes) else minutes, attempts if attempts < 2**53 else "big"])
    except Exception as exc:
        out.append(["raises", type(exc).__name__])
with open(sys.argv[1], "w") as f:  # the gateway module takes stdout for its JSON-RPC channel
    json.dump(out, f)
"""


def _hermes_python():
    py = venv_python(venv_path())
    if not py.exists():
        pytest.skip(f"the hermes-agent 0.19.0 venv is not at {venv_path()} (tests/integration/hermes_venv.py makes it)")
    return py


def hermes_reads(cases: list[tuple[str, str]], tmp_path) -> list[list]:
    """What real Hermes reads for each (home, managed dir)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["TRAY_TEST_FLAG"] = "off"
    result = tmp_path / "hermes-reads.json"
    subprocess.run([str(_hermes_python()), "-c", ORACLE, str(result)], input=json.dumps(cases), capture_output=True,
                   text=True, timeout=120, env=env, check=True)
    return json.loads(result.read_text())


def tray_reads(home, managed_dir) -> list:
    cfg = read_backend_config(home, env={"HERMES_MANAGED_DIR": str(managed_dir), "TRAY_TEST_FLAG": "off"})
    ac = cfg.auto_continue
    if not ac.enabled and any("cannot auto-continue" in w for w in cfg.warnings):
        return ["raises"]
    fresh = "inf" if ac.freshness_minutes == MAX_FRESHNESS_MINUTES else ac.freshness_minutes
    return [ac.enabled, fresh, "big" if ac.max_attempts >= INT_CAP else ac.max_attempts]


def _same(hermes: list, tray: list) -> bool:
    if hermes[0] == "raises":
        return tray == ["raises"]
    return (hermes[0] is tray[0] and hermes[2] == tray[2]
            and (hermes[1] == tray[1] or (isinstance(hermes[1], float) and math.isclose(hermes[1], tray[1]))))


def test_every_table_value_reads_as_real_hermes_reads_it(tmp_path):
    cases, homes = [], []
    nowhere = tmp_path / "no-managed"
    for i, (block, _expected, _warned) in enumerate(COERCIONS):
        home = tmp_path / f"h{i}"
        home.mkdir()
        (home / "config.yaml").write_text(f"desktop:\n  auto_continue: {block}\n")
        cases.append((str(home), str(nowhere)))
        homes.append((block, home))
    for (block, home), hermes in zip(homes, hermes_reads(cases, tmp_path), strict=True):
        tray = tray_reads(home, nowhere)
        assert _same(hermes, tray), f"{block}: Hermes {hermes}, tray {tray}"


USER = "desktop:\n  theme: dark\n  auto_continue:\n    enabled: true\n    freshness_minutes: 30\n"
MANAGED = [
    # (user config.yaml or None, managed config.yaml or None, the keys the overlay pins)
    (USER, "desktop:\n  auto_continue:\n    enabled: false\n", ("enabled",)),
    ("desktop:\n  auto_continue:\n    enabled: false\n", "desktop:\n  auto_continue:\n    max_attempts: 5\n",
     ("max_attempts",)),
    (USER, "desktop:\n  auto_continue: null\n", ()),
    (USER, "desktop:\n  auto_continue: off\n", ("enabled", "freshness_minutes", "max_attempts")),
    (USER, "desktop: 7\n", ("enabled", "freshness_minutes", "max_attempts")),
    (USER, "desktop:\n  auto_continue:\n    enabled: null\n", ("enabled",)),
    (USER, "desktop:\n  auto_continue:\n    enabled: ${TRAY_TEST_FLAG}\n", ("enabled",)),
    (USER, "desktop:\n  auto_continue:\n    freshness_minutes: [unclosed\n", ()),  # broken: ignored
    (USER, "model: {default: x}\n", ()),
    (None, "desktop:\n  auto_continue:\n    enabled: false\n    max_attempts: 0\n", ("enabled", "max_attempts")),
    ("desktop: [unclosed\n", "desktop:\n  auto_continue:\n    enabled: false\n", ()),  # Hermes drops both
    ("- a list\n", "desktop:\n  auto_continue:\n    enabled: false\n", ("enabled",)),
    (USER, None, ()),
]


def test_managed_overlay_wins_per_key_as_in_real_hermes(tmp_path):
    cases, rows = [], []
    for i, (user, managed, pinned) in enumerate(MANAGED):
        home, mdir = tmp_path / f"h{i}", tmp_path / f"m{i}"
        home.mkdir()
        mdir.mkdir()
        if user is not None:
            (home / "config.yaml").write_text(user)
        if managed is not None:
            (mdir / "config.yaml").write_text(managed)
        cases.append((str(home), str(mdir)))
        rows.append((home, mdir, pinned, user, managed))
    for (home, mdir, pinned, user, managed), hermes in zip(rows, hermes_reads(cases, tmp_path), strict=True):
        tray = tray_reads(home, mdir)
        assert _same(hermes, tray), f"user {user!r} managed {managed!r}: Hermes {hermes}, tray {tray}"
        cfg = read_backend_config(home, env={"HERMES_MANAGED_DIR": str(mdir), "TRAY_TEST_FLAG": "off"})
        assert cfg.auto_continue.managed == pinned


def test_a_missing_managed_dir_override_means_no_overlay(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.yaml").write_text(USER)
    assert hermes_reads([(str(home), str(tmp_path / "absent"))], tmp_path) == [[True, 30.0, 2]]
    cfg = read_backend_config(home, env={"HERMES_MANAGED_DIR": str(tmp_path / "absent")})
    assert cfg.managed_path is None and cfg.auto_continue.managed == ()


def test_writes_never_pretend_to_change_a_managed_value(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TRAY_STATE_DIR", str(tmp_path / "state"))
    home, mdir = tmp_path / "h", tmp_path / "m"
    home.mkdir()
    mdir.mkdir()
    (home / "config.yaml").write_text(USER)
    (mdir / "config.yaml").write_text("desktop:\n  auto_continue:\n    enabled: false\n")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(mdir))
    with pytest.raises(ManagedValueError, match="administrator's managed config") as err:
        write_auto_continue(home, enabled=True)
    assert str(mdir / "config.yaml") in str(err.value) and "enabled is false" in str(err.value)
    assert (home / "config.yaml").read_text() == USER  # untouched
    # Asking for what the administrator already set changes nothing and says so through .managed.
    cfg = write_auto_continue(home, enabled=False)
    assert cfg.auto_continue.enabled is False and "enabled" in cfg.auto_continue.managed
    assert (home / "config.yaml").read_text() == USER
    # An unpinned key is still the user's to change.
    cfg = write_auto_continue(home, freshness_minutes=45)
    assert cfg.auto_continue.freshness_minutes == 45 and cfg.auto_continue.enabled is False
    assert "freshness_minutes: 45" in (home / "config.yaml").read_text()
