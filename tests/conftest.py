"""Shared fixtures: every test is cut off from the real user's directories, and the simulated Hermes
installs are built once a session, one way.

What the tests import: the product (``hermes_tray``, ``hermes_tray_core``) from wherever it is installed
— ``./tests/run`` installs it as the README's first command does, a regular wheel install — and the test
helpers (``tests.*``) from this checkout. The checkout itself is never on the path: a private folder that
holds only a ``tests`` link to this folder is, for this process and (through ``PYTHONPATH``) every child,
and ``PYTHONSAFEPATH=1`` keeps ``python -m``/``-c`` from adding the working directory.
``tests/test_installed_product.py`` fails when the product comes from the checkout.
"""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tests_only_path() -> str:
    """A folder holding only ``tests`` → this checkout's tests/ (removed at exit)."""
    folder = tempfile.mkdtemp(prefix="hermes-tray-testpath-")
    os.symlink(ROOT / "tests", os.path.join(folder, "tests"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


if os.environ.get("HERMES_TRAY_TESTPATH") is None or not os.path.isdir(os.environ["HERMES_TRAY_TESTPATH"]):
    os.environ["HERMES_TRAY_TESTPATH"] = _tests_only_path()
_TESTPATH = os.environ["HERMES_TRAY_TESTPATH"]
for _entry in ("", str(ROOT)):  # `python -m pytest` from the checkout puts it first: never import the product from there
    while _entry in sys.path and ROOT.samefile(os.path.abspath(_entry or ".")):
        sys.path.remove(_entry)
if _TESTPATH not in sys.path:
    sys.path.append(_TESTPATH)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_TESTPATH, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT))])
os.environ["PYTHONSAFEPATH"] = "1"
# pip's download cache stays the real user's when tests replace HOME (installs in tests reuse its wheels)
os.environ.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))

import pytest  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import settings  # noqa: E402

from tests.integration.hermes_venv import G2, LEGACY, venv_path  # noqa: E402
from tests.support.clock_step import STEP_IDS as _STEP_IDS  # noqa: E402
from tests.support.clock_step import STEPS as _STEPS  # noqa: E402

# No per-example deadline anywhere: on a loaded 2-core CI machine one slow example is not a failure, and
# Hypothesis' default 200 ms deadline turned such stalls into "unreliable test timings" errors.
settings.register_profile("hermes-tray", deadline=None)
settings.load_profile("hermes-tray")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis draws from the run's seed (before its plugin reads ``--hypothesis-seed``), unless one is given."""
    from tests.support.seed import run_seed

    if getattr(config.option, "hypothesis_seed", "absent") is None:
        config.option.hypothesis_seed = run_seed()


def pytest_report_header(config: pytest.Config) -> str:
    from tests.support.seed import run_seed

    return f"random seed: {run_seed()} (HERMES_TRAY_TEST_SEED)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A failed randomised test (Hypothesis, or one using ``random_seed``) says how to replay its draws."""
    from tests.support.seed import replay_hint

    outcome = yield
    rep = outcome.get_result()
    randomised = "random_seed" in getattr(item, "fixturenames", ()) or getattr(
        getattr(item, "obj", None), "is_hypothesis_test", False)
    if rep.failed and randomised:
        rep.sections.append(("random seed", replay_hint()))


@pytest.fixture
def random_seed() -> int:
    """The run's seed for a test's own ``random.Random`` (a failure prints it; see ``tests/support/seed.py``)."""
    from tests.support.seed import run_seed

    return run_seed()

# Read before any test replaces HOME: the cached real hermes-agent venv lives in the real home.
_REAL_HERMES_VENV = str(venv_path(LEGACY))
_REAL_G2_VENV = str(venv_path(G2))
SIM_CAPS = ("auto-continue", "legacy")


@pytest.fixture(autouse=True)
def user_dirs(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
              monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every test runs as a fresh user: ``HOME``, the XDG dirs (what platformdirs reads) and the tray's
    own ``HERMES_TRAY_*_DIR`` point into temporary dirs, and ``HERMES_HOME`` is unset, so nothing
    reads or writes the real user's tray state, Hermes home or autostart entries. The tray dirs are
    ``tmp_path/tray-*`` (``tests.support.sim_homes.tray_dirs``), returned for subprocess environments."""
    from tests.support.sim_homes import tray_dirs

    user = tmp_path_factory.mktemp("user")
    for name in ("config", "cache", "data", "state", "runtime"):
        (user / name).mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(user / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(user / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(user / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(user / "runtime"))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HERMES_TRAY_TEST_HERMES_VENV", _REAL_HERMES_VENV)
    monkeypatch.setenv("HERMES_TRAY_TEST_G2_VENV", _REAL_G2_VENV)
    dirs = tray_dirs(tmp_path)
    for k, v in dirs.items():
        monkeypatch.setenv(k, v)
    return dirs


@pytest.fixture(scope="session")
def sim_roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One simulated Hermes install per capability (``auto-continue``, ``legacy``), built once a session."""
    from hermes_tray.demo.sim_install import create_sim_install

    root = tmp_path_factory.mktemp("sim-installs")
    for cap in SIM_CAPS:
        create_sim_install(root / cap, cap)
    return {cap: root / cap for cap in SIM_CAPS}


@pytest.fixture(scope="session")
def sims(sim_roots: dict[str, Path]) -> dict:
    """The installs of :func:`sim_roots` as ``HermesInstall`` (what ``hermes_command`` names)."""
    from hermes_tray.demo.sim_install import sim_command
    from hermes_tray_core.backend.install import install_from_command

    return {cap: install_from_command(sim_command(root)) for cap, root in sim_roots.items()}


@pytest.fixture(params=_STEPS, ids=_STEP_IDS)
def clock_step(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               monkeypatch: pytest.MonkeyPatch):
    """A wall-clock step (none, ±10 s, ±1 h) the test makes happen between recording an identity and checking
    it: ``clock_step.step()`` (``tests/support/clock_step.py``: psutil's boot time moves, as in a real step)."""
    from tests.support.clock_step import ClockStep

    return ClockStep(request.param, tmp_path_factory.mktemp("clock"), monkeypatch)
