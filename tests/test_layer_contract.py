"""Every module of the shell has a place in the "shell's layers" import-linter contract (pyproject.toml).

import-linter checks the imports between the layers it is given; a new module that no layer names is not
checked at all (its ``exhaustive`` option needs one container, and the shell's layers are its folders and
top-level modules, not the children of one package). This test names such a module.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SHELL = ROOT / "hermes_tray"
CONTRACT = "The shell's layers point one way"
UNLAYERED = {"hermes_tray"}  # the package's __init__: its modules and folders hold the layers


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return [m.strip() for layer in contract["layers"] for m in layer.replace("|", ":").split(":")]


def _shell_modules() -> list[str]:
    out = []
    for path in SHELL.rglob("*.py"):
        if "_resources" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return sorted(out)


def test_every_shell_module_has_a_layer() -> None:
    layers = _layers()
    modules = _shell_modules()
    assert len(modules) > 50, "no modules found"
    missing = [m for m in modules if m not in UNLAYERED
               and not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert not missing, f"place these in the layers of {CONTRACT!r} (pyproject.toml): {missing}"
