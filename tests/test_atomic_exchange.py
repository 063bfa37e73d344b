"""hermes_tray_core.stores.exchange: putting a foreign writer's version back after our exchange, with
real files and real exchanges. A scripted foreign writer renames its versions over the target between
the exchanges of the put-back, the way Hermes' ``atomic_json_write`` does (write a temp file, rename),
and exceptions are raised between our syscalls, where a signal handler's would land."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_tray_core.markers import entries as marker_entries
from hermes_tray_core.markers import store as markers
from hermes_tray_core.markers.file import marker_path
from hermes_tray_core.markers.store import MarkerStore
from hermes_tray_core.stores import exchange as atomic_exchange
from hermes_tray_core.stores import fsutil
from tests.support.exchange_hooks import hooked_parts

pytestmark = pytest.mark.skipif(atomic_exchange.mechanism() == "none", reason="no atomic exchange here")
ROUNDS = atomic_exchange._PUT_BACK_ROUNDS


class Foreign:
    """A non-locking writer: each call renames a new version (its content names it) over ``target``."""

    def __init__(self, target: Path, n: int = 1) -> None:
        self.target, self.n = target, n

    def rename(self) -> str:
        self.n += 1
        name = f"H{self.n}"
        tmp = self.target.with_name(f".foreign_{name}.tmp")
        tmp.write_text(name)
        os.replace(tmp, self.target)
        return name


def _hook(monkeypatch: pytest.MonkeyPatch, before: Callable[[int], OSError | None] | None = None,
          after: Callable[[int], None] | None = None) -> list[int]:
    """Step into every verified exchange (see tests.support.exchange_hooks); the calls made."""
    calls: list[int] = []
    monkeypatch.setattr(atomic_exchange, "_verified_parts", hooked_parts(before, after, calls))
    return calls


def _setup(tmp_path: Path) -> tuple[Path, Path, tuple, tuple, Foreign]:
    """We read version R and wrote ours; H1 lands after our read (so the put-back starts)."""
    target = tmp_path / "file.json"
    target.write_text("R")
    read = fsutil.file_signature(target)
    ours = tmp_path / ".ours.tmp"
    ours.write_text("ours")
    our_sig = fsutil.file_signature(ours)
    foreign = Foreign(target, n=0)
    foreign.rename()  # H1, after our read, before our exchange
    return target, ours, read, our_sig, foreign


def _exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renames_before: dict[int, int]
              ) -> tuple[Path, Path, list[int]]:
    """The put-back with ``renames_before[k]`` foreign renames right before put-back round ``k``.
    Returns (target, the path handed back, the exchanges made)."""
    target, ours, read, our_sig, foreign = _setup(tmp_path)

    def before(n: int) -> None:
        for _ in range(renames_before.get(n, 0)):
            foreign.rename()

    calls = _hook(monkeypatch, before=before)
    back, was_read = atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig)
    assert was_read is False
    return target, Path(back), calls


def test_a_rename_before_our_exchange_goes_straight_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, back, calls = _exchange(tmp_path, monkeypatch, {})
    assert target.read_text() == "H1" and back.read_text() == "ours" and calls == [0, 1]


def test_a_rename_over_ours_before_the_put_back_leaves_the_newest_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, back, calls = _exchange(tmp_path, monkeypatch, {1: 1})  # H2 destroys ours
    assert target.read_text() == "H2" and back.read_text() == "H1" and calls == [0, 1, 2]


@pytest.mark.parametrize("busy", [1, 2, 3, 4, 7, 20, ROUNDS - 1])
def test_renames_during_the_put_back_never_hand_the_newest_back_for_removal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: int) -> None:
    """The foreign writer renames right before each of the first ``busy`` rounds (H2 destroys ours, H3…
    land over what we put back). A put-back that stopped on a round count ended one round off for these
    and handed the newest foreign version to the caller to delete."""
    target, back, calls = _exchange(tmp_path, monkeypatch, {k: 1 for k in range(1, busy + 1)})
    assert target.read_text() == f"H{busy + 1}", "the newest foreign version must stand"
    assert back.read_text() not in (f"H{busy + 1}", "ours")
    assert calls == list(range(busy + 2))  # it stops at the first quiet round


def test_the_target_removed_during_the_put_back_settles_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, ours, read, our_sig, _foreign = _setup(tmp_path)
    _hook(monkeypatch, before=lambda n: os.unlink(target) if n == 1 else None)
    back, was_read = atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig)
    assert not target.exists() and Path(back).read_text() == "H1" and was_read is False


def test_a_writer_renaming_every_round_leaves_its_newest_version_to_keep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(atomic_exchange.PutBackIncomplete) as caught:
        _exchange(tmp_path, monkeypatch, {k: 1 for k in range(1, ROUNDS + 1)})
    newest = f"H{ROUNDS + 1}"
    assert Path(caught.value.filename).read_text() == newest  # handed to the caller to keep
    assert (tmp_path / "file.json").read_text() != newest


def test_a_failed_round_leaves_its_newest_version_to_keep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, ours, read, our_sig, _foreign = _setup(tmp_path)

    def fail(n: int) -> OSError | None:
        return OSError(5, "Input/output error") if n == 1 else None

    _hook(monkeypatch, before=fail)
    with pytest.raises(atomic_exchange.PutBackIncomplete) as caught:
        atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig)
    assert Path(caught.value.filename).read_text() == "H1" and target.read_text() == "ours"


@pytest.mark.parametrize("at", ["after ours went in", "after put-back round 1", "after put-back round 2",
                                "before put-back round 1"])
def test_an_exception_between_our_syscalls_still_leaves_hermes_newest_version_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    """A KeyboardInterrupt (or any signal handler's exception, delivered through any thread) can land
    right after a syscall returns. H2 destroys ours before round 1, so the put-back needs two rounds.
    Wherever the exception lands, the put-back is finished before it goes on: the newest foreign
    version stands, and what is handed back is older. Left as it was, ours stood (or an older version)."""
    target, ours, read, our_sig, foreign = _setup(tmp_path)
    raise_before = at.startswith("before")
    n_at = {"after ours went in": 0, "after put-back round 1": 1, "after put-back round 2": 2,
            "before put-back round 1": 1}[at]

    def before(n: int) -> None:
        if n == 1:
            foreign.rename()  # H2 over ours
        if raise_before and n == n_at:
            raise KeyboardInterrupt

    def after(n: int) -> None:
        if not raise_before and n == n_at:
            raise KeyboardInterrupt

    _hook(monkeypatch, before=before, after=after)
    progress = atomic_exchange.Progress(str(ours), our_sig)
    with pytest.raises(KeyboardInterrupt):
        atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig, progress)
    assert target.read_text() == "H2", "the newest foreign version must stand"
    assert progress.settled and Path(progress.path).read_text() == "H1"  # older: the caller may remove it


def test_a_handlers_oserror_right_after_our_exchange_is_not_taken_for_the_exchange_failing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGALRM handler raising TimeoutError (an OSError) right after our exchange ran: it is not the
    exchange's own failure, so the put-back is finished before it goes on (taken for one, ours stayed
    live and Hermes' version under our temp name)."""
    target, ours, read, our_sig, _foreign = _setup(tmp_path)

    def after(n: int) -> None:
        if n == 0:
            raise TimeoutError("from a signal handler")

    _hook(monkeypatch, after=after)
    progress = atomic_exchange.Progress(str(ours), our_sig)
    with pytest.raises(TimeoutError):
        atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig, progress)
    assert target.read_text() == "H1" and progress.settled and Path(progress.path).read_text() == "ours"


def test_an_exception_before_ours_went_in_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, ours, read, our_sig, _foreign = _setup(tmp_path)

    def before(n: int) -> None:
        raise KeyboardInterrupt

    calls = _hook(monkeypatch, before=before)
    progress = atomic_exchange.Progress(str(ours), our_sig)
    with pytest.raises(KeyboardInterrupt):
        atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig, progress)
    assert calls == [0] and target.read_text() == "H1" and ours.read_text() == "ours" and progress.settled


def test_a_file_that_got_a_freed_inode_number_back_is_not_taken_for_the_one_put_in() -> None:
    """Ours was destroyed by a Hermes rename, and Hermes' next temp file got its inode number back: only
    its mtime (and size) tell it apart. Compared by inode alone, the first round looked quiet and the
    put-back stopped with the newest version out of place. A file that cannot be examined (None) never
    counts as the one put in either."""
    ours, read, h1, reused = (5, 10, 222), (6, 1, 1), (7, 1, 1), (5, 10, 999)
    seen = iter([h1, reused, None])  # at our name after each exchange
    progress = atomic_exchange.Progress("tmp", ours)
    calls: list[str] = []

    def exchange(path: str, target: str) -> None:
        calls.append(path)

    def signature(_path: str):
        return next(seen)

    # 0: ours in, H1 out; 1: H1 in, `reused` out (not ours: not quiet); 2: `reused` in, then nothing
    # examinable: not quiet, and nothing to put back: left unsettled for the caller to keep.
    atomic_exchange._drive(progress, exchange, signature, lambda p: p, read, "target")
    assert len(calls) == 3 and not progress.settled


def _hermes_lands_before_our_exchange(path: Path, monkeypatch: pytest.MonkeyPatch,
                                      during_put_back: Callable[[], None]) -> None:
    """The next verified exchange catches a Hermes write (H1, with entry ``hermes1``) and so puts it back;
    ``during_put_back()`` runs right before the put-back's first exchange."""
    real_verified = atomic_exchange.swap_in_verified

    def before(n: int) -> OSError | None:
        if n == 0:
            data = json.loads(path.read_bytes())
            data["hermes1"] = marker_entries.build_entry("a Hermes turn")
            tmp = path.with_name(".interrupted_turns_h1.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, path)
        elif n == 1:
            return during_put_back()
        return None

    done: list[int] = []

    def verified(*args, **kwargs):
        if done:  # the retry: as it would run
            return real_verified(*args, **kwargs)
        done.append(1)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(atomic_exchange, "_verified_parts", hooked_parts(before))
            return real_verified(*args, **kwargs)

    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", verified)


@pytest.mark.parametrize("threads", [1, 2], ids=["one thread", "another thread running"])
def test_ctrl_c_during_the_put_back_leaves_hermes_version_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """A real SIGINT that arrives between our exchange and the put-back: with or without another thread
    (which may take the signal), KeyboardInterrupt surfaces only once Hermes' version is back; our write
    is simply not made, and nothing is left beside the file."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "p")
    path = marker_path(home)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    if threads == 2:
        other.start()
    try:
        _hermes_lands_before_our_exchange(path, monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
        with pytest.raises(KeyboardInterrupt):
            store.record("new", "p")
    finally:
        stop.set()
    assert set(json.loads(path.read_bytes())) == {"old", "hermes1"}
    assert [n for n in os.listdir(path.parent) if n.startswith(".")] == []  # nothing left, nothing kept


def test_a_hermes_version_that_cannot_be_set_aside_is_left_not_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The put-back fails mid-way (an I/O error on its first round), leaving Hermes' version under our
    temp name, and moving it aside fails too: it stays where it is, not unlinked with our temp file."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "p")
    path = marker_path(home)

    def failing_round() -> OSError:
        return OSError(5, "Input/output error")  # the put-back's exchange fails: it does not run

    _hermes_lands_before_our_exchange(path, monkeypatch, failing_round)
    monkeypatch.setattr(fsutil, "set_aside", lambda *a, **k: None)
    store.record("new", "p")  # the retry goes in over ours
    monkeypatch.undo()
    left = [n for n in os.listdir(path.parent) if n.endswith(".tmp")]
    assert len(left) == 1 and "hermes1" in json.loads((path.parent / left[0]).read_bytes())
    assert {"old", "new"} <= set(store.list())


def test_the_marker_store_keeps_a_version_it_could_not_put_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """End to end: Hermes renames over the marker file before every put-back round of one write. The
    write starts again and goes in; Hermes' newest version, which could not be put back, is kept beside
    the file (0600), never deleted, and the log names it (never a prompt)."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "SECRET-PROMPT-x")
    path = marker_path(home)
    newest: dict = {}
    count = iter(range(1, 200))

    def hermes_version() -> None:
        n = next(count)
        data = json.loads(path.read_bytes())
        data[f"hermes{n}"] = marker_entries.build_entry(f"hermes turn {n}")
        tmp = path.with_name(f".interrupted_turns_{n}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        newest.clear()
        newest.update(data)

    real_verified = atomic_exchange.swap_in_verified
    first: list[int] = []

    def verified(*args, **kwargs):
        if first:
            return real_verified(*args, **kwargs)
        first.append(1)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(atomic_exchange, "_verified_parts", hooked_parts(lambda n: hermes_version()))
            return real_verified(*args, **kwargs)

    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", verified)
    monkeypatch.setattr(atomic_exchange, "_PUT_BACK_ROUNDS", 8)  # fewer Hermes entries than MAX_ENTRIES
    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.markers.store"):
        store.record("new", "SECRET-PROMPT-y")
    kept = [n for n in os.listdir(path.parent) if ".unmerged-" in n]
    assert len(kept) == 1, os.listdir(path.parent)
    kept_path = path.parent / kept[0]
    assert json.loads(kept_path.read_bytes()) == newest  # Hermes' newest version, whole
    assert oct(os.stat(kept_path).st_mode & 0o777) == "0o600"
    assert "new" in store.list() and "old" in store.list()
    assert kept[0] in caplog.text and "SECRET-PROMPT" not in caplog.text


def test_a_merge_outrun_by_hermes_keeps_its_last_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The last attempt merges what each exchange hands back. Hermes renaming before every one of its
    exchanges outruns the merges: ours stays in place with our change, and the version that came out
    last (Hermes' newest, not merged) is kept, where it used to be unlinked."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "p")
    path = marker_path(home)
    real_swap = atomic_exchange.swap_in
    written: list[dict] = []

    def hermes_then_swap(new, target):
        data = json.loads(path.read_bytes())
        data[f"hermes{len(written)}"] = marker_entries.build_entry("a Hermes turn")
        tmp = path.with_name(f".interrupted_turns_{len(written)}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        written.append(data)
        return real_swap(new, target)

    monkeypatch.setattr(markers, "VERIFIED_RETRIES", 0)
    monkeypatch.setattr(markers.atomic_exchange, "swap_in", hermes_then_swap)
    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.markers.store"):
        store.record("new", "p")
    assert len(written) == markers.MERGE_ROUNDS + 1
    kept = [n for n in os.listdir(path.parent) if ".unmerged-" in n]
    assert len(kept) == 1 and json.loads((path.parent / kept[0]).read_bytes()) == written[-1]
    assert {"old", "new"} <= set(store.list())
    assert "kept changing" in caplog.text and kept[0] in caplog.text
