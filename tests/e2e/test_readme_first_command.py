"""The README's first command, verbatim, as a newcomer runs it: a fresh copy of the tree, a fresh HOME,
no Hermes, a desktop with an XEmbed tray and one with a StatusNotifierItem host.

It must install, start the tray on the demo home, show the icon (the XEmbed tray embeds a window of
ours / the item registers), deliver the demo's notification, print no traceback, and Quit must leave
nothing running. On the XEmbed copy, the README's second command then takes its first steps
(``./tests/run --version``: system packages, its own environment, the installed product, pytest) and
leaves the user's ``.venv`` as the first command made it: a regular install, untouched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.desktop.session import Desktop, TrayKind
from tests.e2e.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # installs from the package index


def readme_commands() -> list[str]:
    """The set-up commands of README.md's "Set up" section, in order (indented or fenced code)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Set up\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Set up' section"
    body = section.group(1)
    fenced = re.findall(r"^```[a-z]*\n(.*?)^```", body, re.S | re.M)
    blocks = fenced or ["\n".join(line[4:] for line in chunk.splitlines())
                        for chunk in re.findall(r"(?:^ {4}\S.*\n?)+", body, re.M)]
    commands = [b.strip() for b in blocks if b.strip()]
    assert len(commands) >= 2, f"README's Set up section should hold two commands, found {commands}"
    return commands


def fresh_copy(dest: Path) -> Path:
    """The tree as a clone would have it: tracked files and new ones not ignored, nothing built."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    return dest


def newcomer_env(home: Path, desk: Desktop) -> dict[str, str]:
    """A login of a new user on that desktop: no Hermes on PATH, nothing of this test run."""
    python_dir = os.path.dirname(shutil.which("python3") or "/usr/bin/python3")
    env = {"HOME": str(home), "PATH": os.pathsep.join(dict.fromkeys([python_dir, "/usr/local/bin", "/usr/bin", "/bin"])),
           "LANG": "C.UTF-8", "USER": os.environ.get("USER", "user"), **desk.env,
           # pip's download cache of this machine (not the user's state, tests/conftest.py): fewer downloads
           "PIP_CACHE_DIR": os.environ["PIP_CACHE_DIR"]}
    for name in ("PYENV_ROOT", "PYENV_VERSION"):
        if name in os.environ:
            env[name] = os.environ[name]
    assert shutil.which("hermes", path=env["PATH"]) is None, "this machine has Hermes on PATH: not a newcomer's"
    return env


def _tree(p: Path) -> dict[str, tuple[int, int]]:
    return {str(f.relative_to(p)): (f.lstat().st_size, f.lstat().st_mtime_ns) for f in p.rglob("*")}


class Run:
    """The first command running in a shell, with every process it started remembered."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(["sh", "-c", command], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.seen: dict[int, psutil.Process] = {}

    def watch(self) -> list[psutil.Process]:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        for k in kids:
            self.seen.setdefault(k.pid, k)
        return kids

    def tray_pids(self) -> set[int]:
        return {p.pid for p in self.watch() if _cmdline_has(p, "hermes-tray")}

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> list[psutil.Process]:
        return [p for p in self.seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    def kill(self) -> None:
        for p in [psutil.Process(self.proc.pid), *self.seen.values()]:
            try:
                p.kill()
            except psutil.Error:
                pass
        self.proc.wait()


def _cmdline_has(p: psutil.Process, word: str) -> bool:
    try:
        return any(word in part for part in p.cmdline())
    except psutil.Error:
        return False


def _quit_from_xembed_menu(desk: Desktop, icon: dict) -> None:
    """Right-click the icon, then choose the menu's last entry (Quit) with the keyboard."""
    x, y, w, h = icon["geometry"]
    desk.xdotool("mousemove", x + w // 2, y + h // 2, "click", "3")
    time.sleep(0.5)
    desk.xdotool("key", "Up")
    time.sleep(0.2)
    desk.xdotool("key", "Return")


@pytest.mark.parametrize("kind", [TrayKind.XEMBED, TrayKind.SNI], ids=["xembed", "sni"])
def test_readme_first_command_gives_a_working_tray(kind: TrayKind, tmp_path: Path) -> None:
    first, second = readme_commands()[:2]
    tree = fresh_copy(tmp_path / "hermes-tray")
    home = tmp_path / "home"
    home.mkdir()
    with Desktop(kind) as desk:
        env = newcomer_env(home, desk)
        run = Run(first, tree, env, tmp_path / "first-command.log")
        try:
            # Installing takes a while; then the tray and the demo home come up.
            if kind is TrayKind.XEMBED:
                icon = wait_for(lambda: [i for i in desk.xembed_icons() if i["pid"] in run.tray_pids()], 300,
                                "the tray icon embedded in the XEmbed tray")[0]
            else:
                item = wait_for(lambda: [i for i in desk.tray_items() if i["pid"] in run.tray_pids()
                                         and any(m["label"] == "Quit" for m in i["menu"])], 300,
                                "the StatusNotifierItem registered, with its menu")[0]
                assert item["Id"] == "hermes-tray"
            note = wait_for(lambda: [n for n in desk.notifications() if n["summary"].startswith("Interrupted: ")],
                            60, "the demo's notification")[0]
            assert note["app_name"] and {"Resume", "Skip"} <= set(note["actions"].values())
            assert desk.rejected() == []
            run.watch()
            if kind is TrayKind.XEMBED:
                _quit_from_xembed_menu(desk, icon)
            else:
                desk.tray_activate("Quit")
            assert run.proc.wait(timeout=60) == 0, run.output()[-3000:]
        finally:
            if run.proc.poll() is None:
                run.kill()
        out = run.output()
        assert "Traceback" not in out, out[-3000:]
        # Quit leaves nothing running: not the tray, not the demo's simulated backend.
        wait_for(lambda: not run.alive(), 15, "every process the first command started to be gone")
        assert len(run.seen) >= 2  # the tray and what it started were really watched

    if kind is not TrayKind.XEMBED:
        return
    # The second command's first steps on the same copy: it installs into its own environment and leaves the
    # user's .venv (a regular install, made by the first command) exactly as it was.
    venv = tree / ".venv"
    direct = next(venv.glob("lib/python*/site-packages/hermes_tray-*.dist-info/direct_url.json"))
    assert not json.loads(direct.read_text()).get("dir_info", {}).get("editable")
    before = _tree(venv)
    step = second + " --version" if second.strip() == "./tests/run" else None
    assert step, f"the README's second command changed ({second!r}): update this test"
    result = subprocess.run(["sh", "-c", step], cwd=tree, env={**env, "HOME": str(home)}, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "pytest" in result.stdout + result.stderr
    assert _tree(venv) == before, "the test command changed the user's .venv"
    assert (tree / ".venv-test" / "bin" / "hermes-tray").exists()
