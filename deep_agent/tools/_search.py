"""``Glob`` and ``Grep``: finding files and text in the workspace, with Claude Code's argument names. Nothing
outside it is listed or read, symlinked folders are not followed, and no pipe, socket or device is opened (folders
through :func:`walk`, files through ``open_regular``); each search is bounded in time (the bounds below)."""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import Literal

import regex
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from deep_agent.tools._files import _tool
from deep_agent.tools._workspace import NotRegularFile, Workspace, is_folder, open_regular
from subagents._errors import InvalidArgument, nests_deeper
from subagents._transcripts import NOT_REGULAR

# ``Path.glob`` walks into ``node_modules`` and ``.git`` and cannot be stopped between matches. GlobWalk
# matches what Python 3.11's ``Path.glob`` matches on a walk that skips those folders and has a deadline;
# each folder carries the set of segments that could come next (an automaton), so a name costs one step.

STAR_STAR = "**"
CHECK_EVERY = 256  # names matched between two looks at the deadline

State = frozenset[int]  # segments that could match the next name (len(segments): all matched)


def is_wildcard(segment: str) -> bool:
    """Whether a pattern segment has a wildcard (as ``pathlib`` decides it)."""
    return "*" in segment or "?" in segment or "[" in segment


def walkable_from(folder: Path, pattern: str) -> tuple[Path, list[str], bool]:
    """Where the walk starts (``folder`` and the pattern's literal leading parts), the rest, and "folders only".
    Refuses (:class:`InvalidArgument`) what ``Path.glob`` refuses, and a ``..`` after a wildcard (each ``*/..``
    multiplies the walk by the number of folders)."""
    parts = list(PurePosixPath(pattern).parts)
    if not parts:
        raise InvalidArgument(f"Unacceptable pattern: {pattern!r}")  # as Path.glob says it
    if any(STAR_STAR in part and part != STAR_STAR for part in parts):
        raise InvalidArgument("Invalid pattern: '**' can only be an entire path component")
    dirs_only = pattern.endswith("/") or parts[-1] == STAR_STAR
    literal = 0
    while literal < len(parts) and not is_wildcard(parts[literal]):
        literal += 1
    if ".." in parts[literal:]:
        raise InvalidArgument("'..' may only come before the first wildcard (for example '../*.py', not '*/../x')")
    start = folder
    for part in parts[:literal]:  # as Path.glob: every leading part but the last must be a folder
        if not start.is_dir():
            return start / part, [], dirs_only  # below a file or a missing name: matches nothing
        start = start / part  # '..' kept as it is, so it means what the file system says it means
    return start, parts[literal:], dirs_only


class _Automaton:
    """The pattern's segments as states: which segments may come next after each name."""

    def __init__(self, segments: Sequence[str]) -> None:
        self.patterns = [None if s == STAR_STAR else re.compile(fnmatch.translate(s)) for s in segments]
        self.done = len(segments)
        self.first = self._closure(frozenset({0}))

    def _closure(self, states: set[int] | frozenset[int]) -> State:
        """``states`` with every state after a ``**`` (which may match no folder at all)."""
        out = set(states)
        for index in sorted(states):
            while index < self.done and self.patterns[index] is None:
                index += 1
                out.add(index)
        return frozenset(out)

    def step(self, states: State, name: str, *, real_folder: bool = False) -> State:
        """The states after one more name (``**`` takes only a folder that is not a symlink, as in Path.glob)."""
        after: set[int] = set()
        for index in states:
            if index == self.done:
                continue
            pattern = self.patterns[index]
            if pattern is None:  # '**' takes the folder and may take more
                if real_folder:
                    after.add(index)
            elif pattern.match(name) is not None:
                after.add(index + 1)
        return self._closure(after) if after else frozenset()


class GlobWalk:
    """The paths below ``start`` that match ``segments``, found lazily; ``timed_out`` once the deadline stopped it.
    Skipped folders are neither entered nor listed; symlinked folders are listed, not entered."""

    def __init__(self, start: Path, segments: Sequence[str], *, dirs_only: bool, skipped: frozenset[str],
                 deadline: float) -> None:
        self.start, self.segments, self.dirs_only = start, segments, dirs_only
        self.skipped, self.deadline = skipped, deadline
        self.timed_out = False

    def _out_of_time(self) -> bool:
        self.timed_out = time.monotonic() > self.deadline
        return self.timed_out

    def __iter__(self) -> Iterator[Path]:
        start = self.start
        if not self.segments:  # a pattern of literal names only: that path, if it exists
            if start.is_dir() if self.dirs_only else start.exists():
                yield start
            return
        if not start.is_dir():
            return
        automaton = _Automaton(self.segments)
        # A literal last name must exist, as Path.glob checks it (a broken symlink does not).
        must_exist = not is_wildcard(self.segments[-1]) and self.segments[-1] != STAR_STAR
        if automaton.done in automaton.first:  # '**' alone matches the folder it starts in, as Path.glob lists it
            yield start
        states = {str(start): automaton.first}
        for folder, dirs, files in walk(start):
            if self._out_of_time():
                return
            here = states.pop(folder, frozenset())
            deeper = []
            names = [*((name, True) for name in dirs), *((name, False) for name in (() if self.dirs_only else files))]
            for counted, (name, is_dir) in enumerate(names, 1):
                if counted % CHECK_EVERY == 0 and self._out_of_time():
                    return
                if is_dir and name in self.skipped:
                    continue
                path = os.path.join(folder, name)
                after = automaton.step(here, name, real_folder=is_dir and not os.path.islink(path))
                if automaton.done in after and (is_dir or not must_exist or os.path.exists(path)):
                    yield Path(folder, name)
                if is_dir and any(index < automaton.done for index in after):  # a match may lie below it
                    states[path] = after
                    deeper.append(name)
            dirs[:] = deeper


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def walk(top: Path | str, _parent: int | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.fwalk(top)``'s folders, names and files, top-down (prune ``dirs`` in place), each folder opened by name
    ``O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK``: a pipe or symlink swapped in is not entered (``os.fwalk``'s blocking
    ``open`` of its top waited for ever on a FIFO)."""
    try:
        fd = os.open(top if _parent is None else os.path.basename(top), _FOLDER_FLAGS, dir_fd=_parent)
    except OSError:  # a symlinked folder, or no folder any more
        return
    try:
        dirs: list[str] = []
        files: list[str] = []
        with os.scandir(fd) as entries:
            for entry in entries:
                (dirs if is_folder(entry) else files).append(entry.name)
        yield str(top), dirs, files
        for name in dirs:
            yield from walk(os.path.join(top, name), fd)
    finally:
        os.close(fd)


MAX_MATCHES = 500
MAX_FILE_BYTES = 2_000_000
GREP_SECONDS = 10.0
# A Grep pattern compiles without a timeout (a counted repeat copies what it repeats), then searches with the regex
# package's ((a|aa)+$ backtracks without end).
MAX_PATTERN_SIZE = 100_000  # the most parts a Grep pattern may expand to
MAX_GLOB_SCANNED = 20_000  # matches Glob collects (to sort them newest first) before it stops looking
GLOB_SECONDS = 10.0
_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".deep_agent"})


class GlobInput(BaseModel):
    pattern: str = Field(description="A glob such as '**/*.py'.")
    path: str | None = Field(default=None, description="The folder to search (default: the workspace).")


class GrepInput(BaseModel):
    pattern: str = Field(description="A regular expression (Python syntax).")
    path: str | None = Field(default=None, description="A file or folder (default: the workspace).")
    glob: str | None = Field(default=None, description="Only files whose name matches, e.g. '*.py'.")
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        default="files_with_matches",
        description="files_with_matches (default), content (matching lines) or count.",
    )


def search_tools(ws: Workspace) -> list[StructuredTool]:
    """``Glob`` and ``Grep``, bound to ``ws``."""

    def glob(pattern: str, path: str | None = None) -> str:
        folder = ws.path(path, field="path")
        if not folder.is_dir():  # a file, pipe or device: nothing below it to list, and nothing opened
            raise ToolException(f"path {ws.shown(folder)!r}: not a folder; Glob lists the files below a folder")
        if Path(pattern).is_absolute():
            raise ToolException("pattern must be relative to path (for example '**/*.py')")
        depth = len(folder.relative_to(ws.root).parts)  # a ``..`` climbing out (``../../../**/*`` walks the disk)
        for segment in pattern.split("/"):
            if segment == "..":
                depth -= 1
                if depth < 0:
                    raise ToolException(f"pattern {pattern[:200]!r} climbs out of the workspace with '..': "
                                        "only paths inside it can be listed")
            elif segment not in ("", ".", "**"):
                depth += 1
        try:
            start, segments, dirs_only = walkable_from(folder, pattern)
            walk = GlobWalk(start, segments, dirs_only=dirs_only, skipped=_SKIPPED_DIRS,
                            deadline=time.monotonic() + GLOB_SECONDS)
            matches = (p for p in walk if ws.holds(p) and not (
                p.is_relative_to(ws.root) and _SKIPPED_DIRS.intersection(p.relative_to(ws.root).parts)))
            found = list(islice(matches, MAX_GLOB_SCANNED + 1))
        except (ValueError, OSError, RecursionError) as exc:
            raise ToolException(f"pattern {pattern!r}: {exc}") from None
        stopped = len(found) > MAX_GLOB_SCANNED
        found = found[:MAX_GLOB_SCANNED]
        found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
        lines = [ws.shown(p) for p in found[:MAX_MATCHES]]
        if walk.timed_out:
            lines.append(f"... [stopped looking after {GLOB_SECONDS:g} s: narrow the pattern or path]")
        elif stopped:
            lines.append(f"... [stopped looking after {MAX_GLOB_SCANNED} matches: narrow the pattern or path]")
        elif len(found) > MAX_MATCHES:
            lines.append(f"... [{len(found) - MAX_MATCHES} more matches]")
        return ws.bound("\n".join(lines) or "no files match")

    def grep(pattern: str, path: str | None = None, glob: str | None = None,
             output_mode: str = "files_with_matches") -> str:
        if (size := pattern_size(pattern)) > MAX_PATTERN_SIZE:
            raise ToolException(f"pattern {pattern[:200]!r} is not a valid regular expression here: its repeats "
                                f"would compile to about {size:.3g} parts (at most {MAX_PATTERN_SIZE:,}); "
                                "use smaller counts such as {1,100}")
        try:
            if nests_deeper(pattern):
                raise RecursionError
            compiled = regex.compile(pattern)
        # not only regex.error: OverflowError (a{99999999999}) and RecursionError (deep groups) too
        except (regex.error, OverflowError, RecursionError) as exc:
            reason = "it nests too deeply" if isinstance(exc, RecursionError) else exc
            raise ToolException(f"pattern {pattern[:200]!r} is not a valid regular expression: {reason}") from None
        lines: list[str] = []
        not_regular: list[str] = []
        deadline = time.monotonic() + GREP_SECONDS
        start = file = ws.path(path, field="path")
        try:
            for file in _files(ws, start, glob, deadline):
                try:
                    hits = _matches(ws, file, compiled, deadline)
                except NotRegularFile:
                    if file == start:
                        raise ToolException(f"path {ws.shown(start)!r}: {NOT_REGULAR}; only regular files "
                                            "and folders can be searched") from None
                    not_regular.append(ws.shown(file))
                    continue
                if not hits:
                    continue
                name = ws.shown(file)
                if output_mode == "files_with_matches":
                    lines.append(name)
                elif output_mode == "count":
                    lines.append(f"{name}:{len(hits)}")
                else:
                    lines.extend(f"{name}:{number}:{text}" for number, text in hits)
                if len(lines) >= MAX_MATCHES:
                    lines.append(f"... [stopped after {MAX_MATCHES} results]")
                    break
        except TimeoutError:
            raise ToolException(f"pattern {pattern[:200]!r} took more than {GREP_SECONDS:g} s to match "
                                f"(stopped in {ws.shown(file)}): it may backtrack without end, or there is "
                                "too much to search; simplify it or narrow path or glob") from None
        if not_regular:
            shown = ", ".join(not_regular[:5]) + (f" and {len(not_regular) - 5} more" if len(not_regular) > 5 else "")
            lines.append(f"... [not searched, not regular files (pipes, sockets or devices): {shown}]")
        return ws.bound("\n".join(lines) or "no matches")

    return [
        _tool(ws, glob, "Glob", GlobInput, "Find files of the workspace by glob pattern, newest first."),
        _tool(ws, grep, "Grep", GrepInput, "Search file contents of the workspace with a regular expression."),
    ]


def pattern_size(pattern: str) -> float:
    """About how many parts ``pattern`` compiles to (an over-estimate): a counted repeat multiplies what it repeats."""
    totals: list[float] = [0.0]  # one running size per open group
    last = 0.0  # the size of the item a quantifier would repeat
    i = 0
    while i < len(pattern):
        char, start, i = pattern[i], i, i + 1
        if char == "(":
            totals.append(0.0)
        elif char == ")" and len(totals) > 1:
            last = max(totals.pop(), 1.0)
            totals[-1] += last
        elif char == "{" and (repeat := _REPEAT.match(pattern, start)) and any(repeat.groups()):
            count = max(float(g) if len(g) < 12 else float("inf") for g in repeat.groups() if g)
            totals[-1] += last * (count - 1)
            last *= count
            i = repeat.end()
        else:
            i = _class_end(pattern, start) if char == "[" else start + (2 if char == "\\" else 1)
            totals[-1] += 1
            last = 1.0
    return sum(totals)


_REPEAT = regex.compile(r"\{(\d*)(?:,(\d*))?\}")


def _class_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the character class opened at ``start``."""
    i = start + 1
    i += pattern[i:i + 1] == "^"
    i += pattern[i:i + 1] == "]"
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _files(ws: Workspace, start: Path, glob: str | None, deadline: float) -> Iterator[Path]:
    if not start.is_dir():  # a file, or a pipe or device: opened (or refused) by _matches alone
        yield start
        return
    for folder, dirs, files in walk(start):  # symlinked folders, even swapped in mid-walk, are not entered
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        if time.monotonic() > deadline:  # a huge tree, or many files the glob leaves out
            raise TimeoutError
        for name in sorted(files):
            file = Path(folder) / name
            if glob and not (fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(ws.shown(file), glob)):
                continue
            if ws.holds(file):  # a symlink loop is skipped
                yield file


def _matches(ws: Workspace, file: Path, pattern: regex.Pattern[str], deadline: float) -> list[tuple[int, str]]:
    """The file's matching lines; ``TimeoutError`` once ``deadline`` passes mid-search."""
    try:  # a pipe or device, a hard-linked file, a path swapped for a symlink: skipped; a symlink: its target
        with open_regular(file.resolve(), within=ws) as handle:  # at most one byte past the bound
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return []
        text = data.decode("utf-8")
    except NotRegularFile:
        raise  # said in a note: it was neither searched nor waited on
    except (OSError, UnicodeDecodeError):
        return []  # binary or unreadable files are not searched
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        left = deadline - time.monotonic()
        if left <= 0:  # each line's search may be fast, and still the lines are too many
            raise TimeoutError
        if pattern.search(line, timeout=left):
            hits.append((number, line[:500]))
    return hits
