"""File tools are race-free: a path changed after its check, or a hard link, never leads outside the workspace.

The tools check a path (resolved, inside the workspace), then open it one
folder at a time from the workspace's own with ``O_NOFOLLOW``: a symlink
swapped in between the two is refused, not followed. A file with more than
one hard link is refused by Read, Write and Edit (and skipped by Grep).
Glob and Grep walk folders by descriptor (``os.fwalk``), never into a
folder swapped for a symlink.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deep_agent.tools import Workspace, builtin_tools

SECRET = "the-secret-outside"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace, and a folder outside it holding a secret file and a folder of secrets."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "sub" / "f.txt").write_text(SECRET)
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "target.txt").write_text("inside\n")
    (ws / "sub" / "f.txt").write_text("inside\n")
    return ws, outside


def tools(ws: Path) -> dict:
    return {t.name: t for t in builtin_tools(Workspace(ws))}


def swap_after_check(monkeypatch, swap) -> None:
    """Each path check is followed at once by ``swap()``: the worst moment a concurrent swapper could pick."""
    real = Workspace.path

    def checked_then_swapped(self, raw, **kwargs):
        resolved = real(self, raw, **kwargs)
        swap()
        return resolved

    monkeypatch.setattr(Workspace, "path", checked_then_swapped)


def file_to_symlink(ws: Path, outside: Path):
    def swap():
        link = ws / "swap.tmp"
        link.unlink(missing_ok=True)
        link.symlink_to(outside / "secret.txt")
        os.replace(link, ws / "target.txt")
    return swap


def folder_to_symlink(ws: Path, outside: Path):
    def swap():
        if not (ws / "sub").is_symlink():
            os.rename(ws / "sub", ws / "sub.parked")
            (ws / "sub").symlink_to(outside / "sub", target_is_directory=True)
    return swap


def outside_unchanged(outside: Path) -> None:
    assert (outside / "secret.txt").read_text() == SECRET
    assert (outside / "sub" / "f.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "sub"]
    assert sorted(p.name for p in (outside / "sub").iterdir()) == ["f.txt"]


@pytest.mark.parametrize("tool, args", [
    ("Read", {"file_path": "target.txt"}),
    ("Write", {"file_path": "target.txt", "content": "overwritten"}),
    ("Edit", {"file_path": "target.txt", "old_string": "the-secret", "new_string": "changed"}),
    ("Grep", {"pattern": "secret", "path": "target.txt", "output_mode": "content"}),
])
def test_a_file_swapped_for_a_symlink_after_its_check_is_refused(layout, monkeypatch, tool, args):
    ws, outside = layout
    t = tools(ws)
    swap_after_check(monkeypatch, file_to_symlink(ws, outside))
    result = t[tool].invoke(args)
    assert SECRET not in result, result
    if tool != "Grep":
        assert "changed while being opened" in result, result
    outside_unchanged(outside)


@pytest.mark.parametrize("tool, args", [
    ("Read", {"file_path": "sub/f.txt"}),
    ("Write", {"file_path": "sub/f.txt", "content": "overwritten"}),
    ("Write", {"file_path": "sub/new/deeper.txt", "content": "created"}),
    ("Edit", {"file_path": "sub/f.txt", "old_string": "the-secret", "new_string": "changed"}),
    ("LS", {"path": "sub"}),
])
def test_a_folder_swapped_for_a_symlink_after_its_check_is_refused(layout, monkeypatch, tool, args):
    ws, outside = layout
    t = tools(ws)
    swap_after_check(monkeypatch, folder_to_symlink(ws, outside))
    result = t[tool].invoke(args)
    assert SECRET not in result and "f.txt" not in result.replace("sub/f.txt", ""), result
    assert "changed while being opened" in result, result
    outside_unchanged(outside)


def test_a_concurrent_swapper_never_leads_read_or_write_outside(layout):
    """A thread flips a file and a folder between the real thing and a symlink out, for a few seconds."""
    ws, outside = layout
    t = tools(ws)
    (ws / "sub.other").symlink_to(outside / "sub", target_is_directory=True)
    stop = threading.Event()
    flips = [0]

    def swapper() -> None:
        real_file, link = ws / ".real.tmp", ws / ".link.tmp"
        while not stop.is_set():
            real_file.write_text("inside\n")
            os.replace(real_file, ws / "target.txt")
            link.unlink(missing_ok=True)
            link.symlink_to(outside / "secret.txt")
            os.replace(link, ws / "target.txt")
            # the folder: the real one and a symlink out take turns at ws/sub
            os.rename(ws / "sub", ws / "sub.parked")
            os.rename(ws / "sub.other", ws / "sub")
            os.rename(ws / "sub.parked", ws / "sub.other")
            flips[0] += 1

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    calls = {"Read": 0, "Write": 0, "inside": 0}
    try:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            for path in ("target.txt", "sub/f.txt"):
                read = t["Read"].invoke({"file_path": path})
                calls["Read"] += 1
                assert SECRET not in read, (path, read)
                calls["inside"] += "inside" in read
                if path == "target.txt":
                    t["Write"].invoke({"file_path": path, "content": "written by the tool\n"})
                else:  # Edit, not Write, in the folder: Write would make a new sub/ while it is briefly away
                    t["Edit"].invoke({"file_path": path, "old_string": "the-secret", "new_string": "changed"})
                calls["Write"] += 1
            grep = t["Grep"].invoke({"pattern": "secret|inside", "output_mode": "content"})
            assert SECRET not in grep, grep
    finally:
        stop.set()
        thread.join(timeout=10)
    assert flips[0] > 10 and calls["Read"] > 10, (flips, calls)
    outside_unchanged(outside)


@pytest.mark.parametrize("tool, args", [
    ("Read", {"file_path": "linked.txt"}),
    ("Write", {"file_path": "linked.txt", "content": "overwritten"}),
    ("Edit", {"file_path": "linked.txt", "old_string": "the-secret", "new_string": "changed"}),
    ("Grep", {"pattern": "secret", "output_mode": "content"}),
])
def test_a_hard_link_to_a_file_outside_is_refused(layout, tool, args):
    ws, outside = layout
    os.link(outside / "secret.txt", ws / "linked.txt")
    result = tools(ws)[tool].invoke(args)
    assert SECRET not in result, result
    if tool != "Grep":
        assert "hard links" in result, result
    outside_unchanged(outside)


def test_ordinary_files_and_symlinks_inside_the_workspace_still_work(layout):
    ws, _ = layout
    (ws / "alias.txt").symlink_to(ws / "target.txt")
    t = tools(ws)
    assert "inside" in t["Read"].invoke({"file_path": "alias.txt"})
    assert "Created" in t["Write"].invoke({"file_path": "new/deeper/x.txt", "content": "made\n"})
    assert (ws / "new" / "deeper" / "x.txt").read_text() == "made\n"
    assert "Edited" in t["Edit"].invoke({"file_path": "sub/f.txt", "old_string": "inside", "new_string": "edited"})
    assert "alias.txt" in t["Grep"].invoke({"pattern": "inside"})
    assert "sub/" in t["LS"].invoke({})



class SwapWatch:
    """The real path of every folder the process lists (an audit hook), and one swap at the worst moment.

    Once armed with ``(folder, target)``, the first time ``folder`` is about to
    be listed it is renamed away and a symlink to ``target`` put in its place:
    the moment between a walk's check that it is no symlink and its listing.
    """

    def __init__(self) -> None:
        self.folders: list[str] = []
        self.swap: tuple[Path, Path] | None = None
        self.on = False

    @staticmethod
    def real(where: object) -> str:
        if isinstance(where, int):  # listed by descriptor (os.fwalk): the folder it holds
            return os.readlink(f"/proc/self/fd/{where}")
        return os.path.realpath(os.fsdecode(where))  # type: ignore[arg-type]

    def __call__(self, event: str, args: tuple) -> None:
        if event != "os.scandir" or not self.on or threading.current_thread() is not threading.main_thread():
            return
        if not args or args[0] is None:
            return
        where = self.real(args[0])
        if self.swap is not None and where == str(self.swap[0]):
            folder, target = self.swap
            self.swap = None
            folder.rename(folder.with_name(folder.name + "-moved"))
            folder.symlink_to(target, target_is_directory=True)
            where = self.real(args[0])
        self.folders.append(where)


@pytest.fixture()
def swap_watch() -> Iterator[SwapWatch]:
    watch = SwapWatch()
    sys.addaudithook(watch)  # hooks cannot be removed: it only acts while switched on
    watch.on = True
    yield watch
    watch.on = False


@pytest.mark.parametrize("tool, args", [
    ("Glob", {"pattern": "**/*.txt"}),
    ("Grep", {"pattern": "secret|inside", "output_mode": "files_with_matches"}),
])
def test_a_folder_swapped_for_a_symlink_mid_walk_is_not_entered(layout, swap_watch, tool, args):
    ws, outside = layout
    (outside / "sub" / "deeper").mkdir()
    (outside / "sub" / "deeper" / "only-outside.txt").write_text(SECRET)
    swap_watch.swap = (ws / "sub", outside / "sub")
    out = str(tools(ws)[tool].invoke(args))
    assert (ws / "sub").is_symlink(), "the swap happened"
    entered = [f for f in swap_watch.folders if f == str(outside) or f.startswith(str(outside) + os.sep)]
    assert not entered, entered
    assert "only-outside" not in out and SECRET not in out, out
