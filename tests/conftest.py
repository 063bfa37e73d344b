import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One simulated Hermes install per capability (``auto-continue``, ``legacy``), built once a module."""
    from hermes_tray.demo.sim_install import create_sim_install, sim_command
    from hermes_tray_core import gateway

    root = tmp_path_factory.mktemp("sim-installs")
    out = {}
    for cap in ("auto-continue", "legacy"):
        create_sim_install(root / cap, cap)
        out[cap] = gateway.install_from_command(sim_command(root / cap))
    return out


@pytest.fixture()
def tray_dirs_env(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every ``HERMES_TRAY_*_DIR`` below ``tmp_path``: nothing touches the real user state."""
    from hermes_tray.demo.testing import tray_dirs

    for k, v in tray_dirs(tmp_path).items():
        monkeypatch.setenv(k, v)
