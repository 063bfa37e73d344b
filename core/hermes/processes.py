"""Which live Hermes processes serve which home: what the tray can see and Hermes cannot.

Hermes' scheduler blocks a marker only when its writer is ``alive``; a marker of *unknown* liveness
(no ``writer_pid``, as older backends write) falls through to its other checks. The tray follows that
order unless a live Hermes process serves the marker's home — then the turn may well be running and
the tray does nothing. This module finds those processes with psutil:

- only processes of the current user (real uid on POSIX, user name on Windows);
- ``hermes dashboard`` (the Desktop backend), ``python -m tui_gateway.entry`` (a stdio gateway), any
  other ``hermes`` / ``hermes-agent`` / ``hermes-acp`` command (CLI, TUI, messaging gateway), and
  Hermes WebUI servers (a process whose environment sets ``HERMES_WEBUI_STATE_DIR`` or whose
  command line names ``hermes-webui`` / ``hermes_webui``);
- each one's home: its ``HERMES_HOME`` (read from the process environment), else the default
  ``~/.hermes`` of the process's ``HOME``. For ``hermes`` commands Hermes' own profile rules apply
  first (``hermes_cli.main._apply_profile_override``): ``-p/--profile <name>``, then a
  ``HERMES_HOME`` that already is a profile home, then the root's sticky ``active_profile``. Homes
  compare canonically (:func:`hermes_tray_core.keys.home_path`).

The dashboard engine (continuing turns inside ``hermes dashboard``) builds on the same records: a
:class:`HermesProcess` knows its interpreter (``exe``), its loopback listening ports and can read one
variable of its environment on demand (nothing of the environment is stored or logged).
:meth:`HermesProcesses.now` takes one psutil pass, reused for a whole scan.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import psutil

from hermes_tray_core.hermes import paths as hermes_paths
from hermes_tray_core.keys import HomePath, home_path
from hermes_tray_core.process.identity import process_errors
from hermes_tray_core.vocab import ProcessKind, WriterState

__all__ = [
    "is_loopback",
    "HermesProcess", "HermesProcesses", "ProcessKind", "classify", "find_hermes_processes",
    "home_for", "HERMES_COMMANDS", "backend_state", "hermes_process", "looks_like_python", "serves_home",
]

HERMES_COMMANDS = frozenset({"hermes", "hermes-agent", "hermes-acp"})
BACKEND_SUBCOMMANDS = frozenset({"dashboard", "serve"})  # the web backend: /api/ws, the Desktop app's
_GATEWAY_MODULE = "tui_gateway.entry"
_WEBUI_HINTS = ("hermes-webui", "hermes_webui")
# Flags of ``hermes`` that take a value (so the value is not taken for a subcommand or a profile flag),
# as ``hermes_cli.main._apply_profile_override`` skips them.
_VALUE_FLAGS = frozenset({"-z", "--oneshot", "-m", "--model", "--provider", "-t", "--toolsets", "-r", "--resume",
                          "-s", "--skills", "--usage-file", "-p", "--profile"})
_OPTIONAL_VALUE_FLAGS = frozenset({"-c", "--continue"})
# The order a backend is preferred in when several serve one home (the Desktop backend first).
_KIND_ORDER = {ProcessKind.DASHBOARD: 0, ProcessKind.GATEWAY: 1, ProcessKind.CLI: 2, ProcessKind.WEBUI: 3}


class HermesProcess(NamedTuple):
    """One live Hermes process of this user (an immutable record; compare homes with :attr:`home_key`)."""

    pid: int
    start_time: float | None
    kind: ProcessKind
    home: Path
    argv: tuple[str, ...]
    exe: str | None = None
    webui_state_dir: Path | None = None
    mark: str | None = None  # clock-proof start mark (core.process.start_mark): what "still the same process" compares

    @property
    def home_key(self) -> HomePath:
        return home_path(self.home)

    @property
    def command(self) -> str:
        """A short, prompt-free name of the command: ``hermes dashboard``, ``python -m tui_gateway.entry``."""
        if self.kind == ProcessKind.GATEWAY:
            return f"python -m {_GATEWAY_MODULE}"
        if self.kind == ProcessKind.WEBUI:
            return "Hermes WebUI server"
        script, rest = _split_hermes(self.argv)
        name = _base(script) if script is not None else "hermes"
        sub = _subcommand(rest)
        return f"{name} {sub}" if sub else name

    def describe(self) -> str:
        """``pid 4242 (hermes dashboard)`` — what a reason line names."""
        return f"pid {self.pid} ({self.command})"

    def __repr__(self) -> str:  # argv may carry a prompt (``hermes -z "..."``): identity only
        return f"HermesProcess(pid={self.pid}, kind={self.kind.value!r}, home={str(self.home)!r})"

    def is_alive(self) -> bool:
        """Still the same process (pid and start mark, else create time)."""
        from hermes_tray_core.process.identity import process_liveness

        return process_liveness(self.pid, self.start_time, mark=self.mark) == WriterState.ALIVE

    def listening_addresses(self, *, loopback_only: bool = True) -> list[tuple[str, int]]:
        """(ip, port) of the TCP sockets this process listens on (loopback only by default), IPv4 first;
        [] if unreadable."""
        try:
            import psutil

            proc = psutil.Process(self.pid)
            conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") else proc.connections(
                kind="tcp")
        except process_errors():
            return []
        found = set()
        for c in conns:
            if c.status != "LISTEN" or not c.laddr:
                continue
            if loopback_only and not is_loopback(c.laddr.ip):
                continue
            found.add((str(c.laddr.ip), int(c.laddr.port)))
        return sorted(found, key=lambda a: (":" in a[0], a[1], a[0]))

    def environ_get(self, name: str) -> str | None:
        """One variable of the process's (start-up) environment, or None. Never cached or logged."""
        try:
            import psutil

            if not self.is_alive():
                return None  # gone, or the pid was recycled
            return psutil.Process(self.pid).environ().get(name)
        except process_errors():
            return None


def is_loopback(host: str) -> bool:
    """An IP literal of a loopback address (``127.0.0.0/8``, ``::1``; brackets and a zone id allowed).
    Names such as ``localhost`` are not: a name can resolve anywhere."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _base(arg: str) -> str:
    name = arg.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for suffix in (".exe", "-script.py", ".py"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def looks_like_python(arg: str) -> bool:
    """An interpreter's path or name (python3.11, pythonw.exe, pypy3, the Windows ``py`` launcher): one rule
    for discovery and for reading a configured ``hermes_command``."""
    name = _base(arg)
    return name == "py" or name.startswith(("python", "pypy"))


def _split_hermes(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the ``hermes`` script, its arguments) when ``argv`` runs a Hermes command, else (None, [])."""
    if not argv:
        return None, []
    if _base(argv[0]) in HERMES_COMMANDS:
        return argv[0], list(argv[1:])
    if looks_like_python(argv[0]):
        i = 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c"):
            i += 1  # interpreter options (-u, -X..., -E)
        if i < len(argv) and argv[i] == "-m" and i + 1 < len(argv):
            if argv[i + 1] in ("hermes_cli.main", "hermes_cli"):
                return "hermes", list(argv[i + 2:])
            return None, []
        if i < len(argv) and _base(argv[i]) in HERMES_COMMANDS:
            return argv[i], list(argv[i + 1:])
    return None, []


def _option_width(args: Sequence[str], i: int) -> int:
    """How many arguments ``args[i]`` spans (2 when a value follows it), as Hermes' pre-parser skips them."""
    a = args[i]
    if "=" in a or i + 1 >= len(args):
        return 1
    if a in _VALUE_FLAGS or (a in _OPTIONAL_VALUE_FLAGS and not args[i + 1].startswith("-")):
        return 2
    return 1


def _subcommand(args: Sequence[str]) -> str | None:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return None
        if a.startswith("-"):
            i += _option_width(args, i)
            continue
        return a if a.isidentifier() or a.replace("-", "_").isidentifier() else None
    return None


def _is_gateway(argv: Sequence[str]) -> bool:
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv) and argv[i + 1] == _GATEWAY_MODULE:
            return True
        if a.replace("\\", "/").endswith("tui_gateway/entry.py"):
            return True
    return False


def classify(argv: Sequence[str], env: Mapping[str, str] | None = None) -> ProcessKind | None:
    """What kind of Hermes process a command line (and, for the WebUI, environment) is, or None."""
    argv = list(argv)
    if _is_gateway(argv):
        return ProcessKind.GATEWAY
    script, rest = _split_hermes(argv)
    if script is not None:
        # ``serve`` is the same backend headless: what the Hermes Desktop app spawns.
        return ProcessKind.DASHBOARD if _subcommand(rest) in BACKEND_SUBCOMMANDS else ProcessKind.CLI
    if env is not None and env.get("HERMES_WEBUI_STATE_DIR"):
        return ProcessKind.WEBUI
    if any(h in a.lower() for a in argv for h in _WEBUI_HINTS):
        return ProcessKind.WEBUI
    return None


def _profile_flag(args: Sequence[str]) -> str | None:
    """The ``-p/--profile`` value as Hermes pre-parses it (invalid names are ignored, as Hermes does)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return None
        if a in ("-p", "--profile") and i + 1 < len(args):
            name = args[i + 1]
            return name if hermes_paths.PROFILE_RE.match(name) or name == hermes_paths.DEFAULT_PROFILE else None
        if a.startswith("--profile="):
            return a.split("=", 1)[1]
        i += _option_width(args, i)
    return None


def home_for(kind: ProcessKind, argv: Sequence[str], env: Mapping[str, str]) -> Path:
    """The home a Hermes process serves (not yet canonical)."""
    home, _origin = hermes_paths.default_root(env)
    if kind in (ProcessKind.CLI, ProcessKind.DASHBOARD):
        _script, rest = _split_hermes(argv)
        root = hermes_paths.root_of(home)
        name = _profile_flag(rest)
        if name is None and env.get("HERMES_HOME") and hermes_paths.is_profile_home(home):
            return home
        if name is None and not env.get("HERMES_S6_SUPERVISED_CHILD"):
            try:
                name = hermes_paths.active_profile_file(root).read_text(encoding="utf-8").strip() or None
            except (OSError, UnicodeDecodeError):
                name = None
        if name:
            try:
                return hermes_paths.profile_home(root, name)
            except ValueError:
                return home
    return home


def _same_user_filter() -> tuple[list[str], Callable[[dict[str, Any]], bool]]:
    """A predicate on a psutil info dict: the process belongs to the current user."""
    if os.name == "posix":
        uid = os.getuid()
        return ["uids"], lambda info: info.get("uids") is not None and info["uids"].real == uid
    try:
        import getpass

        me = getpass.getuser().lower()
    except (ImportError, KeyError, OSError):  # no login name to be had (getuser's own failures)
        me = None
    return ["username"], lambda info: me is not None and str(info.get("username") or "").rsplit("\\", 1)[
        -1].lower() == me


def _quick_candidate(argv: Sequence[str]) -> bool:
    """A cheap look at the command line before reading the environment (most processes are not Hermes)."""
    for a in argv[:6]:
        if _base(a) in HERMES_COMMANDS or a == _GATEWAY_MODULE or a.endswith("entry.py") or a == "hermes_cli.main":
            return True
    return any(h in a.lower() for a in argv for h in _WEBUI_HINTS) or bool(argv and looks_like_python(argv[0]))


def find_hermes_processes(*, exclude_pids: Iterable[int] = (),
                          kinds: Iterable[ProcessKind] | None = None) -> list[HermesProcess]:
    """Every live Hermes process of this user (this process excluded). Never raises: [] when psutil fails.

    ``kinds``: only those (a resume looking for the Desktop backend asks for dashboards alone, and then
    reads the environment of those processes only — not of every Python process, as WebUI detection must)."""
    wanted = frozenset(kinds) if kinds is not None else None
    try:
        import psutil
    except ImportError:
        return []
    skip = {os.getpid(), *exclude_pids}
    extra, mine = _same_user_filter()
    out: list[HermesProcess] = []
    # Looking for command-line kinds only (not the WebUI, found by its environment): read each process's
    # command line alone, and the rest only for the few that match (~4× cheaper over a whole process table).
    by_argv = wanted is not None and ProcessKind.WEBUI not in wanted
    try:
        it = psutil.process_iter(["pid", "cmdline"] if by_argv else ["pid", "cmdline", "create_time", *extra])
    except process_errors():
        return []

    def one(proc: psutil.Process) -> HermesProcess | None:
        info = proc.info
        if by_argv:
            argv = info.get("cmdline") or []
            if not argv or (wanted is not None and classify(argv) not in wanted):
                return None
            info = {**info, **proc.as_dict(["create_time", *extra])}
        if info.get("pid") in skip:
            return None
        return _record(proc, info, mine, wanted)

    for proc in it:
        found = _look(one, proc)
        if found is not None:
            out.append(found)
    out.sort(key=lambda p: (_KIND_ORDER[p.kind], p.pid))
    return out


def _look(read: Callable[..., HermesProcess | None], *args: Any) -> HermesProcess | None:
    """One process looked at: None when it is gone, not readable, or holds what cannot be read."""
    try:
        return read(*args)
    except Exception:  # boundary: reading what another program's process holds, where anything can be
        return None


def _record(proc: psutil.Process, info: dict[str, Any], mine: Callable[[dict[str, Any]], bool], wanted: frozenset[ProcessKind] | None) -> HermesProcess | None:
    """The :class:`HermesProcess` of one psutil process (``info``: its pid, cmdline, create time and the
    user fields of :func:`_same_user_filter`), or None when it is not a Hermes process of this user."""
    from hermes_tray_core.process.start_mark import start_mark

    pid = info.get("pid")
    argv = info.get("cmdline") or []
    if not isinstance(pid, int) or not argv or not mine(info) or not _quick_candidate(argv):
        return None
    kind = classify(argv)
    if wanted is not None and (kind is None and ProcessKind.WEBUI not in wanted
                               or kind is not None and kind not in wanted):
        return None
    env = proc.environ()
    if kind is None:
        # Only a python process can still be a WebUI server found by its environment.
        kind = classify(argv, env)
        if kind is None or (wanted is not None and kind not in wanted):
            return None
    home = home_for(kind, argv, env)
    webui = None
    if kind == ProcessKind.WEBUI:
        state = env.get("HERMES_WEBUI_STATE_DIR")
        webui = Path(os.path.expanduser(state)) if state else hermes_paths.default_webui_state_dir(home)
    try:
        exe = proc.exe() or None
    except process_errors():
        exe = None
    start = info.get("create_time")
    return HermesProcess(pid, float(start) if start is not None else None, kind, home,
                         tuple(str(a) for a in argv), exe, webui, start_mark(pid))


def hermes_process(pid: int) -> HermesProcess | None:
    """The live Hermes process ``pid`` of this user (as :func:`find_hermes_processes` sees it), or None: not
    Hermes, another user's, gone or unreadable. One process looked at, not the whole table."""

    def one() -> HermesProcess | None:
        import psutil

        proc = psutil.Process(pid)
        extra, mine = _same_user_filter()
        return _record(proc, proc.as_dict(["pid", "cmdline", "create_time", *extra]), mine, None)

    return _look(one)


def serves_home(pid: int, home: Path | str) -> bool:
    """True when ``pid`` is a live Hermes backend (dashboard, gateway, CLI) of this user serving ``home``:
    what lets the tray read a Hermes-written identity through a wall-clock step
    (:func:`hermes_tray_core.process.identity.judge_hermes_identity`)."""
    found = hermes_process(pid)
    return (found is not None and found.kind != ProcessKind.WEBUI
            and found.home_key == home_path(home))


def backend_state(home: Path | str) -> tuple[str, str]:
    """A fresh look: (``live`` / ``none`` / ``unknown``, detail) — does a live Hermes backend serve ``home``?"""
    try:
        return HermesProcesses.now().backend_state(home)
    except process_errors() as exc:  # the process table cannot be walked
        return "unknown", f"cannot list processes: {exc}"


class HermesProcesses:
    """One look at the process table, shared by everything a scan asks (cheap lookups afterwards)."""

    def __init__(self, processes: Sequence[HermesProcess]) -> None:
        self.processes = list(processes)
        self._by_home: dict[str, list[HermesProcess]] = {}
        for p in self.processes:
            if p.kind != ProcessKind.WEBUI:
                self._by_home.setdefault(p.home_key, []).append(p)

    @classmethod
    def now(cls, kinds: Iterable[ProcessKind] | None = None) -> HermesProcesses:
        return cls(find_hermes_processes(kinds=kinds))

    def serving(self, home: Path | str) -> list[HermesProcess]:
        """Hermes backends (dashboard, gateway, CLI) whose home is ``home``; the Desktop backend first."""
        return list(self._by_home.get(home_path(home), ()))

    def backend_state(self, home: Path | str) -> tuple[str, str]:
        """(``live`` / ``none``, which process) — the policy's ``backend`` input for ``home``."""
        serving = self.serving(home)
        return ("live", serving[0].describe()) if serving else ("none", "")

    def webui_servers(self, state_dir: Path | str) -> list[HermesProcess]:
        """WebUI servers whose state dir is ``state_dir``."""
        key = home_path(state_dir)
        return [p for p in self.processes if p.kind == ProcessKind.WEBUI and p.webui_state_dir is not None
                and home_path(p.webui_state_dir) == key]

