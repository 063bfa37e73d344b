"""Security: the single-instance socket accepts only the same user.

CI runs as root, and root passes every permission check, so "the same user" cannot be tested
from the outside by an ordinary connect. The test runs the primary instance (as root) in a
subprocess and connects from forked children that drop to another uid (``nobody``): they
must be refused by the kernel (EACCES on connect), their message must never reach the
primary, and a same-user (root) client must be accepted (positive control). Two layers
are checked separately: the private runtime dir (0700) and the socket's own mode (Qt's
``UserAccessOption``) when the dir is world-traversable, plus the short-name fallback
that Qt places in the shared temp dir.
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() != 0, reason="needs root to switch to another uid"
)

SERVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from PySide6.QtCore import QCoreApplication, QTimer
    from hermes_tray.app.single_instance import SingleInstance

    app = QCoreApplication([])
    si = SingleInstance("tray", directory=Path(sys.argv[1]))
    assert si.acquire(), "could not become primary"
    si.handler = lambda m: print("MSG", m, flush=True) is None
    print("READY", si.server_name, flush=True)
    QTimer.singleShot(int(float(sys.argv[2]) * 1000), app.quit)
    app.exec()
    si.release()
    """
)


def _nobody() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    return pw.pw_uid, pw.pw_gid


def _connect_as(uid: int | None, gid: int | None, name: str, message: bytes) -> str:
    """Fork; the child drops to uid/gid (None: stay root) and connects. Returns its verdict."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no Python-level cleanup, only raw calls
        code = "error"
        try:
            os.close(r)
            if uid is not None:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(3)
            addr = name if name.startswith("/") else "\0" + name  # not used: Qt names are paths on Linux
            try:
                s.connect(addr)
            except PermissionError:
                code = "refused"
            except OSError as exc:
                code = "refused" if exc.errno in (errno.EACCES, errno.EPERM) else f"oserror-{exc.errno}"
            else:
                s.sendall(message)
                try:
                    code = "accepted:" + s.recv(16).decode(errors="replace").strip()
                except OSError:
                    code = "accepted:"
            os.write(w, code.encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 256):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


def _qt_socket_path(server_name: str) -> str:
    """Where Qt puts a socket: the name itself if it is a path, else ``<QDir::tempPath()>/<name>``."""
    if server_name.startswith("/"):
        return server_name
    return os.path.join(os.environ.get("TMPDIR") or tempfile.gettempdir(), server_name)


def _start_primary(directory: Path, seconds: float = 20) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(directory), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise AssertionError(f"primary did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split(" ", 1)[1].strip()


def _finish(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


@pytest.fixture
def shared_tmp():
    """A world-traversable scratch dir (pytest's tmp_path is 0700, which would hide the socket layer)."""
    d = Path(tempfile.mkdtemp(prefix="ht-si-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_private_runtime_dir_and_socket_refuse_other_uid(shared_tmp):
    uid, gid = _nobody()
    run = shared_tmp / "run"  # created by SingleInstance: must come out 0700
    proc, name = _start_primary(run)
    try:
        assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
        path = _qt_socket_path(name)
        assert os.path.exists(path), path
        assert _connect_as(uid, gid, path, b"show-from-nobody\n") == "refused"
        assert _connect_as(None, None, path, b"show\n") == "accepted:ok"
    finally:
        out = _finish(proc)
    assert "MSG show" in out
    assert "nobody" not in out


def test_socket_mode_alone_refuses_other_uid(shared_tmp):
    """Even in a world-traversable dir, the socket itself admits only its owner."""
    uid, gid = _nobody()
    run = shared_tmp / "run"
    run.mkdir(mode=0o755)
    os.chmod(run, 0o755)  # pre-existing dir keeps its mode: only the socket's own mode protects it
    proc, name = _start_primary(run)
    try:
        path = _qt_socket_path(name)
        st = os.stat(path)
        assert stat.S_ISSOCK(st.st_mode)
        assert st.st_mode & 0o077 == 0, f"socket mode {oct(st.st_mode)} lets others connect"
        assert _connect_as(uid, gid, path, b"show-from-nobody\n") == "refused"
        assert _connect_as(None, None, path, b"show\n") == "accepted:ok"
    finally:
        out = _finish(proc)
    assert "nobody" not in out


def test_short_name_fallback_refuses_other_uid(shared_tmp):
    """A runtime dir too deep for sun_path falls back to a per-user name in the shared temp dir."""
    uid, gid = _nobody()
    deep = shared_tmp / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    for p in (shared_tmp / ("d" * 60), deep):
        os.chmod(p, 0o755)
    proc, name = _start_primary(deep)
    try:
        assert not name.startswith("/"), "expected the short-name fallback"
        path = _qt_socket_path(name)
        deadline = time.monotonic() + 5
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        st = os.stat(path)
        assert st.st_mode & 0o077 == 0, f"socket mode {oct(st.st_mode)} lets others connect"
        assert _connect_as(uid, gid, path, b"show-from-nobody\n") == "refused"
        assert _connect_as(None, None, path, b"show\n") == "accepted:ok"
    finally:
        out = _finish(proc)
    assert "nobody" not in out
