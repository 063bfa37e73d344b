"""Which live Hermes processes serve which home: what the tray can see and Hermes cannot (a marker whose
writer is *unknown* falls through Hermes' checks; the tray holds back while a live Hermes serves its home).

Processes of this user only: ``hermes dashboard`` / ``serve``, ``python -m tui_gateway.entry``, any other
``hermes`` / ``hermes-agent`` / ``hermes-acp`` command, and WebUI servers (``HERMES_WEBUI_STATE_DIR`` in their
environment, or ``hermes-webui`` in their command line). Each one's home is its ``HERMES_HOME``, else
``~/.hermes`` of its ``HOME``, after Hermes' own profile rules for ``hermes`` commands
(``_apply_profile_override``: ``-p``, a ``HERMES_HOME`` that is a profile home, then the sticky
``active_profile``). Nothing of a process's environment is stored or logged.
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
    "home_for", "HERMES_COMMANDS", "backend_state", "looks_like_python", "serves_home",
]

HERMES_COMMANDS = frozenset({"hermes", "hermes-agent", "hermes-acp"})
BACKEND_SUBCOMMANDS = frozenset({"dashboard", "serve"})  # the web backend: /api/ws, the Desktop app's
_GATEWAY_MODULE = "tui_gateway.entry"
_WEBUI_HINTS = ("hermes-webui", "hermes_webui")
# Flags of ``hermes`` that take a value, as ``_apply_profile_override`` skips them.
_VALUE_FLAGS = frozenset({"-z", "--oneshot", "-m", "--model", "--provider", "-t", "--toolsets", "-r", "--resume",
                          "-s", "--skills", "--usage-file", "-p", "--profile"})
_OPTIONAL_VALUE_FLAGS = frozenset({"-c", "--continue"})
# The order a backend is preferred in when several serve one home (the Desktop backend first).
_KIND_ORDER = {ProcessKind.DASHBOARD: 0, ProcessKind.GATEWAY: 1, ProcessKind.CLI: 2, ProcessKind.WEBUI: 3}


class HermesProcess(NamedTuple):
    """One live Hermes process of this user (compare homes with :attr:`home_key`)."""

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
        """A short, prompt-free name: ``hermes dashboard``, ``python -m tui_gateway.entry``."""
        if self.kind == ProcessKind.GATEWAY:
            return f"python -m {_GATEWAY_MODULE}"
        if self.kind == ProcessKind.WEBUI:
            return "Hermes WebUI server"
        script, rest = _split_hermes(self.argv)
        name = _base(script) if script is not None else "hermes"
        sub = _subcommand(rest)
        return f"{name} {sub}" if sub else name

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command})"

    def __repr__(self) -> str:  # argv may carry a prompt (``hermes -z "..."``): identity only
        return f"HermesProcess(pid={self.pid}, kind={self.kind.value!r}, home={str(self.home)!r})"

    def is_alive(self) -> bool:
        from hermes_tray_core.process.identity import process_liveness

        return process_liveness(self.pid, self.start_time, mark=self.mark) == WriterState.ALIVE

    def listening_addresses(self, *, loopback_only: bool = True) -> list[tuple[str, int]]:
        """(ip, port) of the TCP sockets it listens on (loopback only by default), IPv4 first."""
        try:
            import psutil

            proc = psutil.Process(self.pid)
            conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") else proc.connections(
                kind="tcp")
        except process_errors():
            return []
        found = {(str(c.laddr.ip), int(c.laddr.port)) for c in conns
                 if c.status == "LISTEN" and c.laddr and (not loopback_only or is_loopback(c.laddr.ip))}
        return sorted(found, key=lambda a: (":" in a[0], a[1], a[0]))

    def environ_get(self, name: str) -> str | None:
        """One variable of its start-up environment, or None; never cached or logged."""
        try:
            import psutil

            if not self.is_alive():
                return None  # gone, or the pid was recycled
            return psutil.Process(self.pid).environ().get(name)
        except process_errors():
            return None


def is_loopback(host: str) -> bool:
    """An IP literal of a loopback address; not ``localhost``: a name can resolve anywhere."""
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
    """An interpreter (python3.11, pythonw.exe, pypy3, ``py``), for discovery and ``hermes_command``."""
    name = _base(arg)
    return name == "py" or name.startswith(("python", "pypy"))


def _split_hermes(argv: Sequence[str]) -> tuple[str | None, list[str]]:
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
    """How many arguments ``args[i]`` spans, as Hermes' pre-parser skips them."""
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
    """The ``-p/--profile`` value as Hermes pre-parses it (an invalid name is ignored)."""
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
    """A cheap look at the command line before the environment is read."""
    for a in argv[:6]:
        if _base(a) in HERMES_COMMANDS or a == _GATEWAY_MODULE or a.endswith("entry.py") or a == "hermes_cli.main":
            return True
    return any(h in a.lower() for a in argv for h in _WEBUI_HINTS) or bool(argv and looks_like_python(argv[0]))


def find_hermes_processes(*, exclude_pids: Iterable[int] = (),
                          kinds: Iterable[ProcessKind] | None = None) -> list[HermesProcess]:
    """Every live Hermes process of this user but this one; [] when psutil fails. ``kinds``: only those
    (without the WebUI, only the matching processes' environments are read)."""
    import psutil

    wanted = frozenset(kinds) if kinds is not None else None
    skip = {os.getpid(), *exclude_pids}
    extra, mine = _same_user_filter()
    out: list[HermesProcess] = []
    # Without the WebUI (found by its environment): the command lines alone first, ~4x cheaper over the table.
    by_argv = wanted is not None and ProcessKind.WEBUI not in wanted
    try:
        it = psutil.process_iter(["pid", "cmdline"] if by_argv else ["pid", "cmdline", "create_time", *extra])
    except process_errors():
        return []

    for proc in it:
        try:
            info = proc.info
            if by_argv:
                argv = info.get("cmdline") or []
                if not argv or (wanted is not None and classify(argv) not in wanted):
                    continue
                info = {**info, **proc.as_dict(["create_time", *extra])}
            found = _record(proc, info, mine, wanted) if info.get("pid") not in skip else None
        except Exception:  # boundary: reading what another program's process holds, where anything can be
            continue
        if found is not None:
            out.append(found)
    out.sort(key=lambda p: (_KIND_ORDER[p.kind], p.pid))
    return out


def _record(proc: psutil.Process, info: dict[str, Any], mine: Callable[[dict[str, Any]], bool], wanted: frozenset[ProcessKind] | None) -> HermesProcess | None:
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


def serves_home(pid: int, home: Path | str) -> bool:
    """``pid`` is a live Hermes backend of this user serving ``home`` (then its identity is read through a
    wall-clock step: :func:`hermes_tray_core.process.identity.judge_hermes_identity`); one process looked at,
    not the whole table."""
    try:
        import psutil

        proc = psutil.Process(pid)
        extra, mine = _same_user_filter()
        found = _record(proc, proc.as_dict(["pid", "cmdline", "create_time", *extra]), mine, None)
    except Exception:  # boundary: reading what another program's process holds, where anything can be
        return False
    return found is not None and found.kind != ProcessKind.WEBUI and found.home_key == home_path(home)


def backend_state(home: Path | str) -> tuple[str, str]:
    """A fresh look: does a live Hermes backend serve ``home``? (``live`` / ``none`` / ``unknown``, detail)"""
    try:
        return HermesProcesses.now().backend_state(home)
    except process_errors() as exc:  # the process table cannot be walked
        return "unknown", f"cannot list processes: {exc}"


class HermesProcesses:
    """One look at the process table, shared by everything a scan asks."""

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
        """Hermes backends whose home is ``home``, the Desktop backend first."""
        return list(self._by_home.get(home_path(home), ()))

    def backend_state(self, home: Path | str) -> tuple[str, str]:
        serving = self.serving(home)
        return ("live", serving[0].describe()) if serving else ("none", "")

    def webui_servers(self, state_dir: Path | str) -> list[HermesProcess]:
        key = home_path(state_dir)
        return [p for p in self.processes if p.kind == ProcessKind.WEBUI and p.webui_state_dir is not None
                and home_path(p.webui_state_dir) == key]

