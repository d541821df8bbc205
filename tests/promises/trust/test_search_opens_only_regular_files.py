"""Grep and Glob never open a pipe, socket or device: a FIFO is refused or skipped with a note, never waited on.

A FIFO no one writes to blocks whoever opens it to read. ``Read`` refuses
one; ``Grep`` given one as ``path`` used to wait for ever (its folder walk
opened it). Every open of the two search tools goes through the folder
walk (folders only) or ``open_regular`` (regular files only).

The thread joins below are deadlock detectors, generous on purpose: no
time budget is asserted.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from deep_agent.tools import Workspace
from deep_agent.tools._search import search_tools, walk

HANG = 60.0


def call(tool: Any, args: dict[str, Any]) -> str:
    """The tool's answer (or its error's text), failing the test if it never comes back."""
    out: list[str] = []

    def run() -> None:
        out.append(str(tool.invoke(args)))  # a tool error comes back as its text

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"{tool.name}({args}) is blocked (a FIFO was opened)"
    return out[0]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("hello there\n")
    os.mkfifo(tmp_path / "pipe")
    os.mkfifo(tmp_path / "sub" / "inner-pipe")
    return tmp_path


def tools(ws: Path) -> dict[str, Any]:
    return {tool.name: tool for tool in search_tools(Workspace(ws))}


def test_grep_given_a_fifo_as_path_says_it_is_not_a_regular_file(ws):
    out = call(tools(ws)["Grep"], {"pattern": "hello", "path": "pipe"})
    assert out.startswith("path 'pipe': not a regular file"), out


def test_grep_over_a_folder_skips_the_fifos_in_it_and_names_them(ws):
    out = call(tools(ws)["Grep"], {"pattern": "hello", "output_mode": "content"})
    found, note = out.split("\n")
    assert found == "sub/notes.txt:1:hello there"
    assert note.startswith("... [not searched, not regular files") and "pipe" in note and "sub/inner-pipe" in note


def test_glob_given_a_fifo_as_path_says_it_is_not_a_folder(ws):
    out = call(tools(ws)["Glob"], {"pattern": "*", "path": "pipe"})
    assert out == "path 'pipe': not a folder; Glob lists the files below a folder", out


def test_glob_lists_a_fifo_by_name_without_opening_it(ws):
    out = call(tools(ws)["Glob"], {"pattern": "**/*pipe"})
    assert sorted(out.split("\n")) == ["pipe", "sub/inner-pipe"]


class OpenWatch:
    """Every ``open`` audit event (``os.open`` and ``open``) while switched on: path and flags."""

    def __init__(self) -> None:
        self.on = False
        self.seen: list[tuple[object, int]] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.on and event == "open" and not isinstance(args[0], int):  # an int: an fd already open
            self.seen.append((args[0], args[2]))


@pytest.fixture()
def open_watch() -> Any:
    watch = OpenWatch()
    sys.addaudithook(watch)  # hooks cannot be removed: it only records while switched on
    watch.on = True
    yield watch
    watch.on = False


@pytest.mark.parametrize("tool, args", [
    ("Grep", {"pattern": "hello"}), ("Grep", {"pattern": "hello", "path": "pipe"}),
    ("Grep", {"pattern": "hello", "path": "sub"}), ("Grep", {"pattern": "hello", "path": "sub/notes.txt"}),
    ("Glob", {"pattern": "**/*"}), ("Glob", {"pattern": "*", "path": "pipe"}),
    ("Glob", {"pattern": "sub/*"}),
])
def test_a_search_opens_a_folder_as_one_and_never_opens_anything_but_a_regular_file(ws, open_watch, tool, args):
    """The chokepoint: a search opens a folder only as a folder (O_DIRECTORY); anything else it looks at first
    through an O_PATH descriptor, which opens nothing, and opens only a regular file, through that descriptor.

    A pipe was opened non-blocking and refused after: its waiting writer was released all the same.
    """
    call(tools(ws)[tool], args)
    open_watch.on = False
    assert open_watch.seen or args.get("path") == "pipe"  # the watch sees opens; a FIFO path opens nothing
    searched = [(str(path), flags) for path, flags in open_watch.seen if not str(path).startswith(
        (str(ws / ".git") + "/", sys.prefix, sys.base_prefix))]  # the protected set's own reads, imports
    opened = [path for path, flags in searched if not flags & (os.O_PATH | os.O_DIRECTORY)]
    assert all(path.startswith("/proc/self/fd/") for path in opened), opened
    assert not [path for path, flags in open_watch.seen if "pipe" in str(path) and not flags & os.O_PATH]


def test_the_walk_given_a_fifo_as_its_top_lists_nothing(ws):
    assert list(walk(ws / "pipe")) == []
