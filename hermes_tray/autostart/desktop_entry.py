"""Desktop Entry (freedesktop.org) helpers: quote an argv into ``Exec=``, read an entry back.

Kept apart from the XDG backend because the same rules render the launcher entry, and the
tests check both against ``desktop-file-validate``.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from hermes_tray.resources import resource_path

# Characters that force an Exec argument into double quotes (Desktop Entry spec, "Exec key").
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_ESCAPE_IN_QUOTES = set('"`$\\')
_STRING_ESCAPES = {"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def quote_exec(argv: list[str]) -> str:
    """``Exec=`` value for ``argv``: quoted where the spec needs it, ``%`` doubled, string-escaped."""
    parts = []
    for arg in argv:
        if any(c in "\n\r" for c in arg):
            raise ValueError(f"an Exec argument cannot contain a line break: {arg!r}")
        arg = arg.replace("%", "%%")
        if arg and not any(c in _RESERVED for c in arg):
            parts.append(arg)
        else:
            parts.append('"' + "".join("\\" + c if c in _ESCAPE_IN_QUOTES else c for c in arg) + '"')
    # The whole value is a "string": its own backslashes are escaped once more.
    return " ".join(parts).replace("\\", "\\\\")


def escape_string(value: str) -> str:
    """A plain string value (``TryExec=``, ``Path=``): backslashes escaped, no line breaks."""
    if any(c in "\n\r" for c in value):
        raise ValueError(f"a desktop-entry value cannot contain a line break: {value!r}")
    return value.replace("\\", "\\\\")


def unescape_string(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            out.append(_STRING_ESCAPES.get(value[i + 1], "\\" + value[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_exec(value: str) -> list[str]:
    """Split an ``Exec=`` value back into argv (field codes such as ``%U`` are dropped)."""
    text = unescape_string(value)
    args: list[str] = []
    cur: list[str] = []
    in_arg = in_quotes = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and i + 1 < len(text):
            if text[i + 1] == "%":
                cur.append("%")
                in_arg = True
            i += 2  # %f %U … field codes expand to nothing here
            continue
        if in_quotes:
            if c == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPE_IN_QUOTES:
                cur.append(text[i + 1])
                i += 1
            elif c == '"':
                in_quotes = False
            else:
                cur.append(c)
        elif c == '"':
            in_quotes = in_arg = True
        elif c in " \t":
            if in_arg:
                args.append("".join(cur))
                cur, in_arg = [], False
        else:
            cur.append(c)
            in_arg = True
        i += 1
    if in_arg:
        args.append("".join(cur))
    return args


def render_template(name: str, argv: list[str]) -> str:
    """Fill ``resources/desktop/<name>`` (``@EXEC@``, ``@TRYEXEC@``) for ``argv``."""
    template = resource_path("desktop", name)
    try:
        text = template.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"desktop-entry template missing from this installation: {template}") from exc
    return text.replace("@EXEC@", quote_exec(argv)).replace("@TRYEXEC@", escape_string(argv[0]))


def read_entry(path: Path) -> dict[str, str] | None:
    """The ``[Desktop Entry]`` group of ``path`` (raw values); None if missing or unreadable."""
    parser = configparser.RawConfigParser(interpolation=None, strict=False, delimiters=("=",), comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    try:
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    if not parser.has_section("Desktop Entry"):
        return None
    return dict(parser.items("Desktop Entry"))
