"""The engine's face (``core/__init__.py``): the one door the shell uses into ``hermes_tray_core``.

The import rules themselves (the shell's layers, the Qt-free modules, the shell through the face only) are
import-linter contracts in pyproject.toml, run by tests/test_static_checks.py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_engine_package_shows_its_face_without_loading_it() -> None:
    """``from hermes_tray_core import Scanner, resume_turn …`` works, yet importing the package loads none of
    its modules (``status`` pays only for what it uses)."""
    code = ("import sys, hermes_tray_core as c; "
            "print(sorted(m for m in sys.modules if m.startswith('hermes_tray_core.'))); "
            "[getattr(c, n) for n in c.__all__]; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "ok"], out
    import hermes_tray_core

    assert hermes_tray_core.Scanner.__module__ == "hermes_tray_core.scanning.scanner"
    assert hermes_tray_core.resume_turn.__module__ == "hermes_tray_core.continuing.resume"


def test_a_renamed_face_name_is_the_engine_s_own_object() -> None:
    """``module:attribute`` entries give the attribute under the face's clearer name."""
    import hermes_tray_core
    from hermes_tray_core.hermes import reach
    from hermes_tray_core.markers import settle

    assert hermes_tray_core.wait_for_marker_settle is settle.wait
    assert hermes_tray_core.look_at_homes is reach.look


def test_the_face_lists_and_its_typed_names_agree() -> None:
    """``_FACE`` (what is loaded), ``__all__`` and the ``TYPE_CHECKING`` imports (what type checkers see) name
    the same things from the same modules: a name added to one and not the others fails here."""
    import hermes_tray_core

    face = hermes_tray_core._FACE
    assert sorted(hermes_tray_core.__all__) == sorted(["__version__", *face])
    tree = ast.parse((ROOT / "core" / "__init__.py").read_text())
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                module = imp.module.removeprefix("hermes_tray_core.")
                for a in imp.names:
                    typed[a.asname or a.name] = module if a.asname in (None, a.name) else f"{module}:{a.name}"
    assert typed == face
