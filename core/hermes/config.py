"""Hermes' own auto-continue policy, read: the ``desktop.auto_continue`` block of ``<home>/config.yaml``.

The tray reads the same keys Hermes reads, with the same defaults, so the tray and the backend
always agree on what is ``disabled`` / ``stale`` / ``exhausted``. (Editing the file, at the user's
request only, is :mod:`hermes_tray_core.hermes.config_edit`.)

**Reading** parses exactly as Hermes does: PyYAML's safe loader (``yaml.CSafeLoader`` when libyaml
is there, else ``SafeLoader``), i.e. YAML 1.1 — ``yes/no/on/off`` are booleans, ``010`` is octal
8, ``0o10`` is a string, ``1:30`` is sexagesimal 90, duplicate keys are allowed (the last wins).
``ruamel.yaml`` (YAML 1.2) disagrees on each of those, so it is never used to read values. PyYAML
is imported lazily: ``status`` with a warm cache does without it.

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
the defaults *without* the overlay, and so does the tray. The tray never writes a managed key
(:mod:`~hermes_tray_core.hermes.config_edit` refuses to edit a value that has no effect).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.errors import TrayError
from hermes_tray_core.hermes.paths import config_file
from hermes_tray_core.numbers import INT_CAP, HermesRaises, as_float, capped_int, convert, json_int
from hermes_tray_core.stores import fsutil
from hermes_tray_core.stores.fsutil import os_error_text

__all__ = ["DEFAULT_ENABLED", "DEFAULT_FRESHNESS_MINUTES", "DEFAULT_MAX_ATTEMPTS", "MAX_FRESHNESS_MINUTES",
    "AutoContinueConfig", "BackendConfig", "HERMES_TRUTHY", "KEYS", "MAX_NODES", "Managed", "TooComplex", "YamlMap",
    "auto_continue_block", "backend_config_from_text", "coerce_auto_continue", "hermes_enabled",
    "hermes_freshness_minutes", "hermes_max_attempts", "load_as_hermes", "merged_desktop_block", "read_backend_config",
    "read_managed", "yaml_error"]

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
HERMES_TRUTHY = frozenset({"1", "true", "yes", "on"})  # Hermes' is_truthy_value string set


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


def _describe(raw: Any) -> str:
    """A short, bounded description of a config value for a warning (never expands aliases)."""
    if isinstance(raw, Mapping):
        return "a mapping"
    if isinstance(raw, (list, tuple)):
        return "a list"
    if isinstance(raw, str):
        return repr(raw if len(raw) <= 40 else raw[:39] + "…")
    if (number := json_int(raw)) is not None and abs(number) >= 10**20:
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
    return bool(raw)  # YAML's values are built-in types: their bool() never raises


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
        if raw is not None and not ((number := json_int(raw)) is not None and number >= 0):
            warnings.append(f"{name}.max_attempts: {_describe(raw)} reads as {attempts} to Hermes "
                            "(write a whole number >= 0)")
    except HermesRaises as exc:
        warnings.append(f"{name}.{key}: {_describe(raw)} — {exc}: Hermes fails reading it and cannot "
                        "auto-continue in this home; the tray treats it as disabled until it is fixed")
        return AutoContinueConfig(False, DEFAULT_FRESHNESS_MINUTES, DEFAULT_MAX_ATTEMPTS, managed), warnings
    return AutoContinueConfig(enabled, fresh, attempts, managed), warnings


# ---------------------------------------------------------------------------------------------
# the managed overlay


def _expand_env(obj: Any, env: Mapping[str, str], budget: list[int]) -> Any:
    """``${VAR}`` in managed strings from the environment (unset ones stay verbatim), as Hermes expands them."""
    budget[0] -= 1
    if budget[0] < 0:
        raise TooComplex("the managed config expands to too many values")
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


def merged_desktop_block(user_doc: Any, managed: YamlMap) -> tuple[Any, tuple[str, ...]]:
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
        text = fsutil.read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return None, {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return path, {}, f"the managed config {path} cannot be read ({_why(exc)}); Hermes ignores it too"
    doc, bad = parse_as_hermes(text)
    if bad is None:
        try:
            doc = _expand_env(doc, env, [MAX_NODES]) if isinstance(doc, Mapping) else {}
        except (ValueError, RecursionError) as exc:  # too many values (TooComplex), nested too deep
            bad = exc
    if bad is not None:
        return path, {}, f"{yaml_error(path, bad)} — Hermes ignores this managed config"
    return path, doc, None


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


def parse_as_hermes(text: str) -> tuple[Any, Exception | None]:
    """:func:`load_as_hermes` answering ``(doc, None)``, or ``(None, why)`` for a file Hermes cannot read either."""
    try:
        return load_as_hermes(text), None
    except Exception as exc:  # boundary: parsing what the user wrote, where anything can be (Hermes catches all)
        return None, exc


MAX_NODES = 200_000  # far beyond any real config.yaml; an alias bomb ("billion laughs") hits it at once


class TooComplex(TrayError, ValueError):
    """A document that expands to more than :data:`MAX_NODES` values (YAML aliases): never walked further."""


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
    path = config_file(Path(home))
    managed = read_managed(env) if managed is None else managed
    try:
        text = fsutil.read_regular(path).decode("utf-8-sig")
    except (FileNotFoundError, NotADirectoryError):
        return _effective(path, None, False, managed, [])
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=f"cannot read {path}: {_why(exc)}{_overlay_lost(managed)}")
    return backend_config_from_text(path, text, managed=managed)


def _why(exc: Exception) -> str:
    """A read error in the user's words (no errno number, no exception name)."""
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    return os_error_text(exc)


def backend_config_from_text(path: Path, text: str, *, managed: Managed | None = None) -> BackendConfig:
    """As :func:`read_backend_config`, for text already read (the scanner caches by file signature)."""
    managed = read_managed() if managed is None else managed
    doc, bad = parse_as_hermes(text)
    if bad is not None:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=yaml_error(path, bad) + _overlay_lost(managed))
    _block, shape = auto_continue_block(doc)
    return _effective(path, doc, True, managed, shape)


def _overlay_lost(managed: Managed) -> str:
    mpath, mdoc, _warn = managed
    return f" (Hermes then ignores the managed config {mpath} too)" if mdoc else ""


def _effective(path: Path, doc: Any, exists: bool, managed: Managed, shape: list[str]) -> BackendConfig:
    mpath, mdoc, mwarn = managed
    try:
        block, pinned = merged_desktop_block(doc, mdoc)
    except Exception as exc:  # boundary: a hostile document: Hermes' merge would fail open to the user's file
        block, pinned = auto_continue_block(doc)[0], ()
        mwarn = f"the managed config could not be applied ({type(exc).__name__})"
    cfg, more = coerce_auto_continue(block, pinned)
    warnings = [w for w in (*shape, *more, mwarn) if w]
    return BackendConfig(path, cfg, exists, tuple(warnings), None, mpath if mdoc else None)


def sessions_elsewhere(home: Path | str) -> str | None:
    """Why this Hermes keeps its sessions (and their interrupted-turn markers) outside ``state.db`` and
    ``desktop/interrupted_turns.json``, from its config.yaml: ``sessiondb.provider`` other than ``sqlite`` (upstream
    ships only sqlite) or a fork's ``sessions.state_backend: authority``. None when it keeps them there (or the
    file does not say). Reads the YAML only when the file names one of the keys; never raises."""
    path = config_file(Path(home))
    try:
        raw = fsutil.read_regular(path)
    except (OSError, ValueError):
        return None
    if b"sessiondb" not in raw and b"state_backend" not in raw:
        return None
    doc, bad = parse_as_hermes(raw.decode("utf-8-sig", "replace"))
    if bad is not None or not isinstance(doc, Mapping):
        return None
    db, sessions = doc.get("sessiondb"), doc.get("sessions")
    provider = db.get("provider") if isinstance(db, Mapping) else None
    if isinstance(provider, str) and provider.strip() and provider.strip().lower() != "sqlite":
        return f"sessiondb.provider is {provider.strip()[:40]!r} in {path}"
    backend = sessions.get("state_backend") if isinstance(sessions, Mapping) else None
    if isinstance(backend, str) and backend.strip().lower() == "authority":
        return f"sessions.state_backend is 'authority' in {path}"
    return None


def yaml_error(path: Path, exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{path} is not valid YAML{where}: {problem}"
