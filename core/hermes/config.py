"""Hermes' own auto-continue policy: the ``desktop.auto_continue`` block of ``<home>/config.yaml``.

The tray reads the same keys Hermes reads, with the same defaults, so the tray and the backend
always agree on what is ``disabled`` / ``stale`` / ``exhausted``.

**Reading** parses exactly as Hermes does: PyYAML's safe loader (``yaml.CSafeLoader`` when libyaml
is there, else ``SafeLoader``), i.e. YAML 1.1 — ``yes/no/on/off`` are booleans, ``010`` is octal
8, ``0o10`` is a string, ``1:30`` is sexagesimal 90, duplicate keys are allowed (the last wins).
``ruamel.yaml`` (YAML 1.2) disagrees on each of those, so it is never used to read values.

**Writing** happens only when the user asks (enable, disable, ``config set``), as a *minimal
edit*: only the lines of the edited keys change, every other byte of the user's file (comments,
order, quoting, other keys) is kept; ``ruamel.yaml`` (round trip) locates those lines, and
re-emits the file only when a line edit is not possible. Before the file is replaced the new text
is parsed the way Hermes parses it and must equal the old document plus the intended change —
the edited values with exactly the intended types; a file that does not parse (as Hermes reads
it, or for the round-trip editor) is never overwritten. Both libraries are imported lazily:
``status`` with a warm cache needs neither, and a read never loads ``ruamel.yaml``.

Coercions are Hermes' own (``tui_gateway`` ``_auto_continue_config``), stated here in words:
``enabled``: absent/null → true; a bool as is; a string is true iff, stripped and lower-cased, it is one of
``1 true yes on`` (so ``"y"``, ``""``, ``"0"``, ``"enabled"`` are false); anything else by Python truth
(``0`` false, ``2`` true). ``freshness_minutes``: ``float(value)`` (absent → 15; null, a list, a non-numeric
string → 15), then ``max(0, ·)`` — ``-5`` and ``.nan`` mean 0 (every marker is stale), ``.inf`` never
expires, ``true`` is 1. ``max_attempts``: ``int(value)`` (null, ``"3.0"``, ``.nan``, a list → 2; ``3.7``
→ 3; ``true`` → 1); a result below 0 → 2. Where Hermes' own code raises (a ``freshness_minutes`` integer
too large for a float, an infinite ``max_attempts``) Hermes cannot auto-continue anything in that home:
the tray reads it as disabled and says why. Values that are not what the user probably meant come back
as warnings saying what Hermes reads.

**Managed overlay**: an administrator's ``config.yaml`` in ``$HERMES_MANAGED_DIR`` (when set: that
directory or none) else ``/etc/hermes`` wins per leaf key (``hermes_cli/managed_scope.py``):
mappings merge recursively, a managed null over a user mapping is ignored, anything else replaces the
user's value; ``${VAR}`` in managed strings expands from the environment. A managed file that does not
parse is ignored (as Hermes does); a user ``config.yaml`` that does not parse makes Hermes' gateway use
the defaults *without* the overlay, and so does the tray. The tray never writes a managed key:
:func:`write_auto_continue` raises :class:`ManagedValueError` rather than edit a value that has no effect.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ruamel.yaml import YAML

from hermes_tray_core.digest import sha256_hex
from hermes_tray_core.numbers import INT_CAP, HermesRaises, as_float, capped_int, convert, finite

__all__ = ["DEFAULT_ENABLED", "DEFAULT_FRESHNESS_MINUTES", "DEFAULT_MAX_ATTEMPTS", "MAX_FRESHNESS_MINUTES",
    "AutoContinueConfig", "BackendConfig", "BackendConfigError", "HERMES_TRUTHY", "KEYS", "ManagedValueError",
    "MAX_NODES", "auto_continue_block", "backend_config_from_text", "coerce_auto_continue", "config_path",
    "hermes_enabled", "hermes_freshness_minutes", "hermes_max_attempts", "load_as_hermes", "parse_value",
    "read_backend_config", "read_managed", "write_auto_continue"]

DEFAULT_ENABLED = True
DEFAULT_FRESHNESS_MINUTES = 15
DEFAULT_MAX_ATTEMPTS = 2
# A freshness window this wide never expires for any marker (about 1,900 years): what Hermes' ``.inf`` means,
# kept finite so JSON output and arithmetic stay well-defined.
MAX_FRESHNESS_MINUTES = 1e9

#: A parsed YAML mapping: keys and values are whatever the file holds.
YamlMap = Mapping[Any, Any]
#: What :func:`read_managed` returns: (the managed config path | None, its parsed mapping, a warning | None).
Managed = tuple[Path | None, YamlMap, str | None]


class AutoContinueConfig(NamedTuple):
    """Effective ``desktop.auto_continue`` block of one home (already coerced as Hermes coerces it).

    ``managed``: the keys an administrator's managed overlay pins (they win over the user's file).
    A ``typing.NamedTuple``, as the engine's records are: immutable, typed, compared by value, and ~10x
    cheaper to define than a frozen dataclass (``hermes-tray status`` pays for every class it defines).
    """

    enabled: bool = DEFAULT_ENABLED
    freshness_minutes: float = DEFAULT_FRESHNESS_MINUTES
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    managed: tuple[str, ...] = ()


KEYS = ("enabled", "freshness_minutes", "max_attempts")
_TRUE_WORDS = {"true", "yes", "on", "y"}  # accepted on the command line (parse_value)
_FALSE_WORDS = {"false", "no", "off", "n"}
HERMES_TRUTHY = frozenset({"1", "true", "yes", "on"})  # Hermes' is_truthy_value string set


class BackendConfigError(Exception):
    """config.yaml cannot be changed safely (unparseable, wrong shape, symlink, bad value)."""


class ManagedValueError(BackendConfigError):
    """The key is pinned by the administrator's managed config: an edit of the user's file has no effect."""


class BackendConfig(NamedTuple):
    """What one home's config.yaml (plus the managed overlay) says about auto-continue, after Hermes' coercions.

    ``auto_continue.managed`` names the keys the overlay pins; ``managed_path`` is the overlay file read.
    (A named tuple: a cold ``status`` reads config.yaml through here, and ``dataclasses`` costs it ~10 ms.)
    """

    path: Path
    auto_continue: AutoContinueConfig
    exists: bool
    warnings: tuple[str, ...] = ()
    error: str | None = None  # unreadable / unparseable: defaults apply, as in Hermes
    managed_path: Path | None = None


def config_path(home: Path | str) -> Path:
    from hermes_tray_core.hermes.paths import config_file

    return config_file(Path(home))


def _describe(raw: Any) -> str:
    """A short, bounded description of a config value for a warning (never expands aliases)."""
    if isinstance(raw, Mapping):
        return "a mapping"
    if isinstance(raw, (list, tuple)):
        return "a list"
    if isinstance(raw, str):
        return repr(raw if len(raw) <= 40 else raw[:39] + "…")
    if isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= 10**20:
        return "a huge integer"
    text = repr(raw)
    return text if len(text) <= 40 else type(raw).__name__


def hermes_enabled(raw: Any, default: bool = DEFAULT_ENABLED) -> bool:
    """Hermes' ``is_truthy_value(raw, default)``."""
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        return raw.strip().lower() in HERMES_TRUTHY
    try:
        return bool(raw)
    except Exception:
        return default


def hermes_freshness_minutes(raw: Any) -> float:
    """Hermes' ``max(0.0, float(raw))`` (``float`` failing with TypeError/ValueError → the default),
    bounded: ``inf`` becomes :data:`MAX_FRESHNESS_MINUTES`. Raises :class:`HermesRaises` where Hermes does."""
    minutes = convert(float, raw)
    if minutes is None:
        return DEFAULT_FRESHNESS_MINUTES
    minutes = max(0.0, minutes)  # NaN compares false: max(0.0, nan) is 0.0, as in Hermes
    minutes = min(minutes, MAX_FRESHNESS_MINUTES)
    return int(minutes) if minutes.is_integer() else minutes


def hermes_max_attempts(raw: Any) -> int:
    """Hermes' ``_coerce_int_config_value(raw, 2, min_value=0)`` (capped at INT_CAP); :class:`HermesRaises`
    where Hermes raises (an infinite value)."""
    n = convert(int, raw)
    if n is None or n < 0:
        return DEFAULT_MAX_ATTEMPTS
    return capped_int(n, 0, INT_CAP)


def coerce_auto_continue(block: Any, managed: tuple[str, ...] = ()) -> tuple[AutoContinueConfig, list[str]]:
    """Effective settings from a (merged) ``desktop.auto_continue`` value exactly as Hermes reads them,
    plus warnings where Hermes' reading is probably not what was meant."""
    warnings: list[str] = []
    if block is not None and not isinstance(block, Mapping):
        warnings.append("desktop.auto_continue is not a mapping; Hermes uses the defaults")
    cfg = block if isinstance(block, Mapping) else {}
    name = "desktop.auto_continue"
    raw = cfg.get("enabled")
    enabled = hermes_enabled(raw)
    if raw is not None and not isinstance(raw, bool):
        warnings.append(f"{name}.enabled: {_describe(raw)} reads as {str(enabled).lower()} to Hermes "
                        "(write true or false)")
    raw = cfg.get("freshness_minutes", DEFAULT_FRESHNESS_MINUTES)
    key = "freshness_minutes"
    try:
        fresh = hermes_freshness_minutes(raw)
        if "freshness_minutes" in cfg:
            f = as_float(raw)
            if f is None:
                warnings.append(f"{name}.freshness_minutes: {_describe(raw)} is not a number; Hermes uses "
                                f"{DEFAULT_FRESHNESS_MINUTES}")
            elif not f > 0:
                warnings.append(f"{name}.freshness_minutes: {_describe(raw)} reads as 0 to Hermes: "
                                "every interrupted turn is stale at once")
        raw, key = cfg.get("max_attempts"), "max_attempts"
        attempts = hermes_max_attempts(raw)
        if raw is not None and not (isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0):
            warnings.append(f"{name}.max_attempts: {_describe(raw)} reads as {attempts} to Hermes "
                            "(write a whole number >= 0)")
    except HermesRaises as exc:
        warnings.append(f"{name}.{key}: {_describe(raw)} — {exc}: Hermes fails reading it and cannot "
                        "auto-continue in this home; the tray treats it as disabled until it is fixed")
        return AutoContinueConfig(False, DEFAULT_FRESHNESS_MINUTES, DEFAULT_MAX_ATTEMPTS, managed), warnings
    return AutoContinueConfig(enabled, fresh, attempts, managed), warnings


def _number(raw: Any) -> float | None:
    """A finite number from a YAML value or a command-line string (never a bool)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        raw = raw.strip()
    elif not isinstance(raw, (int, float)):
        return None
    return finite(raw)


# ---------------------------------------------------------------------------------------------
# the managed overlay


def _expand_env(obj: Any, env: Mapping[str, str], budget: list[int]) -> Any:
    """``${VAR}`` in managed strings from the environment (unset ones stay verbatim), as Hermes expands them."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooComplex("the managed config expands to too many values")
    if isinstance(obj, str):
        return _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), obj)
    if isinstance(obj, Mapping):
        return {k: _expand_env(v, env, budget) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_expand_env(v, env, budget) for v in obj]
    return obj


_ENV_REF = re.compile(r"\$\{([^}]+)\}")


def _hermes_merge(base: Any, override: Any) -> Any:
    """Hermes' ``_deep_merge`` of one value: mappings recurse, a null over a mapping keeps the mapping,
    anything else replaces."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        out = dict(base)
        for key, value in override.items():
            out[key] = _hermes_merge(out[key], value) if key in out else value
        return out
    if isinstance(base, Mapping) and override is None:
        return base
    return override


def _merged_desktop_block(user_doc: Any, managed: YamlMap) -> tuple[Any, tuple[str, ...]]:
    """(the merged ``desktop.auto_continue`` value Hermes reads, the keys the overlay pins whatever the
    user's file says). Only the ``desktop`` branch of either document matters here."""
    user = user_doc if isinstance(user_doc, Mapping) else {}
    if "desktop" in managed:
        desk = _hermes_merge(user["desktop"], managed["desktop"]) if "desktop" in user else managed["desktop"]
    else:
        desk = user.get("desktop")
    block = desk.get("auto_continue") if isinstance(desk, Mapping) else None
    m_desk = managed.get("desktop")
    if m_desk is None:
        return block, ()
    if not isinstance(m_desk, Mapping):
        return block, tuple(KEYS)  # replaces any user "desktop" mapping
    m_block = m_desk.get("auto_continue")
    if m_block is None:
        return block, ()
    if not isinstance(m_block, Mapping):
        return block, tuple(KEYS)
    return block, tuple(k for k in KEYS if k in m_block)


def read_managed(env: Mapping[str, str] | None = None) -> Managed:
    """(the managed config.yaml, its parsed mapping — {} when absent —, a warning when it is ignored)."""
    from hermes_tray_core.hermes.paths import managed_config_file

    env = os.environ if env is None else env
    path = managed_config_file(env)
    if path is None:
        return None, {}, None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return path, {}, f"the managed config {path} cannot be read ({exc}); Hermes ignores it too"
    try:
        doc = load_as_hermes(text) or {}
        doc = _expand_env(doc, env, [MAX_NODES]) if isinstance(doc, Mapping) else {}
    except Exception as exc:
        return path, {}, f"{_yaml_error(path, exc)} — Hermes ignores this managed config"
    return path, doc, None


def _yaml(kind: str = "rt") -> YAML:
    from ruamel.yaml import YAML

    y = YAML(typ=kind)
    if kind == "rt":
        y.preserve_quotes = True
        y.width = 4096
    return y


def _parse(text: str) -> Any:
    """Round-trip parse (ruamel.yaml), for locating what to edit. Never used for values."""
    return _yaml("rt").load(text)


_HERMES_LOADER: Any = None


def load_as_hermes(text: str) -> Any:
    """Parse ``text`` as Hermes parses config.yaml: PyYAML's safe loader (YAML 1.1), libyaml's C
    loader when available. Raises ``yaml.YAMLError`` (or another ``Exception``) for a bad file.

    Aliases are not expanded (an aliased node is one shared object): an alias bomb costs its few
    hundred bytes here; whatever walks the result must stay bounded (:func:`_plain` is).
    """
    global _HERMES_LOADER
    import yaml

    if _HERMES_LOADER is None:
        _HERMES_LOADER = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    loader = _HERMES_LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


MAX_NODES = 200_000  # far beyond any real config.yaml; an alias bomb ("billion laughs") hits it at once


class _TooComplex(ValueError):
    pass


def _plain(value: Any, budget: list[int] | None = None) -> Any:
    """Deep copy as plain dict/list/scalars, for comparing two parses.

    Aliases make a small file a huge tree when copied: the copy is bounded by :data:`MAX_NODES`
    (raises :class:`_TooComplex`), so a hostile config.yaml cannot exhaust memory.
    """
    if budget is None:
        budget = [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooComplex("config.yaml expands to too many values (YAML aliases?)")
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, (int, float, bool)) else k: _plain(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, budget) for v in value]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def auto_continue_block(doc: Any) -> tuple[Any, list[str]]:
    """The raw ``desktop.auto_continue`` value of a parsed document (None when absent)."""
    if doc is None:
        return None, []
    if not isinstance(doc, Mapping):
        return None, ["config.yaml is not a mapping; using the defaults"]
    desktop = doc.get("desktop")
    if desktop is None:
        return None, []
    if not isinstance(desktop, Mapping):
        return None, ["desktop is not a mapping; using the defaults"]
    return desktop.get("auto_continue"), []




def read_backend_config(home: Path | str, *, env: Mapping[str, str] | None = None,
                        managed: Managed | None = None) -> BackendConfig:
    """Effective auto-continue settings of ``home`` (its config.yaml under the managed overlay), as Hermes
    reads them. Never raises: problems come back as ``error`` / ``warnings``."""
    path = config_path(home)
    managed = read_managed(env) if managed is None else managed
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return _effective(path, None, False, managed, [])
    except (OSError, UnicodeDecodeError) as exc:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=f"cannot read {path}: {exc}{_overlay_lost(managed)}")
    return backend_config_from_text(path, text, managed=managed)


def backend_config_from_text(path: Path, text: str, *, managed: Managed | None = None) -> BackendConfig:
    """As :func:`read_backend_config`, for text already read (the scanner caches by file signature)."""
    managed = read_managed() if managed is None else managed
    try:
        doc = load_as_hermes(text)
    except Exception as exc:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=_yaml_error(path, exc) + _overlay_lost(managed))
    _block, shape = auto_continue_block(doc)
    return _effective(path, doc, True, managed, shape)


def _overlay_lost(managed: Managed) -> str:
    mpath, mdoc, _warn = managed
    return f" (Hermes then ignores the managed config {mpath} too)" if mdoc else ""


def _effective(path: Path, doc: Any, exists: bool, managed: Managed, shape: list[str]) -> BackendConfig:
    mpath, mdoc, mwarn = managed
    try:
        block, pinned = _merged_desktop_block(doc, mdoc)
    except Exception as exc:  # a hostile document: Hermes' own merge would fail open to the user's file
        block, pinned = auto_continue_block(doc)[0], ()
        mwarn = f"the managed config could not be applied ({type(exc).__name__})"
    cfg, more = coerce_auto_continue(block, pinned)
    warnings = [w for w in (*shape, *more, mwarn) if w]
    return BackendConfig(path, cfg, exists, tuple(warnings), None, mpath if mdoc else None)


def _yaml_error(path: Path, exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{path} is not valid YAML{where}: {problem}"


# ---------------------------------------------------------------------------------------------
# writing


def _validate_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if value is None:
            continue
        if key == "enabled":
            if not isinstance(value, bool):
                raise BackendConfigError(f"enabled: must be true or false, not {value!r}")
        elif key == "freshness_minutes":
            num = _number(value) if not isinstance(value, str) else None
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
    """A command-line string for a backend key as the typed value, or :class:`BackendConfigError`."""
    t = text.strip()
    if key == "enabled":
        if t.lower() in _TRUE_WORDS | {"1"}:
            return True
        if t.lower() in _FALSE_WORDS | {"0"}:
            return False
        raise BackendConfigError(f"enabled: must be true or false, not {text!r}")
    if key == "freshness_minutes":
        num = _number(t)
        if num is None or num <= 0:
            raise BackendConfigError(f"freshness_minutes: must be a number of minutes > 0, not {text!r}")
        return int(num) if num.is_integer() else num
    if key == "max_attempts":
        if not re.fullmatch(r"\d+", t):
            raise BackendConfigError(f"max_attempts: must be a whole number >= 0, not {text!r}")
        return int(t)
    raise BackendConfigError(f"{key}: not a backend setting (allowed: {', '.join(KEYS)})")


def _fmt(value: Any) -> str:
    """A value as YAML text that PyYAML (YAML 1.1, as Hermes reads it) and YAML 1.2 both read back as
    the same bool / int / float. (YAML 1.1 floats need a dot and a signed exponent: ``1e-05`` would be
    a string there, ``1.0e-05`` is a float in both.)"""
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
    if line >= len(lines):
        return False
    raw = lines[line]
    body = raw.rstrip("\r\n")
    ending = raw[len(body):]
    rest = body[col:]
    m = re.match(r"^([^\s#'\"{}\[\]][^#]*?|'[^']*'|\"[^\"]*\")(\s+#.*)?\s*$", rest)
    if not m:
        return False
    lines[line] = body[:col] + value + (m.group(2) or "") + ending
    return True


def _first_key_pos(mapping: Any) -> tuple[int, int] | None:
    try:
        first = next(iter(mapping))
        pos = mapping.lc.key(first)
        return int(pos[0]), int(pos[1])
    except Exception:
        return None


def _is_block(mapping: Any) -> bool:
    try:
        return not mapping.fa.flow_style()
    except Exception:
        return False


def _minimal_edit(text: str, doc: Any, changes: Mapping[str, Any]) -> str | None:
    """New text with only the edited keys' lines touched, or None when the layout is unusual."""
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
            pos = _first_key_pos(block)
            if pos is None:
                return None
            line, col = pos
            lines[line:line] = [" " * col + f"{k}: {_fmt(v)}{nl}" for k, v in insert]
        return "".join(lines)
    if block is not None and not (isinstance(block, Mapping) and not len(block)):
        return None
    if block is not None:
        return None  # an empty flow mapping ``auto_continue: {}``: let ruamel re-emit it
    body = [f"{k}: {_fmt(v)}" for k, v in changes.items()]
    if isinstance(desktop, Mapping):
        if not len(desktop) or not _is_block(desktop):
            return None
        pos = _first_key_pos(desktop)
        if pos is None:
            return None
        line, col = pos
        step = max(2, col - int(doc.lc.key("desktop")[1]))
        new = [" " * col + "auto_continue:" + nl] + [" " * (col + step) + b + nl for b in body]
        lines[line:line] = new
        return "".join(lines)
    new = ["desktop:" + nl, "  auto_continue:" + nl] + ["    " + b + nl for b in body]
    return "".join(lines) + "".join(new)


def _ruamel_edit(text: str, changes: Mapping[str, Any]) -> str:
    """Fallback: full round-trip re-emit (comments and order kept; spacing may be normalised)."""
    import io

    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.util import load_yaml_guess_indent

    _doc, indent, block_seq_indent = load_yaml_guess_indent(text) if text.strip() else (None, 2, 0)
    y = _yaml("rt")
    y.indent(mapping=indent or 2, sequence=(indent or 2) + (block_seq_indent or 0), offset=block_seq_indent or 0)
    doc = y.load(text)
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, MutableMapping):
        raise BackendConfigError("config.yaml is not a mapping at the top level; edit it by hand")
    desktop = doc.get("desktop")
    if desktop is None:
        desktop = doc["desktop"] = CommentedMap()
    if not isinstance(desktop, MutableMapping):
        raise BackendConfigError("config.yaml: 'desktop' is not a mapping; edit it by hand")
    block = desktop.get("auto_continue")
    if block is None:
        block = desktop["auto_continue"] = CommentedMap()
    if not isinstance(block, MutableMapping):
        raise BackendConfigError("config.yaml: 'desktop.auto_continue' is not a mapping; edit it by hand")
    for key, value in changes.items():
        block[key] = value
    out = io.StringIO()
    y.dump(doc, out)
    new = out.getvalue()
    if _newline(text) == "\r\n":
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    return new


def _expected(doc: Any, changes: Mapping[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = _plain(doc) if doc is not None else {}
    desktop = data.setdefault("desktop", {})
    if desktop is None:
        desktop = data["desktop"] = {}
    block = desktop.get("auto_continue")
    if block is None:
        block = desktop["auto_continue"] = {}
    block.update(changes)
    return data


def _lock_path(path: Path) -> Path:
    from hermes_tray_core.stores import paths

    digest = sha256_hex(os.path.abspath(path).encode("utf-8", "surrogatepass"))[:24]
    return paths.state_dir() / "locks" / f"config-{digest}.lock"


class _ChangedUnderUs(Exception):
    pass


def write_auto_continue(home: Path | str, **changes: Any) -> BackendConfig:
    """Set ``enabled`` / ``freshness_minutes`` / ``max_attempts`` in ``<home>/config.yaml``.

    Only the edited keys' lines change. Raises :class:`BackendConfigError` — and leaves the file
    untouched — when it does not parse, has an unexpected shape, is a symlink, or a value is bad.
    Returns the configuration as read back from the written file.
    """
    from hermes_tray_core.stores.fsutil import (
        atomic_write_bytes,
        ensure_private_dir,
        file_signature,
        locked,
        sweep_stale_temps,
    )

    wanted = _validate_changes(changes)
    path = config_path(home)
    managed = read_managed()
    _block, pinned = _merged_desktop_block({}, managed[1])
    if any(k in pinned for k in wanted):
        effective = read_backend_config(home, managed=managed).auto_continue
        clash = {k: v for k, v in wanted.items() if k in pinned and not _equal(getattr(effective, k), v)}
        if clash:
            what = "; ".join(f"{k} is {_fmt(getattr(effective, k))}" for k in clash)
            raise ManagedValueError(
                f"desktop.auto_continue.{', '.join(clash)} is set by the administrator's managed config "
                f"{managed[0]} ({what}), which wins over {path}; not changed")
        wanted = {k: v for k, v in wanted.items() if k not in pinned}
        if not wanted:
            return read_backend_config(home, managed=managed)
    if not Path(home).is_dir():
        raise BackendConfigError(f"{home} is not a directory (no such Hermes home)")
    if path.is_symlink():
        raise BackendConfigError(f"{path} is a symlink; hermes-tray does not write through links — edit it by hand")
    lock = _lock_path(path)
    ensure_private_dir(lock.parent)
    with locked(lock):
        for _attempt in range(5):
            try:
                raw = path.read_bytes()
                exists = True
            except FileNotFoundError:
                raw, exists = b"", False
            except OSError as exc:
                raise BackendConfigError(f"cannot read {path}: {exc}") from exc
            sig = file_signature(path) if exists else None
            bom = raw.startswith(b"\xef\xbb\xbf")
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise BackendConfigError(f"{path} is not UTF-8 text; left unchanged") from exc
            try:
                hermes_doc = load_as_hermes(text)  # what Hermes sees: the values we compare and verify
            except Exception as exc:
                raise BackendConfigError(
                    f"{_yaml_error(path, exc)} — left unchanged; fix it (or move it aside) and retry"
                ) from exc
            if hermes_doc is not None and not isinstance(hermes_doc, Mapping):
                raise BackendConfigError(f"{path}: the top level is not a mapping; left unchanged")
            block, shape = auto_continue_block(hermes_doc)
            if shape:
                raise BackendConfigError(f"{path}: {shape[0].split(';')[0]}; left unchanged — edit it by hand")
            if block is not None and not isinstance(block, Mapping):
                raise BackendConfigError(f"{path}: desktop.auto_continue is not a mapping; left unchanged")
            try:
                todo = {k: v for k, v in wanted.items() if not (block and k in block and _same(block[k], v))}
                if not todo:
                    return _in_effect(backend_config_from_text(path, text, managed=managed), wanted)
                expected = _expected(hermes_doc, todo)
            except _TooComplex as exc:
                raise BackendConfigError(f"{path}: {exc}; left unchanged — edit it by hand") from exc
            try:
                doc = _parse(text)  # round trip: where the lines to edit are
            except Exception as exc:
                raise BackendConfigError(
                    f"{path} cannot be edited safely ({_yaml_error(path, exc).split(': ', 1)[-1]}); "
                    "left unchanged — edit it by hand"
                ) from exc
            new_text = None
            for edit in (_minimal_edit, None):
                try:
                    candidate = edit(text, doc, todo) if edit else _ruamel_edit(text, todo)
                except BackendConfigError:
                    raise
                except Exception:
                    candidate = None
                if candidate is not None and _reads_as(candidate, expected, todo):
                    new_text = candidate
                    break
            if new_text is None:
                raise BackendConfigError(f"{path}: could not edit it safely (unusual layout); left unchanged")
            after = _in_effect(backend_config_from_text(path, new_text, managed=managed), todo)
            data = new_text.encode("utf-8")
            if bom:
                data = b"\xef\xbb\xbf" + data
            mode = stat.S_IMODE(os.stat(path).st_mode) if exists else 0o600

            def unchanged(sig: tuple[int, int, int] | None = sig) -> None:
                now_sig = file_signature(path) if path.exists() else None
                if now_sig != sig:
                    raise _ChangedUnderUs()

            try:
                atomic_write_bytes(path, data, mode=mode, before_replace=unchanged)
            except _ChangedUnderUs:
                continue
            sweep_stale_temps(path)  # our temp files of edits killed mid-write (only ours: writer-tagged names)
            return after
        raise BackendConfigError(f"{path} kept changing while hermes-tray tried to edit it; try again")


def _in_effect(cfg: BackendConfig, wanted: Mapping[str, Any]) -> BackendConfig:
    """``cfg`` if Hermes would use every ``wanted`` value as written, else :class:`BackendConfigError` with
    what stops it (another value of the block Hermes fails on, say ``max_attempts: .inf``): a change Hermes
    would ignore is not made, and not reported as made."""
    ignored = [k for k, v in wanted.items() if not _equal(getattr(cfg.auto_continue, k), v)]
    if not ignored:
        return cfg
    why = "; ".join([*cfg.warnings, *([cfg.error] if cfg.error else [])]) or "its other values"
    raise BackendConfigError(f"{cfg.path}: Hermes would not use desktop.auto_continue.{', '.join(ignored)} as "
                             f"written ({why}); left unchanged — fix that first")


def _equal(effective: Any, value: Any) -> bool:
    return effective == value and isinstance(effective, bool) == isinstance(value, bool)


def _same(current: Any, value: Any) -> bool:
    return type(_plain(current)) is type(value) and _plain(current) == value


def _reads_as(candidate: str, expected: dict[str, Any], changes: Mapping[str, Any]) -> bool:
    """True when Hermes would read ``candidate`` as ``expected``: every other value as before, and the
    changed keys with exactly the intended values *and types* (``1 == True`` must not pass)."""
    try:
        doc = load_as_hermes(candidate)
        if _plain(doc) != expected:
            return False
        block, _shape = auto_continue_block(doc)
        return isinstance(block, Mapping) and all(k in block and _same(block[k], v) for k, v in changes.items())
    except Exception:
        return False
