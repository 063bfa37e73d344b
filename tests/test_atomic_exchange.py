"""hermes_tray_core.atomic_exchange: putting a foreign writer's version back after our exchange, with
real files and real exchanges. A scripted foreign writer renames its versions over the target between
the rounds of the put-back, the way Hermes' ``atomic_json_write`` does (write a temp file, rename)."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import pytest

from hermes_tray_core import atomic_exchange, fsutil, markers
from hermes_tray_core.markers import MarkerStore, marker_path

pytestmark = pytest.mark.skipif(atomic_exchange.mechanism() == "none", reason="no atomic exchange here")


class Foreign:
    """A non-locking writer: each call renames a new version (its content names it) over ``target``."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.n = 0

    def rename(self) -> str:
        self.n += 1
        name = f"H{self.n}"
        tmp = self.target.with_name(f".foreign_{name}.tmp")
        tmp.write_text(name)
        os.replace(tmp, self.target)
        return name


def _script_rounds(monkeypatch: pytest.MonkeyPatch, before_round: dict[int, int]) -> list[int]:
    """Wrap the real put-back so that the foreign writer renames ``before_round[k]`` times right before
    round ``k`` (1-based) exchanges: the rename lands between two of our syscalls."""
    real = atomic_exchange._put_back
    rounds: list[int] = []

    def scripted(swap, inode, path, out, put_in, target):
        foreign = Foreign(Path(target))
        foreign.n = 1  # H1 came out of the first exchange

        def swap_after_renames(p: str) -> str:
            rounds.append(len(rounds) + 1)
            for _ in range(before_round.get(len(rounds), 0)):
                foreign.rename()
            return swap(p)

        return real(swap_after_renames, inode, path, out, put_in, target)

    monkeypatch.setattr(atomic_exchange, "_put_back", scripted)
    return rounds


def _exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before_round: dict[int, int]
              ) -> tuple[Path, Path, list[int]]:
    """We read version R and write ours; H1 lands after our read; then the put-back runs with the
    scripted renames. Returns (target, the path the put-back hands back, the rounds run)."""
    target = tmp_path / "file.json"
    target.write_text("R")
    read = fsutil.file_signature(target)
    ours = tmp_path / ".ours.tmp"
    ours.write_text("ours")
    our_sig = fsutil.file_signature(ours)
    h1 = tmp_path / ".foreign_H1.tmp"
    h1.write_text("H1")
    os.replace(h1, target)  # after our read, before our exchange
    rounds = _script_rounds(monkeypatch, before_round)
    back, was_read = atomic_exchange.swap_in_verified(str(ours), str(target), read, our_sig)
    assert was_read is False
    return target, Path(back), rounds


def test_a_rename_before_our_exchange_goes_straight_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, back, rounds = _exchange(tmp_path, monkeypatch, {})
    assert target.read_text() == "H1" and back.read_text() == "ours" and rounds == [1]


def test_a_rename_over_ours_before_the_put_back_leaves_the_newest_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, back, rounds = _exchange(tmp_path, monkeypatch, {1: 1})  # H2 destroys ours
    assert target.read_text() == "H2" and back.read_text() == "H1" and rounds == [1, 2]


@pytest.mark.parametrize("busy", [1, 2, 3, 4, 7, 20, atomic_exchange._PUT_BACK_ROUNDS - 1])
def test_renames_during_the_put_back_never_hand_the_newest_back_for_removal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: int) -> None:
    """The foreign writer renames right before each of the first ``busy`` rounds (H2 destroys ours, H3…
    land over what we put back). A put-back that stopped on a round count ended one round off for half
    of these and handed the newest foreign version to the caller to delete."""
    target, back, rounds = _exchange(tmp_path, monkeypatch, {k: 1 for k in range(1, busy + 1)})
    assert target.read_text() == f"H{busy + 1}", "the newest foreign version must stand"
    assert back.read_text() != f"H{busy + 1}" and back.read_text() != "ours"
    assert rounds == list(range(1, busy + 2))  # it stops at the first quiet round


def test_the_target_removed_during_the_put_back_settles_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = atomic_exchange._put_back

    def removed(swap, inode, path, out, put_in, target):
        def swap_after_removal(p: str) -> str:
            os.unlink(target)
            return swap(p)
        return real(swap_after_removal, inode, path, out, put_in, target)

    monkeypatch.setattr(atomic_exchange, "_put_back", removed)
    target = tmp_path / "file.json"
    target.write_text("R")
    read = fsutil.file_signature(target)
    ours = tmp_path / ".ours.tmp"
    ours.write_text("ours")
    (tmp_path / ".h1").write_text("H1")
    os.replace(tmp_path / ".h1", target)
    back, was_read = atomic_exchange.swap_in_verified(str(ours), str(target), read, fsutil.file_signature(ours))
    assert not target.exists() and Path(back).read_text() == "H1" and was_read is False


def test_a_writer_renaming_every_round_leaves_its_newest_version_to_keep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    every = {k: 1 for k in range(1, atomic_exchange._PUT_BACK_ROUNDS + 1)}
    with pytest.raises(atomic_exchange.PutBackIncomplete) as caught:
        _exchange(tmp_path, monkeypatch, every)
    newest = f"H{atomic_exchange._PUT_BACK_ROUNDS + 1}"
    assert Path(caught.value.filename).read_text() == newest  # handed to the caller to keep
    assert (tmp_path / "file.json").read_text() != newest


def test_the_marker_store_keeps_a_version_it_could_not_put_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """End to end: Hermes renames over the marker file in every put-back round of one write. The write
    starts again and goes in; Hermes' newest version, which it could not put back, is kept beside the
    file (0600), never deleted, and the log names it (never a prompt)."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "SECRET-PROMPT-x")
    path = marker_path(home)
    real_put_back = atomic_exchange._put_back
    real_verified = atomic_exchange.swap_in_verified
    calls: list[int] = []
    newest: dict = {}

    def hermes_version(n: int) -> str:
        data = json.loads(path.read_bytes())
        data[f"hermes{n}"] = markers.build_entry(f"hermes turn {n}")
        tmp = path.with_name(f".interrupted_turns_{n}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        newest.clear()
        newest.update(data)
        return str(tmp)

    def relentless(swap, inode, p, out, put_in, target):
        n = iter(range(100, 200))

        def swap_after_rename(q: str) -> str:
            hermes_version(next(n))
            return swap(q)
        return real_put_back(swap_after_rename, inode, p, out, put_in, target)

    def first_write_raced(new, target, read_ino, our_ino):
        if not calls:
            calls.append(1)
            hermes_version(1)  # lands after our last check: the put-back starts
            monkeypatch.setattr(atomic_exchange, "_put_back", relentless)
            try:
                return real_verified(new, target, read_ino, our_ino)
            finally:
                monkeypatch.setattr(atomic_exchange, "_put_back", real_put_back)
        return real_verified(new, target, read_ino, our_ino)

    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", first_write_raced)
    monkeypatch.setattr(atomic_exchange, "_PUT_BACK_ROUNDS", 8)  # fewer Hermes entries than MAX_ENTRIES
    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.markers"):
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
        data[f"hermes{len(written)}"] = markers.build_entry("a Hermes turn")
        tmp = path.with_name(f".interrupted_turns_{len(written)}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        written.append(data)
        return real_swap(new, target)

    monkeypatch.setattr(markers, "VERIFIED_RETRIES", 0)
    monkeypatch.setattr(markers.atomic_exchange, "swap_in", hermes_then_swap)
    with caplog.at_level(logging.WARNING, logger="hermes_tray_core.markers"):
        store.record("new", "p")
    assert len(written) == markers.MERGE_ROUNDS + 1
    kept = [n for n in os.listdir(path.parent) if ".unmerged-" in n]
    assert len(kept) == 1 and json.loads((path.parent / kept[0]).read_bytes()) == written[-1]
    assert {"old", "new"} <= set(store.list())
    assert "kept changing" in caplog.text and kept[0] in caplog.text


def _hermes_lands_before_our_exchange(path: Path, monkeypatch: pytest.MonkeyPatch, during_put_back) -> None:
    """The next verified exchange catches a Hermes write (H1, with entry ``hermes1``) and so puts it back;
    ``during_put_back()`` runs inside the put-back, before its first round."""
    real_verified, real_put_back = atomic_exchange.swap_in_verified, atomic_exchange._put_back

    def put_back(swap, signature, p, out, put_in, target):
        def first(q: str) -> str:
            during_put_back()
            return swap(q)
        return real_put_back(first, signature, p, out, put_in, target)

    def verified(new, target, read, ours):
        data = json.loads(path.read_bytes())
        data["hermes1"] = markers.build_entry("a Hermes turn")
        tmp = path.with_name(".interrupted_turns_h1.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        monkeypatch.setattr(atomic_exchange, "_put_back", put_back)
        try:
            return real_verified(new, target, read, ours)
        finally:
            monkeypatch.setattr(atomic_exchange, "_put_back", real_put_back)
            monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", real_verified)

    monkeypatch.setattr(markers.atomic_exchange, "swap_in_verified", verified)


def test_ctrl_c_during_the_put_back_waits_until_hermes_version_is_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (SIGINT) that arrives between our exchange and the put-back is held back until the
    put-back is done: Hermes' version stands and our write is simply not made. Let through at once, it
    left ours in place and Hermes' version under our temp name."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "p")
    path = marker_path(home)
    _hermes_lands_before_our_exchange(path, monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        store.record("new", "p")
    assert set(json.loads(path.read_bytes())) == {"old", "hermes1"}
    assert [n for n in os.listdir(path.parent) if n.startswith(".")] == []  # nothing left, nothing kept


def test_a_hermes_version_that_cannot_be_set_aside_is_left_not_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The put-back fails mid-way (an I/O error on its first round), leaving Hermes' version under our
    temp name, and moving it aside fails too: it must stay where it is, not be unlinked with our temp
    file."""
    home = tmp_path / "home"
    store = MarkerStore(home)
    store.record("old", "p")
    path = marker_path(home)

    def failing_round() -> None:
        raise OSError(5, "Input/output error")

    _hermes_lands_before_our_exchange(path, monkeypatch, failing_round)
    monkeypatch.setattr(fsutil, "set_aside", lambda *a, **k: None)
    store.record("new", "p")  # the retry goes in over ours
    monkeypatch.undo()
    left = [n for n in os.listdir(path.parent) if n.endswith(".tmp")]
    assert len(left) == 1 and "hermes1" in json.loads((path.parent / left[0]).read_bytes())
    assert {"old", "new"} <= set(store.list())


def test_a_file_that_got_a_freed_inode_number_back_is_not_taken_for_the_one_put_in() -> None:
    """Ours was destroyed by a Hermes rename, and Hermes' next temp file got its inode number back: only
    its mtime (and size) tell it apart. Compared by inode alone, the first round looked quiet and the
    put-back stopped with the newest version out of place."""
    ours, h1, reused = (5, 10, 222), (7, 1, 1), (5, 10, 999)
    came_out = iter([reused, h1])
    rounds: list[str] = []

    def swap(path: str) -> str:
        rounds.append(path)
        return path

    assert atomic_exchange._put_back(swap, lambda _p: next(came_out), "tmp", h1, ours, "target") == "tmp"
    assert len(rounds) == 2
