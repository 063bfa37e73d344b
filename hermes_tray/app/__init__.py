"""The Qt application: tray icon, menu, prompt window, settings, history and start-up."""

from hermes_tray import qt_guard as _qt_guard

try:  # every Qt-using part of the tray imports this package first: one check, before any Qt work
    _qt_guard.check()
except _qt_guard.BrokenBindings as _exc:
    raise SystemExit(f"hermes-tray: {_exc}") from None


def run_demo(demo) -> int:  # noqa: ANN001 - a hermes_tray.demo.home.DemoHome
    """``hermes-tray demo``: the tray on the demo home, with a "Demo: crash the backend" entry."""
    from hermes_tray.app.application import TrayOptions, run_tray

    def crash() -> None:
        demo.crash_again()  # always leaves a new interrupted turn (a new session while one waits)

    # autostart=None: "Start at login" ticked inside the demo must never register the demo for every login
    options = TrayOptions(homes=[str(demo.home)], extra_actions=[("Demo: crash the backend", crash)],
                          autostart=None, demo=True, on_start_failed=demo.crash_backend)
    return run_tray(options)
