"""The engine's errors say what happened in a sentence a person reads; the rest goes to the log and ``--json``.

Each error here is made by the engine itself on a real file (a symlink where a file belongs, a settings file
that is not TOML, a marker file that is not JSON, a config.yaml that is a list, a session id with a path in
it, a Hermes command that does not exist) and its ``user_message`` is checked with the same eye as every
sentence the command line prints (:mod:`tests.test_no_internals`). Then the way out: an engine error a command
answers reaches the terminal as that sentence and exit 1; one no command answers does too (never a
traceback), and ``--json`` keeps the detail.

The static half: every public error class of the engine is one of the family, and every catch-all left in
the engine (and the shell) is a boundary that says which, at most :data:`MAX_CATCH_ALLS`
(:data:`MAX_SHELL_CATCH_ALLS`) of them.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixture_homes import FixtureHome, env_for
from tests.test_no_internals import internals

ROOT = Path(__file__).resolve().parents[1]

#: The ceiling on ``except Exception`` in the engine (a grep of ``core/``, as the count was first taken: 108;
#: bookkeeping goes through one door, ``core/errors.py`` ``bookkeeping``).
MAX_CATCH_ALLS = 36
#: The shell's ceiling (62 when the engine's was first taken; its boundaries: threads, D-Bus, Qt callbacks,
#: the notification server, diagnostics).
MAX_SHELL_CATCH_ALLS = 65

#: Public exception classes of the engine that are not errors a person reads: control flow, caught where
#: they are raised.
NOT_FOR_PEOPLE = {
    "hermes_tray_core.continuing.runstate.Stopped",  # a stop asked while the run waited: ends the run
    "hermes_tray_core.numbers.HermesRaises",  # "Hermes' own code would raise here": a verdict, caught at once
}


def _made_by_the_engine(tmp_path: Path) -> list[BaseException]:
    from hermes_tray_core import (
        BackendConfigError,
        HermesNotFound,
        InvalidIdError,
        MarkerStore,
        MarkerStoreError,
        SettingsError,
        find_hermes,
        load_settings,
        validate_session_id,
        write_auto_continue,
    )
    from hermes_tray_core.backend.rpc import RpcError
    from hermes_tray_core.stores.fsutil import UnsafePathError, refuse_symlink

    made: list[BaseException] = []

    def catch(kind: type[BaseException], act) -> None:
        with pytest.raises(kind) as info:
            act()
        made.append(info.value)

    catch(InvalidIdError, lambda: validate_session_id("../../etc/passwd"))
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    catch(UnsafePathError, lambda: refuse_symlink(link))
    settings = tmp_path / "config.toml"
    settings.write_text("mode = [\n")
    catch(SettingsError, lambda: load_settings(settings))
    corrupt = FixtureHome(tmp_path / "corrupt")
    corrupt.marker_file.parent.mkdir(parents=True, exist_ok=True)
    corrupt.marker_file.write_bytes(b'{"s1": {"prompt": "x"')
    catch(MarkerStoreError, lambda: MarkerStore(corrupt.path).list())
    folder = FixtureHome(tmp_path / "folder")
    folder.marker_file.mkdir(parents=True)
    catch(MarkerStoreError, lambda: MarkerStore(folder.path).list())
    listed = FixtureHome(tmp_path / "listed")
    listed.write_config("- a\n- b\n")
    catch(BackendConfigError, lambda: write_auto_continue(listed.path, enabled=True))
    catch(HermesNotFound, lambda: _start_missing(tmp_path))
    catch(HermesNotFound, lambda: find_hermes(path=str(tmp_path)))  # no `hermes` on this PATH
    made.append(RpcError("session.resume", -32602, "session not found"))  # as the gateway reader makes it
    return made


def _start_missing(tmp_path: Path) -> None:
    """Start a Hermes gateway whose interpreter does not exist, as a resume does."""
    from hermes_tray_core.backend.stdio import StdioTransport

    StdioTransport([str(tmp_path / "no-such-python"), "-m", "tui_gateway.entry"], env={}).open()


def test_every_engine_error_says_it_in_the_users_words(tmp_path: Path) -> None:
    from hermes_tray_core import TrayError

    made = _made_by_the_engine(tmp_path)
    assert len(made) >= 8
    for exc in made:
        assert isinstance(exc, TrayError), type(exc)
        said = exc.user_message
        assert said.strip(), type(exc)
        assert not internals(said), (type(exc).__name__, said, internals(said))
        assert type(exc).__name__ in exc.detail, "the log keeps the class"


def test_a_file_error_keeps_its_errno_for_the_log_not_for_people(tmp_path: Path) -> None:
    from hermes_tray_core.stores.fsutil import UnsafePathError, refuse_symlink

    link = tmp_path / "markers.json"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError) as info:  # still an OSError: callers catching that go on catching it
        refuse_symlink(link)
    exc = info.value
    assert isinstance(exc, UnsafePathError)
    assert "[Errno" in str(exc) and "[Errno" not in exc.user_message
    assert exc.user_message == "refusing to follow a symlink"


def test_a_hermes_rpc_error_reads_in_hermes_words() -> None:
    from hermes_tray_core.backend.rpc import RpcError

    exc = RpcError("session.resume", -32602, "session not found")
    assert exc.user_message == "Hermes answered with an error: session not found"
    assert "-32602" in str(exc) and "-32602" not in exc.user_message  # the code is the log's


def test_an_engine_error_reaches_the_command_line_as_its_sentence(tmp_path: Path) -> None:
    """config.yaml is a list: the engine refuses deep in the editor; the user reads its sentence, exit 1."""
    from hermes_tray_core import BackendConfigError, write_auto_continue

    home = FixtureHome(tmp_path / "hermes")
    home.write_config("- a\n- b\n")
    home.close()
    with pytest.raises(BackendConfigError) as info:
        write_auto_continue(home.path, enabled=False)
    proc = subprocess.run([sys.executable, "-m", "hermes_tray", "disable", "--home", str(home.path)], cwd=ROOT,
                          env=env_for(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == f"hermes-tray: {home.path}: {info.value.user_message}"
    assert not internals(proc.stderr)
    assert (home.path / "config.yaml").read_text() == "- a\n- b\n", "refused, nothing written"


def test_an_engine_error_no_command_answers_ends_in_its_sentence(tmp_path: Path, monkeypatch, capsys) -> None:
    """The net under every command: a command that lets a real engine error through (here one that lists a
    corrupt marker file without a ``try``) ends in that error's sentence and exit 1, never a traceback."""
    from hermes_tray.cli import history
    from hermes_tray.cli.exits import EXIT_REFUSED
    from hermes_tray.cli.main import main
    from hermes_tray_core import MarkerStore

    home = FixtureHome(tmp_path / "hermes")
    home.marker_file.parent.mkdir(parents=True, exist_ok=True)
    home.marker_file.write_bytes(b"[1, 2")
    home.close()
    monkeypatch.setattr(history, "run", lambda args: MarkerStore(home.path).list() and 0)

    assert main(["history"]) == EXIT_REFUSED
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("hermes-tray: ") and "Traceback" not in err
    assert "it is not valid JSON" in err and not internals(err), err

    assert main(["history", "--json"]) == EXIT_REFUSED
    answer = json.loads(capsys.readouterr().out)
    assert answer["ok"] is False and "MarkerCorruptError" in answer["detail"], "--json keeps the detail"


def _engine_modules() -> list[str]:
    import hermes_tray_core

    return [m.name for m in pkgutil.walk_packages(hermes_tray_core.__path__, "hermes_tray_core.")]


def test_every_public_engine_error_is_one_of_the_family() -> None:
    from hermes_tray_core import TrayError

    strays = []
    for name in _engine_modules():
        module = importlib.import_module(name)
        for attr, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name
                    and not attr.startswith("_") and f"{name}.{attr}" not in NOT_FOR_PEOPLE
                    and not issubclass(cls, TrayError)):
                strays.append(f"{name}.{attr}")
    assert not strays, f"engine errors outside the family (derive from TrayError): {strays}"


_CATCH_ALL = re.compile(r"^\s*except Exception\b")


@pytest.mark.parametrize(("package", "most"), [("core", MAX_CATCH_ALLS), ("hermes_tray", MAX_SHELL_CATCH_ALLS)])
def test_every_catch_all_is_a_boundary_that_says_which(package: str, most: int) -> None:
    """The engine's and the shell's: a catch-all says on its line (or the comment line above) which boundary it
    is, so a reader knows why everything is caught there; and there are no more of them than now."""
    count, silent = 0, []
    for path in sorted((ROOT / package).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if "except Exception" not in line:
                continue
            count += 1
            said = line.partition("#")[2] + (lines[i - 1].strip() if i and lines[i - 1].strip().startswith("#")
                                             else "")
            if _CATCH_ALL.match(line) and "boundary" not in said:
                silent.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert not silent, f"a catch-all that does not say which boundary it is: {silent}"
    assert count <= most, f"{count} catch-alls in {package}, at most {most}"


def test_bookkeeping_that_fails_is_logged_and_the_turn_goes_on(tmp_path: Path, caplog) -> None:
    """The one door for bookkeeping: a ledger that cannot be written (here its folder is a file) costs a line
    in the log, never the resume that was recording; an interrupt (Ctrl-C, a quit) still goes through."""
    import logging

    import pytest

    from hermes_tray_core.errors import bookkeeping
    from hermes_tray_core.stores.ledger import Ledger
    from hermes_tray_core.turn import TurnId

    blocked = tmp_path / "state"
    blocked.write_text("not a folder")
    log = logging.getLogger("test.bookkeeping")
    with caplog.at_level(logging.WARNING, logger="test.bookkeeping"):
        with bookkeeping(log, "could not record %s for %s", "approved", "s1") as kept:
            Ledger(blocked / "ledger.sqlite3").record("approved", TurnId(str(tmp_path), "s1", 1.0, 0))
    assert kept.failed and isinstance(kept.error, OSError)
    assert "could not record approved for s1" in caplog.text
    with pytest.raises(KeyboardInterrupt), bookkeeping(log, "never swallowed"):
        raise KeyboardInterrupt
