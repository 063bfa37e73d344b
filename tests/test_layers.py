"""The shell's layers point one way: views → controller → engine adapter / watchers / notifiers → contract
→ ``hermes_tray_core``. Read from the source (every import, lazy ones inside functions too), without
importing anything; the engine and the Qt-free shell modules never import Qt."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = ROOT / "hermes_tray"

# A module may import modules of its own rank or below, never above. Longest prefix wins.
RANKS: dict[str, int] = {
    "hermes_tray": 0,  # the package's __init__
    "hermes_tray.contract": 0,
    "hermes_tray.resources": 0,
    "hermes_tray.notices": 0,  # third-party notices from distribution metadata (build time and About box)
    "hermes_tray.qt_guard": 0,
    "hermes_tray.demo": 1,
    "hermes_tray.autostart": 1,
    "hermes_tray.format": 1,
    "hermes_tray.words": 1,  # every sentence about a turn, keyed by the engine's typed codes
    "hermes_tray.app.settings_model": 1,
    "hermes_tray.app.icons": 1,
    "hermes_tray.app.events": 1,
    "hermes_tray.app.logging_setup": 1,
    "hermes_tray.app.memory": 1,
    "hermes_tray.app.signals": 1,
    "hermes_tray.app.single_instance": 1,
    "hermes_tray.notify": 2,
    "hermes_tray.watch": 2,
    "hermes_tray.engine": 2,
    "hermes_tray.app.sni": 2,  # the own StatusNotifierItem + dbusmenu (Qt and jeepney only)
    "hermes_tray.app.viewstate": 3,
    "hermes_tray.controller": 4,
    "hermes_tray.app": 5,  # the views, the application, the headless helper
    "hermes_tray.cli": 6,
    "hermes_tray.__main__": 6,
}

# Modules that must stay importable without Qt (the engine's own package is checked the same way).
QT_FREE = ("hermes_tray.contract", "hermes_tray.engine", "hermes_tray.format", "hermes_tray.app.settings_model",
           "hermes_tray.notices", "hermes_tray.words")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, resolved to the module (``from pkg import mod`` → ``pkg.mod``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if _is_module(sub) else node.module)
    return out


def _rank(module: str) -> int | None:
    best = None
    for prefix, rank in RANKS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    return None if best is None else best[1]


def _shell_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SHELL.rglob("*.py") if "_resources" not in p.parts}


def test_every_shell_module_has_a_layer() -> None:
    assert _shell_modules(), "no modules found"
    missing = [m for m in _shell_modules() if _rank(m) is None]
    assert not missing, f"place these in RANKS: {missing}"


def test_no_upward_imports_inside_the_shell() -> None:
    upward = []
    for module, path in _shell_modules().items():
        mine = _rank(module)
        for target in _imports(path):
            if target.startswith("hermes_tray.") or target == "hermes_tray":
                theirs = _rank(target)
                if theirs is not None and mine is not None and theirs > mine:
                    upward.append(f"{module} (layer {mine}) imports {target} (layer {theirs})")
    assert not upward, "\n".join(sorted(upward))


def test_the_walker_sees_an_upward_import(tmp_path: Path) -> None:
    """The check above can fail: an engine adapter importing the controller is caught."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from hermes_tray.controller import Controller\n")
    targets = _imports(src)
    assert "hermes_tray.controller" in targets and _rank("hermes_tray.controller") > _rank("hermes_tray.engine")


def test_engine_and_qt_free_shell_modules_import_no_qt() -> None:
    offenders = []
    engine = {_module_name(p): p for p in (ROOT / "core").rglob("*.py")}
    shell = _shell_modules()
    for module, path in [*engine.items(), *((m, shell[m]) for m in QT_FREE)]:
        bad = sorted(t for t in _imports(path) if t.split(".")[0] in ("PySide6", "shiboken6", "PyQt5", "PyQt6"))
        bad += sorted(t for t in _imports(path) if path.is_relative_to(ROOT / "core") and t.startswith("hermes_tray."))
        if bad:
            offenders.append(f"{module}: {bad}")
    assert not offenders, offenders


def test_the_engine_package_shows_its_face_without_loading_it() -> None:
    """``from hermes_tray_core import Scanner, resume_turn …`` works, yet importing the package loads none of
    its modules (``status`` pays only for what it uses)."""
    import subprocess
    import sys

    code = ("import sys, hermes_tray_core as c; "
            "print(sorted(m for m in sys.modules if m.startswith('hermes_tray_core.'))); "
            "[getattr(c, n) for n in c.__all__]; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "ok"], out
    import hermes_tray_core

    assert hermes_tray_core.Scanner.__module__ == "hermes_tray_core.scanning.scanner"
    assert hermes_tray_core.resume_turn.__module__ == "hermes_tray_core.continuing.resume"
