"""Hermes' own auto-continue policy, read: ``desktop.auto_continue`` of ``<home>/config.yaml``, with Hermes'
keys, defaults and coercions, so that the tray and the backend agree on ``disabled`` / ``stale`` /
``exhausted`` (writes: :mod:`hermes_tray_core.hermes.config_edit`).

Parsed as Hermes parses it: PyYAML's safe loader (YAML 1.1: ``yes/no/on/off`` are booleans, ``010`` is 8,
``0o10`` a string, ``1:30`` is 90, the last duplicate key wins), never ruamel (YAML 1.2 disagrees on each);
loaded lazily. Hermes' coercions (``_auto_continue_config``): ``enabled`` absent/null → true, a string true
iff one of ``1 true yes on`` (stripped, lower-cased), else Python truth; ``freshness_minutes`` ``max(0,
float(v))`` (bad → 15; ``-5`` and ``.nan`` → 0, ``.inf`` never expires); ``max_attempts`` ``int(v)`` (bad or
below 0 → 2, ``3.7`` → 3). Where Hermes' code raises (an integer too large for a float, an infinite
``max_attempts``) it cannot auto-continue in that home: the tray reads it as disabled and says why; doubtful
values come back as warnings.

The managed overlay (``$HERMES_MANAGED_DIR`` when set, else ``/etc/hermes``; ``hermes_cli/managed_scope.py``)
wins per leaf key: mappings merge, a managed null over a mapping is ignored, ``${VAR}`` expands from the
environment. A managed file that does not parse is ignored; a user file that does not parse means the defaults
*without* the overlay, as in Hermes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hermes_tray_core.errors import TrayError
from hermes_tray_core.hermes.paths import config_file, managed_config_file
from hermes_tray_core.numbers import INT_CAP, HermesRaises, capped_int, convert, json_int
from hermes_tray_core.stores import fsutil
from hermes_tray_core.stores.fsutil import os_error_text

__all__ = ["DEFAULT_ENABLED", "DEFAULT_FRESHNESS_MINUTES", "DEFAULT_MAX_ATTEMPTS", "MAX_FRESHNESS_MINUTES",
    "AutoContinueConfig", "BackendConfig", "HERMES_TRUTHY", "KEYS", "MAX_NODES", "Managed", "TooComplex", "YamlMap",
    "auto_continue_block", "backend_config_from_text", "coerce_auto_continue", "merged_desktop_block",
    "parse_as_hermes", "plain", "read_backend_config", "read_managed", "yaml_error"]

DEFAULT_ENABLED = True
DEFAULT_FRESHNESS_MINUTES = 15
DEFAULT_MAX_ATTEMPTS = 2
# Hermes' ``.inf``, kept finite for JSON and arithmetic (about 1,900 years).
MAX_FRESHNESS_MINUTES = 1e9

#: A parsed YAML mapping: keys and values are whatever the file holds.
YamlMap = Mapping[Any, Any]
#: What :func:`read_managed` returns: (the managed config path | None, its parsed mapping, a warning | None).
Managed = tuple[Path | None, YamlMap, str | None]


class AutoContinueConfig(NamedTuple):
    """Effective ``desktop.auto_continue`` of one home; ``managed``: the keys the overlay pins. A NamedTuple,
    as the engine's records are: ~10x cheaper to define than a frozen dataclass (``status`` pays for each
    class)."""

    enabled: bool = DEFAULT_ENABLED
    freshness_minutes: float = DEFAULT_FRESHNESS_MINUTES
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    managed: tuple[str, ...] = ()


KEYS = ("enabled", "freshness_minutes", "max_attempts")
HERMES_TRUTHY = frozenset({"1", "true", "yes", "on"})  # Hermes' is_truthy_value string set


class BackendConfig(NamedTuple):
    """One home's config.yaml under the overlay, as Hermes reads it."""

    path: Path
    auto_continue: AutoContinueConfig
    exists: bool
    warnings: tuple[str, ...] = ()
    error: str | None = None  # unreadable / unparseable: defaults apply, as in Hermes
    managed_path: Path | None = None


def _describe(raw: Any) -> str:
    """A config value for a warning, bounded (never expands aliases)."""
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


def coerce_auto_continue(block: Any, managed: tuple[str, ...] = ()) -> tuple[AutoContinueConfig, list[str]]:
    """Effective settings from a merged ``desktop.auto_continue`` value, by Hermes' coercions (the module's
    doc), and warnings where Hermes' reading is probably not what was meant."""
    warnings: list[str] = []
    if block is not None and not isinstance(block, Mapping):
        warnings.append("desktop.auto_continue is not a mapping; Hermes uses the defaults")
    cfg = block if isinstance(block, Mapping) else {}
    name = "desktop.auto_continue"
    raw = cfg.get("enabled")  # Hermes' is_truthy_value(raw, default=True)
    if raw is None or isinstance(raw, bool):
        enabled = DEFAULT_ENABLED if raw is None else raw
    else:  # YAML's values are built-in types: their bool() never raises
        enabled = raw.strip().lower() in HERMES_TRUTHY if isinstance(raw, str) else bool(raw)
        warnings.append(f"{name}.enabled: {_describe(raw)} reads as {str(enabled).lower()} to Hermes "
                        "(write true or false)")
    raw = cfg.get("freshness_minutes", DEFAULT_FRESHNESS_MINUTES)
    key = "freshness_minutes"
    try:
        minutes = convert(float, raw)  # Hermes' max(0.0, float(raw)), inf bounded; max(0.0, nan) is 0.0
        fresh = DEFAULT_FRESHNESS_MINUTES if minutes is None else min(max(0.0, minutes),
                                                                      MAX_FRESHNESS_MINUTES)
        if "freshness_minutes" in cfg and minutes is None:
            warnings.append(f"{name}.freshness_minutes: {_describe(raw)} is not a number; Hermes uses "
                            f"{DEFAULT_FRESHNESS_MINUTES}")
        elif "freshness_minutes" in cfg and not fresh > 0:
            warnings.append(f"{name}.freshness_minutes: {_describe(raw)} reads as 0 to Hermes: "
                            "every interrupted turn is stale at once")
        fresh = int(fresh) if float(fresh).is_integer() else fresh
        raw, key = cfg.get("max_attempts"), "max_attempts"
        n = convert(int, raw)  # Hermes' _coerce_int_config_value(raw, 2, min_value=0), capped
        attempts = DEFAULT_MAX_ATTEMPTS if n is None or n < 0 else capped_int(n, 0, INT_CAP)
        if raw is not None and not ((number := json_int(raw)) is not None and number >= 0):
            warnings.append(f"{name}.max_attempts: {_describe(raw)} reads as {attempts} to Hermes "
                            "(write a whole number >= 0)")
    except HermesRaises as exc:
        warnings.append(f"{name}.{key}: {_describe(raw)} — {exc}: Hermes fails reading it and cannot "
                        "auto-continue in this home; the tray treats it as disabled until it is fixed")
        return AutoContinueConfig(False, DEFAULT_FRESHNESS_MINUTES, DEFAULT_MAX_ATTEMPTS, managed), warnings
    return AutoContinueConfig(enabled, fresh, attempts, managed), warnings


def plain(value: Any, env: Mapping[str, str] | None = None, budget: list[int] | None = None) -> Any:
    """Deep copy of a document Hermes' parser made, bounded (:class:`TooComplex`): aliases make a small file
    a huge tree, and share nodes an edit must not change twice. ``env``: the managed overlay's, for ``${VAR}``
    in its strings (unset ones stay verbatim)."""
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        what = "config.yaml" if env is None else "the managed config"
        raise TooComplex(f"{what} expands to too many values")
    if isinstance(value, Mapping):
        return {k if isinstance(k, (int, float, bool)) else str(k): plain(v, env, budget)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, env, budget) for v in value]
    if env is not None and isinstance(value, str):
        return _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), value)
    return value


_ENV_REF = re.compile(r"\$\{([^}]+)\}")


def _hermes_merge(base: Any, override: Any) -> Any:
    """Hermes' ``_deep_merge`` of one value."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        out = dict(base)
        for key, value in override.items():
            out[key] = _hermes_merge(out[key], value) if key in out else value
        return out
    if isinstance(base, Mapping) and override is None:
        return base
    return override


def merged_desktop_block(user_doc: Any, managed: YamlMap) -> tuple[Any, tuple[str, ...]]:
    """(the merged ``desktop.auto_continue`` Hermes reads, the keys the overlay pins)."""
    user = user_doc if isinstance(user_doc, Mapping) else {}
    if "desktop" in managed:
        desk = _hermes_merge(user["desktop"], managed["desktop"]) if "desktop" in user else managed["desktop"]
    else:
        desk = user.get("desktop")
    block = desk.get("auto_continue") if isinstance(desk, Mapping) else None
    m_desk = managed.get("desktop")
    m_block = m_desk.get("auto_continue") if isinstance(m_desk, Mapping) else m_desk
    if m_block is None:
        return block, ()
    # a managed value that is not a mapping replaces the user's whole mapping: every key pinned
    return block, tuple(k for k in KEYS if not isinstance(m_block, Mapping) or k in m_block)


def read_managed(env: Mapping[str, str] | None = None) -> Managed:
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
            doc = plain(doc, env) if isinstance(doc, Mapping) else {}
        except (ValueError, RecursionError) as exc:  # too many values (TooComplex), nested too deep
            bad = exc
    if bad is not None:
        return path, {}, f"{yaml_error(path, bad)} — Hermes ignores this managed config"
    return path, doc, None


def parse_as_hermes(text: str) -> tuple[Any, Exception | None]:
    """``(document, None)`` as Hermes parses config.yaml, or ``(None, why not)``. Aliases are not expanded (an
    alias bomb costs its bytes here): whatever walks the result must stay bounded."""
    import yaml

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        try:
            return loader.get_single_data(), None
        finally:
            loader.dispose()
    except Exception as exc:  # boundary: parsing what the user wrote, where anything can be (Hermes catches all)
        return None, exc


MAX_NODES = 200_000  # far beyond any real config.yaml; an alias bomb ("billion laughs") hits it at once


class TooComplex(TrayError, ValueError):
    """A document that expands to more than :data:`MAX_NODES` values (YAML aliases): never walked further."""


def auto_continue_block(doc: Any) -> tuple[Any, list[str]]:
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
    """``home``'s auto-continue settings as Hermes reads them; never raises (``error`` / ``warnings``)."""
    path = config_file(Path(home))
    managed = read_managed(env) if managed is None else managed
    try:
        text = fsutil.read_regular(path).decode("utf-8-sig")
    except (FileNotFoundError, NotADirectoryError):
        return _effective(path, None, False, managed)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=f"cannot read {path}: {_why(exc)}{_overlay_lost(managed)}")
    return backend_config_from_text(path, text, managed=managed)


def _why(exc: Exception) -> str:
    return "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else os_error_text(exc)


def backend_config_from_text(path: Path, text: str, *, managed: Managed) -> BackendConfig:
    doc, bad = parse_as_hermes(text)
    if bad is not None:
        return BackendConfig(path, AutoContinueConfig(), exists=True,
                             error=yaml_error(path, bad) + _overlay_lost(managed))
    return _effective(path, doc, True, managed)


def _overlay_lost(managed: Managed) -> str:
    mpath, mdoc, _warn = managed
    return f" (Hermes then ignores the managed config {mpath} too)" if mdoc else ""


def _effective(path: Path, doc: Any, exists: bool, managed: Managed) -> BackendConfig:
    mpath, mdoc, mwarn = managed
    user_block, shape = auto_continue_block(doc)
    try:
        block, pinned = merged_desktop_block(doc, mdoc)
    except Exception as exc:  # boundary: a hostile document: Hermes' merge would fail open to the user's file
        block, pinned = user_block, ()
        mwarn = f"the managed config could not be applied ({type(exc).__name__})"
    cfg, more = coerce_auto_continue(block, pinned)
    warnings = [w for w in (*shape, *more, mwarn) if w]
    return BackendConfig(path, cfg, exists, tuple(warnings), None, mpath if mdoc else None)


def sessions_elsewhere(home: Path | str) -> str | None:
    """Why this Hermes keeps its sessions and markers outside ``state.db`` and ``desktop/``, from config.yaml:
    a ``sessiondb.provider`` other than ``sqlite`` (upstream ships only that) or a fork's
    ``sessions.state_backend: authority``; else None. Parses the YAML only when the file names one of the
    keys."""
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
