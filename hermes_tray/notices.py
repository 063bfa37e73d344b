"""Third-party notices, built from the distributions' own metadata (``importlib.metadata``), never from a hand-kept
list. Two callers: the PyInstaller spec at build time, for the files it bundled (Python distributions, the
runtime, and on Debian-like build machines the system libraries, from ``dpkg`` and their copyright files); and
the About box of a pip/pipx install, from the installed requirements. Stdlib only (it runs inside the spec).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from contextlib import suppress
from html import escape
from importlib import metadata
from pathlib import Path

NOTICES_NAME = "THIRD-PARTY-NOTICES.txt"
RULE = "=" * 78
_LICENCE_FILE = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|COPYRIGHT|AUTHORS)([.-].*)?$", re.I)
_QT_DISTS = {"pyside6", "pyside6-essentials", "pyside6-addons", "shiboken6"}
_LICENCE_TEXTS = Path(__file__).resolve().parent / "_licences"

QT_LGPL = """\
Qt for Python (PySide6, Shiboken6) {version} and the Qt {version} libraries it loads are used under
the GNU Lesser General Public License version 3 (LGPL-3.0-only); the full LGPLv3 text and the
GPLv3 text it builds on follow this paragraph.

* Source code. The exact sources of this version are published by The Qt Company:
    Qt for Python: https://download.qt.io/official_releases/QtForPython/pyside6/
                   (PySide6-{version}-src, and the pyside-setup repository at
                   https://code.qt.io/cgit/pyside/pyside-setup.git/ tag v{version})
    Qt:            https://download.qt.io/official_releases/qt/{minor}/{version}/single/
  hermes-tray does not modify Qt or PySide6: these are the unmodified PyPI wheels
  (PySide6-Essentials / shiboken6 {version}).
* Replacing the libraries. The app is a one-folder bundle: Qt and PySide6 stay separate shared
  libraries beside the executable (Linux: _internal/PySide6/Qt/lib/libQt6*.so.6 and
  _internal/PySide6/*.abi3.so; Windows: _internal\\PySide6\\Qt6*.dll and *.pyd; macOS:
  Contents/Frameworks/PySide6/Qt/lib/*.framework). You may replace them with your own build of
  the same Qt/PySide6 version (or an ABI-compatible one); the app loads whatever is there.
* Qt itself contains third-party code (for example ICU, whose libicu* libraries the wheel
  ships beside Qt, under the Unicode licence); Qt lists it with its licences at
  https://doc.qt.io/qt-6/licenses-used-in-qt.html
"""


def _field(meta: metadata.PackageMetadata, name: str) -> str:
    values = meta.get_all(name)  # PackageMetadata.get is Python 3.12+
    value = values[0] if values else None
    return str(value).strip() if value else ""


def licence_of(dist: metadata.Distribution) -> str:
    """The SPDX expression, else the ``License`` field (first line), else the trove classifiers."""
    meta = dist.metadata
    expression = _field(meta, "License-Expression")
    if expression:
        return expression
    field = _field(meta, "License")
    if field and field.upper() != "UNKNOWN":
        first = field.splitlines()[0].strip()
        return first if len(first) <= 120 and len(field.splitlines()) == 1 else f"{first[:120]} (full text below)"
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(classifiers) or "not stated in its metadata"


def licence_files(dist: metadata.Distribution) -> list[tuple[str, str]]:
    """``(name, text)`` of the licence files the distribution ships (PEP 639 ``License-File``
    entries, else LICENSE/COPYING/NOTICE files in its metadata folder)."""
    found: dict[str, str] = {}
    for name in dist.metadata.get_all("License-File") or []:
        for candidate in (f"licenses/{name}", name):
            text = dist.read_text(candidate)
            if text:
                found[name] = text
                break
    if not found:
        for entry in dist.files or []:
            parts = entry.parts
            if parts and parts[0].endswith((".dist-info", ".egg-info")) and _LICENCE_FILE.match(entry.name):
                text = dist.read_text("/".join(parts[1:]))
                if text:
                    found["/".join(parts[1:])] = text
    return sorted(found.items())


def _home(dist: metadata.Distribution) -> str:
    meta = dist.metadata
    home = _field(meta, "Home-page")
    if home:
        return home
    for url in meta.get_all("Project-URL") or []:
        label, _, link = str(url).partition(",")
        if label.strip().lower() in ("homepage", "home", "source", "repository", "source code"):
            return link.strip()
    return ""


def _section(title: str, lines: list[str], texts: list[tuple[str, str]]) -> str:
    out = [RULE, title, *lines]
    for name, text in texts:
        out += ["", f"--- {name} ---", text.rstrip()]
    return "\n".join(out) + "\n"


def distribution_section(dist: metadata.Distribution) -> str:
    name = _field(dist.metadata, "Name")
    lines = [f"Licence: {licence_of(dist)}"]
    if _home(dist):
        lines.append(f"Home: {_home(dist)}")
    texts = licence_files(dist)
    if _norm(name) in _QT_DISTS:
        lines.append("Used under the LGPL-3.0: see the section 'Qt and Qt for Python (LGPL-3.0)' below.")
    elif not texts:
        lines.append("(no licence file in this distribution; its metadata states the licence above)")
    return _section(f"{name} {dist.version}", lines, texts)


def qt_section(dists: list[metadata.Distribution]) -> str:
    """Where Qt's source is and how to replace it, with the LGPLv3 and GPLv3 texts (once)."""
    version = next((d.version for d in dists if _norm(_field(d.metadata, "Name")) in _QT_DISTS), "")
    if not version:
        return ""
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(_LICENCE_TEXTS.glob("*.txt"), reverse=True)]
    body = QT_LGPL.format(version=version, minor=".".join(version.split(".")[:2]))
    return _section("Qt and Qt for Python (LGPL-3.0)", body.rstrip().splitlines(), texts)


def _with_qt(dists: list[metadata.Distribution]) -> list[str]:
    return [distribution_section(d) for d in dists] + [s for s in [qt_section(dists)] if s]


def python_runtime_section() -> str:
    """The CPython interpreter and standard library a frozen bundle carries."""
    version = ".".join(map(str, sys.version_info[:3]))
    candidates = [Path(sys.base_prefix) / "LICENSE.txt",
                  Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "LICENSE.txt"]
    texts = [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in candidates[:] if p.is_file()][:1]
    lines = ["Licence: PSF-2.0 (Python Software Foundation License Version 2)", "Home: https://www.python.org/"]
    if not texts:
        lines.append("(the interpreter's LICENSE.txt was not found on the build machine: https://docs.python.org/3/license.html)")
    return _section(f"Python {version} (interpreter and standard library)", lines, texts)


def required_distributions(root: str = "hermes-tray") -> list[metadata.Distribution]:
    """The installed distributions ``root`` requires, transitively (extras left out)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [root]
    while todo:
        try:
            dist = metadata.distribution(todo.pop())
        except metadata.PackageNotFoundError:
            continue  # a requirement whose environment marker left it out here
        key = _norm(_field(dist.metadata, "Name"))
        if key in seen:
            continue
        seen[key] = dist
        for req in dist.requires or []:
            if "extra ==" in req.replace('"', "'").replace("extra==", "extra =="):
                continue
            todo.append(re.split(r"[\s;<>=!~\[(]", req.strip(), maxsplit=1)[0])
    seen.pop(_norm(root), None)
    return sorted(seen.values(), key=lambda d: _norm(_field(d.metadata, "Name")))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def owners(paths: Iterable[Path]) -> tuple[list[metadata.Distribution], list[Path]]:
    """Split bundled source files into the distributions that installed them and the rest."""
    index: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        for entry in dist.files or []:
            index.setdefault(os.path.realpath(str(dist.locate_file(entry))), dist)
    found: dict[str, metadata.Distribution] = {}
    rest: list[Path] = []
    for path in paths:
        owner = index.get(os.path.realpath(path))
        if owner is None:
            rest.append(Path(path))
        else:
            found.setdefault(_norm(_field(owner.metadata, "Name")), owner)
    return [found[k] for k in sorted(found)], rest


def _under(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def debian_packages(paths: list[Path]) -> tuple[dict[str, list[Path]], list[Path]]:
    """``{package: [files]}`` for files a dpkg package installed; the files no package owns."""
    dpkg = shutil.which("dpkg-query")
    owned: dict[str, list[Path]] = {}
    if dpkg is None or not paths:
        return owned, list(paths)
    candidates: dict[str, Path] = {}
    for path in paths:
        real = os.path.realpath(path)
        for name in (str(path), real, real.removeprefix("/usr")):  # merged-/usr: dpkg may know either
            candidates.setdefault(name, Path(path))
    result = subprocess.run([dpkg, "-S", *sorted(candidates)], capture_output=True, text=True, check=False)
    owner: dict[Path, str] = {}
    for line in result.stdout.splitlines():
        packages, sep, name = line.partition(": ")
        if sep and name in candidates and "," not in packages:  # "diversion by" lines have no colon-space
            owner.setdefault(candidates[name], packages.strip())
    rest = []
    for path in paths:
        if Path(path) in owner:
            owned.setdefault(owner[Path(path)], []).append(Path(path))
        else:
            rest.append(Path(path))
    return owned, rest


def debian_section(package: str, files: list[Path]) -> str:
    name = package.split(":")[0]
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                             check=False).stdout.strip()
    copyright_file = Path("/usr/share/doc") / name / "copyright"
    text = copyright_file.read_text(encoding="utf-8", errors="replace") if copyright_file.is_file() else ""
    licences = sorted({m.group(1).strip() for m in re.finditer(r"^License:[ \t]*(\S[^\n]*)$", text, re.M)})
    lines = [f"Licence: {' / '.join(licences) or 'see the copyright file below'}",
             "Source: the Debian package's source, https://sources.debian.org/src/" + name + "/",
             "Files: " + ", ".join(sorted({p.name for p in files}))]
    texts = [(str(copyright_file), text)] if text else []
    return _section(f"{name} {version} (system library from the build machine, Debian package)", lines, texts)


def header(kind: str, when: str) -> str:
    from hermes_tray_core import __version__

    return (f"Third-party software in hermes-tray {__version__} ({kind})\n\n"
            "hermes-tray itself is MIT-licensed (see LICENSE). It runs with the software below, each\n"
            "under its own licence, as its own metadata states. This file is generated\n"
            f"{when} (hermes_tray/notices.py); do not edit it by hand.\n")


def bundle_notices(sources: Iterable[Path], ours: Iterable[Path] = ()) -> str:
    """Notices for a frozen bundle made of ``sources`` (the build machine's files it copied);
    files under ``ours`` (the checkout, the build's work folder) are the project's own."""
    ours = [Path(o) for o in ours]
    paths = [Path(p) for p in sources if Path(p).is_file() and not any(_under(Path(p), o) for o in ours)]
    dists, rest = owners(paths)
    names = {_norm(_field(d.metadata, "Name")) for d in dists}
    if "pyinstaller" not in names:  # its bootloader is in every frozen executable
        with suppress(metadata.PackageNotFoundError):
            dists.append(metadata.distribution("pyinstaller"))
    dists = sorted((d for d in dists if _norm(_field(d.metadata, "Name")) != "hermes-tray"),
                   key=lambda d: _norm(_field(d.metadata, "Name")))
    stdlib = Path(sys.base_prefix)
    runtime = [p for p in rest if _under(p, stdlib)]
    rest = [p for p in rest if not _under(p, stdlib)]
    packages, unknown = debian_packages(rest) if sys.platform.startswith("linux") else ({}, rest)
    parts = [header("frozen bundle", "when the bundle is built"), *_with_qt(dists)]
    if runtime:
        parts.append(python_runtime_section())
    parts += [debian_section(pkg, files) for pkg, files in sorted(packages.items())]
    if unknown:
        listing = [f"  {p}" for p in sorted(map(str, unknown))]
        parts.append(_section("Other files copied from the build machine (origin not recorded by a package manager)",
                              listing, []))
    return "\n".join(parts)


def installed_notices() -> str:
    """Notices for a pip/pipx install: hermes-tray's installed requirements."""
    parts = [header("pip installation: the requirements installed beside it", "from the installed packages"),
             *_with_qt(required_distributions())]
    return "\n".join(parts)


def shipped_file(name: str, text: Callable[[], str | None]) -> Path | None:
    """The file ``name`` as this installation has it: the bundle's own copy when frozen, else ``text()`` written
    to the private cache. None when there is neither. Blocking (it writes a file): off the GUI thread."""
    if getattr(sys, "frozen", False):
        for base in (Path(getattr(sys, "_MEIPASS", "")), Path(sys.executable).resolve().parent):
            if (base / name).is_file():
                return base / name
        return None
    from hermes_tray_core import atomic_write_bytes, cache_dir, ensure_private_dir

    try:
        content = text()
        if not content:
            return None
        target = ensure_private_dir(cache_dir()) / name
        atomic_write_bytes(target, content.encode("utf-8"))
    except OSError:
        return None
    return target


def notices_file() -> Path | None:
    """The notices the About box links to: generated from the installed requirements outside a bundle."""
    return shipped_file(NOTICES_NAME, installed_notices)


def about_html() -> str:
    """The About box's licence line: MIT, and a link that opens the third-party notices."""
    path = notices_file()
    if path is None:
        return "<br><br>MIT licence. The third-party notices could not be found or written."
    return f'<br><br>MIT licence. <a href="{escape(path.as_uri(), quote=True)}">Third-party software and licences</a>'
