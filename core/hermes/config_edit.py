"""Editing Hermes' ``config.yaml`` (``desktop.auto_continue``), only when the user asks.

A minimal edit: only the edited keys' lines change, every other byte is kept; ruamel.yaml (round trip, loaded
lazily) finds those lines and re-emits the file only when a line edit is not possible. The new text must read,
as Hermes parses it, as the old document plus exactly the intended values and types, or nothing is written; a
file that does not parse is never overwritten. A key the managed overlay pins is never written
(:class:`ManagedValueError`): the edit would have no effect.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tray_core.digest import sha256_hex
from hermes_tray_core.errors import TrayError
from hermes_tray_core.hermes import config as read
from hermes_tray_core.hermes.config import KEYS, BackendConfig, TooComplex
from hermes_tray_core.hermes.paths import config_file
from hermes_tray_core.lazy_log import get_logger
from hermes_tray_core.numbers import finite, strict_finite

logger = get_logger(__name__)

if TYPE_CHECKING:
    from ruamel.yaml import YAML

__all__ = ["BackendConfigError", "ManagedValueError", "parse_value", "write_auto_continue"]


class BackendConfigError(TrayError):
    """config.yaml cannot be changed safely (unparseable, wrong shape, symlink, bad value)."""


class ManagedValueError(BackendConfigError):
    """The key is pinned by the administrator's managed config: an edit of the user's file has no effect."""


_TRUE_WORDS = {"true", "yes", "on", "y"}  # accepted on the command line (parse_value)
_FALSE_WORDS = {"false", "no", "off", "n"}


def _yaml() -> YAML:
    """ruamel.yaml's round-trip parser: where the lines to edit are, never what a value means (YAML 1.2)."""
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    return y


def _validate_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if value is None:
            continue
        if key == "enabled":
            if not isinstance(value, bool):
                raise BackendConfigError(f"enabled: must be true or false, not {value!r}")
        elif key == "freshness_minutes":
            num = strict_finite(value)
            if num is None or num <= 0:
                raise BackendConfigError(f"freshness_minutes: must be a number of minutes > 0, not {value!r}")
            value = int(num) if num.is_integer() else num
        elif key == "max_attempts":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BackendConfigError(f"max_attempts: must be a whole number >= 0, not {value!r}")
        else:
            raise BackendConfigError(f"{key}: not a backend setting (allowed: {', '.join(KEYS)})")
        out[key] = value
    return out


def parse_value(key: str, text: str) -> Any:
    """A command-line string for a backend key as the typed value; what does not parse is refused."""
    t = text.strip()
    value: object = text
    if key == "enabled" and t.lower() in _TRUE_WORDS | _FALSE_WORDS | {"1", "0"}:
        value = t.lower() in _TRUE_WORDS | {"1"}
    elif key == "freshness_minutes":
        num = finite(t)
        value = num if num is not None and num > 0 else text
    elif key == "max_attempts" and re.fullmatch(r"\d+", t):
        value = int(t)
    return _validate_changes({key: value})[key]


def _fmt(value: Any) -> str:
    """A value as YAML text that YAML 1.1 (Hermes) and 1.2 read alike: 1.1 floats need a dot and a signed
    exponent (``1e-05`` is a string there, ``1.0e-05`` a float in both)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = repr(float(value))
    if "e" in text:
        mant, exp = text.split("e")
        if "." not in mant:
            mant += ".0"
        if exp[0] not in "+-":
            exp = "+" + exp
        text = f"{mant}e{exp}"
    elif "." not in text:
        text += ".0"
    return text


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _splice_value(lines: list[str], line: int, col: int, value: str) -> bool:
    """Replace the plain one-line scalar at (line, col) keeping any trailing comment."""
    raw = lines[line]
    body = raw.rstrip("\r\n")
    ending = raw[len(body):]
    rest = body[col:]
    m = re.match(r"^([^\s#'\"{}\[\]][^#]*?|'[^']*'|\"[^\"]*\")(\s+#.*)?\s*$", rest)
    if not m:
        return False
    lines[line] = body[:col] + value + (m.group(2) or "") + ending
    return True


def _first_key_pos(mapping: Any) -> tuple[int, int]:
    line, col = mapping.lc.key(next(iter(mapping)))
    return int(line), int(col)


def _is_block(mapping: Any) -> bool:
    return not mapping.fa.flow_style()


def _minimal_edit(text: str, doc: Any, changes: Mapping[str, Any]) -> str | None:
    """New text with only the edited keys' lines touched, or None (or any exception: the caller falls back to
    :func:`_ruamel_edit`) when the layout is unusual; ``doc`` is a round-trip parse (CommentedMaps)."""
    from ruamel.yaml.comments import CommentedMap

    nl = _newline(text)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    if doc is None:
        pass  # empty or comments only: the block is appended below them
    elif not isinstance(doc, Mapping) or (len(doc) and not _is_block(doc)):
        return None
    desktop = doc.get("desktop") if doc else None
    block = desktop.get("auto_continue") if isinstance(desktop, Mapping) else None
    if doc and "desktop" in doc and not isinstance(desktop, Mapping):
        return None
    if isinstance(block, CommentedMap) and len(block) and _is_block(block):
        insert: list[tuple[str, Any]] = []
        for key, value in changes.items():
            if key in block:
                if isinstance(block[key], (Mapping, list)):
                    return None
                line, col = block.lc.value(key)  # a round-trip parse: every mapping is a CommentedMap
                if not _splice_value(lines, line, col, _fmt(value)):
                    return None
            else:
                insert.append((key, value))
        if insert:
            line, col = _first_key_pos(block)
            lines[line:line] = [" " * col + f"{k}: {_fmt(v)}{nl}" for k, v in insert]
        return "".join(lines)
    if block is not None:
        return None  # ``auto_continue: {}`` or another layout: let ruamel re-emit it
    body = [f"{k}: {_fmt(v)}" for k, v in changes.items()]
    if isinstance(desktop, Mapping):
        if not len(desktop) or not _is_block(desktop):
            return None
        line, col = _first_key_pos(desktop)
        step = max(2, col - int(doc.lc.key("desktop")[1]))
        new = [" " * col + "auto_continue:" + nl] + [" " * (col + step) + b + nl for b in body]
        lines[line:line] = new
        return "".join(lines)
    new = ["desktop:" + nl, "  auto_continue:" + nl] + ["    " + b + nl for b in body]
    return "".join(lines) + "".join(new)


def _ruamel_edit(text: str, doc: Any, changes: Mapping[str, Any]) -> str:
    """Full round-trip re-emit of ``doc``, ``text`` parsed by :func:`_yaml` (comments and order kept; spacing
    may be normalised)."""
    import io

    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.util import load_yaml_guess_indent

    _doc, indent, block_seq_indent = load_yaml_guess_indent(text) if text.strip() else (None, 2, 0)
    y = _yaml()
    y.indent(mapping=indent or 2, sequence=(indent or 2) + (block_seq_indent or 0), offset=block_seq_indent or 0)
    doc = CommentedMap() if doc is None else doc
    if not isinstance(doc, MutableMapping):
        raise BackendConfigError("config.yaml is not a mapping at the top level; edit it by hand")
    block = doc
    for key, where in (("desktop", "desktop"), ("auto_continue", "desktop.auto_continue")):
        if block.get(key) is None:
            block[key] = CommentedMap()
        block = block[key]
        if not isinstance(block, MutableMapping):
            raise BackendConfigError(f"config.yaml: '{where}' is not a mapping; edit it by hand")
    for key, value in changes.items():
        block[key] = value
    out = io.StringIO()
    y.dump(doc, out)
    new = out.getvalue()
    if _newline(text) == "\r\n":
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    return new


def _expected(doc: Any, changes: Mapping[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = read.plain(doc) if doc is not None else {}
    desktop = data["desktop"] = data.get("desktop") or {}  # a mapping or None (the shape was checked)
    block = desktop["auto_continue"] = desktop.get("auto_continue") or {}
    block.update(changes)
    return data


class _ChangedUnderUs(Exception):
    pass


def write_auto_continue(home: Path | str, **changes: Any) -> BackendConfig:
    """Set ``enabled`` / ``freshness_minutes`` / ``max_attempts`` in ``<home>/config.yaml``; the configuration
    read back. :class:`BackendConfigError`, the file untouched, when it cannot be done safely."""
    from hermes_tray_core.hermes.locks import CONFIG_LOCK, HermesLockBusy, HermesLockUnusable, hermes_lock
    from hermes_tray_core.stores import paths
    from hermes_tray_core.stores.fsutil import ensure_private_dir, locked

    wanted = _validate_changes(changes)
    path = config_file(Path(home))
    managed = read.read_managed()
    _block, pinned = read.merged_desktop_block({}, managed[1])
    if any(k in pinned for k in wanted):
        effective = read.read_backend_config(home, managed=managed).auto_continue
        clash = {k: v for k, v in wanted.items() if k in pinned and not _equal(getattr(effective, k), v)}
        if clash:
            what = "; ".join(f"{k} is {_fmt(getattr(effective, k))}" for k in clash)
            raise ManagedValueError(
                f"desktop.auto_continue.{', '.join(clash)} is set by the administrator's managed config "
                f"{managed[0]} ({what}), which wins over {path}; not changed")
        wanted = {k: v for k, v in wanted.items() if k not in pinned}
        if not wanted:
            return read.read_backend_config(home, managed=managed)
    if not Path(home).is_dir():
        raise BackendConfigError(f"{home} is not a directory (no such Hermes home)")
    if path.is_symlink():
        raise BackendConfigError(f"{path} is a symlink; hermes-tray does not write through links — edit it by hand")
    digest = sha256_hex(os.path.abspath(path).encode("utf-8", "surrogatepass"))[:24]
    lock = paths.state_dir() / "locks" / f"config-{digest}.lock"  # the tray's own, beside Hermes' lock
    ensure_private_dir(lock.parent)
    with locked(lock):
        try:
            with hermes_lock(path.with_name(CONFIG_LOCK), create=True):  # Hermes' own, beside config.yaml
                return _edit_locked(path, wanted, managed)
        except HermesLockBusy as exc:
            raise BackendConfigError(f"{path}: {exc}; left unchanged — try again in a moment") from exc
        except HermesLockUnusable as exc:  # a read-only home, a symlink in its place
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # said of the file the user knows
                raise BackendConfigError(f"{path} cannot be written ({os.strerror(exc.errno).lower()}); "
                                         "left unchanged") from exc
            raise BackendConfigError(f"{path.parent}: {exc.strerror}; {path.name} left unchanged") from exc


def _edit_locked(path: Path, wanted: dict[str, Any], managed: read.Managed) -> BackendConfig:
    from hermes_tray_core.stores.fsutil import (
        atomic_write_bytes,
        file_signature,
        os_error_text,
        read_regular,
        sweep_stale_temps,
    )

    for _attempt in range(5):
        try:
            raw, exists = read_regular(path), True
        except FileNotFoundError:
            raw, exists = b"", False
        except OSError as exc:
            raise BackendConfigError(f"cannot read {path}: {os_error_text(exc)}") from exc
        sig = file_signature(path) if exists else None
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BackendConfigError(f"{path} is not UTF-8 text; left unchanged") from exc
        hermes_doc, bad = read.parse_as_hermes(text)  # what Hermes sees: the values we compare and verify
        if bad is not None:
            raise BackendConfigError(
                f"{read.yaml_error(path, bad)} — left unchanged; fix it (or move it aside) and retry"
            ) from bad
        block, shape = read.auto_continue_block(hermes_doc)
        if shape:  # the top level or ``desktop`` is not a mapping
            raise BackendConfigError(f"{path}: {shape[0].split(';')[0]}; left unchanged — edit it by hand")
        if block is not None and not isinstance(block, Mapping):
            raise BackendConfigError(f"{path}: desktop.auto_continue is not a mapping; left unchanged")
        try:
            todo = {k: v for k, v in wanted.items() if not (block and k in block and _same(block[k], v))}
            if not todo:
                return _in_effect(read.backend_config_from_text(path, text, managed=managed), wanted)
            expected = _expected(hermes_doc, todo)
        except TooComplex as exc:
            raise BackendConfigError(f"{path}: {exc}; left unchanged — edit it by hand") from exc
        try:
            doc = _yaml().load(text)  # round trip: where the lines to edit are
        except Exception as exc:  # boundary: parsing what the user wrote, where anything can be
            raise BackendConfigError(
                f"{path} cannot be edited safely ({read.yaml_error(path, exc).split(': ', 1)[-1]}); "
                "left unchanged — edit it by hand"
            ) from exc
        new_text = None
        for edit in (_minimal_edit, _ruamel_edit):  # the first only reads ``doc``; the second changes it
            try:
                candidate = edit(text, doc, todo)
            except BackendConfigError:
                raise
            except Exception:  # boundary: an edit of what the user wrote that fails is not used (the next way is)
                candidate = None
            if candidate is not None and _reads_as(candidate, expected, todo):
                new_text = candidate
                break
        if new_text is None:
            raise BackendConfigError(f"{path}: could not edit it safely (unusual layout); left unchanged")
        after = _in_effect(read.backend_config_from_text(path, new_text, managed=managed), todo)
        data = (b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b"") + new_text.encode("utf-8")
        mode = stat.S_IMODE(os.stat(path).st_mode) if exists else 0o600

        def unchanged(sig: tuple[int, int, int] | None = sig) -> None:
            now_sig = file_signature(path) if path.exists() else None
            if now_sig != sig:
                raise _ChangedUnderUs()

        try:
            atomic_write_bytes(path, data, mode=mode, before_replace=unchanged)
        except _ChangedUnderUs:
            continue
        except OSError as exc:  # the temp file's name and the errno stay in the log, not in the words
            logger.info("cannot write %s: %s", path, exc)
            raise BackendConfigError(f"{path} cannot be written ({os_error_text(exc)}); left unchanged") from exc
        sweep_stale_temps(path)  # our temp files of edits killed mid-write (only ours: writer-tagged names)
        return after
    raise BackendConfigError(f"{path} kept changing while hermes-tray tried to edit it; try again")


def _in_effect(cfg: BackendConfig, wanted: Mapping[str, Any]) -> BackendConfig:
    """``cfg`` if Hermes would use every ``wanted`` value as written, else :class:`BackendConfigError` saying
    what stops it (``max_attempts: .inf``, say): a change Hermes would ignore is not made."""
    ignored = [k for k, v in wanted.items() if not _equal(getattr(cfg.auto_continue, k), v)]
    if not ignored:
        return cfg
    why = "; ".join([*cfg.warnings, *([cfg.error] if cfg.error else [])]) or "its other values"
    raise BackendConfigError(f"{cfg.path}: Hermes would not use desktop.auto_continue.{', '.join(ignored)} as "
                             f"written ({why}); left unchanged — fix that first")


def _equal(effective: Any, value: Any) -> bool:
    return effective == value and isinstance(effective, bool) == isinstance(value, bool)


def _same(current: Any, value: Any) -> bool:
    return type(mine := read.plain(current)) is type(value) and mine == value


def _reads_as(candidate: str, expected: dict[str, Any], changes: Mapping[str, Any]) -> bool:
    """Hermes would read ``candidate`` as ``expected``, types and all (not ``1 == True``)."""
    try:
        doc, _bad = read.parse_as_hermes(candidate)
        if read.plain(doc) != expected:
            return False
        block, _shape = read.auto_continue_block(doc)
        return isinstance(block, Mapping) and all(k in block and _same(block[k], v) for k, v in changes.items())
    except Exception:  # boundary: reading back what an edit made, where anything can be: not verified
        return False
