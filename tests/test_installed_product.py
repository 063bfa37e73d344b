"""The suite tests what users install: the product is imported from its installation, never the checkout.

``./tests/run`` installs the project as the README's first command does (a regular wheel install, not
editable) and runs pytest against it. If ``hermes_tray`` or ``hermes_tray_core`` came from this checkout
instead — in this process or in a child the tests start — a missing subpackage or resource in the wheel
would go unnoticed, as it once did. A development run on an editable install is said so and skipped.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.product import product_env

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = {"hermes_tray": ROOT / "hermes_tray", "hermes_tray_core": ROOT / "core"}


def _editable() -> bool:
    try:
        direct = importlib.metadata.distribution("hermes-tray").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return False
    return bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))


pytestmark = pytest.mark.skipif(_editable(), reason="development run on an editable install: ./tests/run tests the "
                                                    "installed wheel")


def _within_checkout(path: str) -> bool:
    """From the source tree (its hermes_tray/ or core/ folder), rather than an installation."""
    return any(Path(path).resolve().is_relative_to(src) for src in PRODUCT.values())


def test_this_process_imports_the_installed_product() -> None:
    import hermes_tray
    import hermes_tray_core

    for module in (hermes_tray, hermes_tray_core):
        assert module.__file__ and not _within_checkout(module.__file__), \
            f"{module.__name__} imported from the checkout ({module.__file__}), not the installed package"


def test_a_child_started_from_the_checkout_imports_the_installed_product() -> None:
    """The way tests start the product (tests/support/product.py), with the checkout as working directory."""
    code = "import json, hermes_tray, hermes_tray_core; print(json.dumps([hermes_tray.__file__, hermes_tray_core.__file__]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=product_env(), capture_output=True, text=True,
                         check=True, timeout=60)
    for path in json.loads(out.stdout):
        assert not _within_checkout(path), f"a child imported {path} from the checkout"
    out = subprocess.run([sys.executable, "-m", "hermes_tray", "--version"], cwd=ROOT, env=product_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_installed_product_is_this_tree() -> None:
    """Every module of the tree is installed with the same bytes: a stale install is not tested by mistake."""
    stale, missing = [], []
    for name, src in PRODUCT.items():
        installed = Path(__import__(name).__file__).parent
        for f in src.rglob("*.py"):
            if "__pycache__" in f.parts or "_resources" in f.relative_to(src).parts:
                continue
            target = installed / f.relative_to(src)
            if not target.exists():
                missing.append(f"{name}/{f.relative_to(src)}")
            elif _digest(target) != _digest(f):
                stale.append(f"{name}/{f.relative_to(src)}")
    assert not missing and not stale, (f"the installed product is not this tree (run ./tests/run, which reinstalls "
                                       f"it): missing {missing[:10]}, different {stale[:10]}")


def test_the_checkout_is_not_on_the_path() -> None:
    """Only the tests-only folder is added: nothing of the checkout but tests/ is importable from it."""
    entries = [p for p in sys.path if p and os.path.isdir(p)]
    assert not any(Path(p).resolve() == ROOT for p in entries)
    assert os.environ.get("PYTHONSAFEPATH") == "1"
