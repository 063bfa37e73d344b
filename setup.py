"""Which packages the wheel holds: discovered from the source tree, never listed by hand.

Everything else about the build is in pyproject.toml. This file exists for one thing pyproject.toml
cannot say: the engine lives in the top-level ``core/`` folder (the layout is fixed) but installs and
imports as ``hermes_tray_core`` (a generic top-level ``core`` would collide with other projects' in a
shared environment), so every package found under ``core/`` is renamed on the way in.
``tests/packaging/test_wheel.py`` builds the wheel and checks it holds every module of both trees.
"""

from setuptools import find_namespace_packages, find_packages, setup

ENGINE_DIR, ENGINE = "core", "hermes_tray_core"


def packages() -> list[str]:
    shell = find_packages(include=["hermes_tray", "hermes_tray.*"])
    engine = [ENGINE + name[len(ENGINE_DIR):] for name in find_packages(include=[ENGINE_DIR, ENGINE_DIR + ".*"])]
    # Data folders shipped inside the shell, so the installed app finds them beside its code: the icons and
    # desktop-entry templates of the top-level resources/ (hermes_tray/_resources is a symlink to it) and the
    # licence texts. Listed as (namespace) packages, as setuptools asks of folders Python could import.
    data = find_namespace_packages(include=["hermes_tray._resources", "hermes_tray._resources.*",
                                            "hermes_tray._licences"], exclude=["*.__pycache__"])
    return [*shell, *engine, *data]


setup(packages=packages(), package_dir={ENGINE: ENGINE_DIR})
