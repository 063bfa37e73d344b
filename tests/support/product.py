"""How tests start the product: the installed ``hermes-tray``, never the checkout.

``./tests/run`` installs the project the way the README's first command does (a regular, non-editable
install) and every test that starts the product in a child process goes through :func:`tray_argv` and
:func:`product_env`: the child runs the installed package because nothing puts the checkout on its path
(no ``PYTHONPATH`` pointing at it, and ``PYTHONSAFEPATH=1`` so ``python -m`` does not add the working
directory).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping


def tray_argv(*args: object) -> list[str]:
    """``hermes-tray ARGS…`` as the installed package runs it, under the test's interpreter."""
    return [sys.executable, "-m", "hermes_tray", *map(str, args)]


def product_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """An environment for a child that runs the product: ``base`` (default ``os.environ``) plus ``extra``,
    with no ``PYTHONPATH`` and ``PYTHONSAFEPATH=1``, so the child imports the installed package."""
    env = {**(os.environ if base is None else base), **extra}
    env.pop("PYTHONPATH", None)
    env["PYTHONSAFEPATH"] = "1"
    return env
