"""``Glob`` and ``Grep``: finding files and text in the workspace, with Claude Code's argument names.

Nothing outside the workspace is listed or read: matches that resolve
outside it (through ``..`` or a symlink), or that cannot be resolved (a
symlink loop), are skipped, and symlinked folders are not followed.

A search is bounded in time: ``Grep`` matches with the ``regex`` package
(the same syntax as ``re``), whose searches take a timeout, so a pattern
that backtracks catastrophically (``(a|aa)+$`` on a long line) ends the
call after :data:`GREP_SECONDS` with an error naming the pattern and the
file, rather than hanging the agent. The deadline is also checked between
lines and files, so a fast pattern over millions of lines stops in time
too. A pattern whose counted repeats would compile to more than
:data:`MAX_PATTERN_SIZE` parts (``(?:a{1000}){1000}``) is refused before
compiling: compiling expands each repeat, and no timeout bounds it (such a
pattern can take all the memory of the machine). ``Glob`` never enters the
skipped folders (``.git``, ``node_modules``, ...: see :mod:`._glob`), stops
after :data:`MAX_GLOB_SCANNED` matches or :data:`GLOB_SECONDS` and says
so. Its walk visits each folder once whatever the number of ``**`` parts.

Example::

    glob, grep = search_tools(Workspace("."))
    glob.invoke({"pattern": "**/*.py"})
    grep.invoke({"pattern": "def main", "glob": "*.py", "output_mode": "content"})
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Literal

import regex
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from deep_agent.tools._files import _tool
from deep_agent.tools._glob import GlobWalk, walkable_from
from deep_agent.tools._workspace import Workspace, open_regular

MAX_MATCHES = 500
MAX_FILE_BYTES = 2_000_000
GREP_SECONDS = 10.0
"""How long one ``Grep`` call may spend matching, over all its files."""
MAX_PATTERN_SIZE = 100_000
"""The most parts a ``Grep`` pattern may expand to (each counted repeat copies what it repeats)."""
MAX_GLOB_SCANNED = 20_000
"""Matches ``Glob`` collects (to sort them newest first) before it stops looking."""
GLOB_SECONDS = 10.0
"""How long one ``Glob`` call may walk the workspace."""
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
        if Path(pattern).is_absolute():
            raise ToolException("pattern must be relative to path (for example '**/*.py')")
        pattern = _walkable(ws, folder, pattern)
        found, timed_out = _globbed(ws, folder, pattern)
        stopped = len(found) > MAX_GLOB_SCANNED
        found = found[:MAX_GLOB_SCANNED]
        found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
        lines = [ws.shown(p) for p in found[:MAX_MATCHES]]
        if timed_out:
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
            compiled = regex.compile(pattern)
        # not only regex.error: OverflowError (a{99999999999}) and RecursionError (deep groups) too
        except (regex.error, OverflowError, RecursionError) as exc:
            reason = "it nests too deeply" if isinstance(exc, RecursionError) else exc
            raise ToolException(f"pattern {pattern[:200]!r} is not a valid regular expression: {reason}") from None
        lines: list[str] = []
        deadline = time.monotonic() + GREP_SECONDS
        start = file = ws.path(path, field="path")
        try:
            for file in _files(ws, start, glob, deadline):
                hits = _matches(file, compiled, deadline)
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
        return ws.bound("\n".join(lines) or "no matches")

    return [
        _tool(ws, glob, "Glob", GlobInput, "Find files of the workspace by glob pattern, newest first."),
        _tool(ws, grep, "Grep", GrepInput, "Search file contents of the workspace with a regular expression."),
    ]


def _globbed(ws: Workspace, folder: Path, pattern: str) -> tuple[list[Path], bool]:
    """Up to one more than :data:`MAX_GLOB_SCANNED` matches in the workspace, and whether the deadline cut the walk."""
    try:
        start, segments, dirs_only = walkable_from(folder, pattern)
        walk = GlobWalk(start, segments, dirs_only=dirs_only, skipped=_SKIPPED_DIRS,
                        deadline=time.monotonic() + GLOB_SECONDS)
        matches = (p for p in walk if ws.holds(p) and not _skipped(ws, p))
        found = list(islice(matches, MAX_GLOB_SCANNED + 1))
    except (ValueError, OSError, RecursionError) as exc:
        raise ToolException(f"pattern {pattern!r}: {exc}") from None
    return found, walk.timed_out


def _walkable(ws: Workspace, folder: Path, pattern: str) -> str:
    """``pattern``, refused if its ``..`` parts can climb above the workspace from ``folder``.

    Its matches there would be dropped, but the walk would still go through
    them: ``../../../**/*`` walks the whole disk. A ``**`` may match no
    folder, so it counts as none.
    """
    depth = len(folder.relative_to(ws.root).parts)
    for segment in pattern.split("/"):
        if segment == "..":
            depth -= 1
            if depth < 0:
                raise ToolException(f"pattern {pattern[:200]!r} climbs out of the workspace with '..': "
                                    "only paths inside it can be listed")
        elif segment not in ("", ".", "**"):
            depth += 1
    return pattern


def _skipped(ws: Workspace, path: Path) -> bool:
    if not path.is_relative_to(ws.root):
        return False
    return any(part in _SKIPPED_DIRS for part in path.relative_to(ws.root).parts)


def pattern_size(pattern: str) -> float:
    """About how many parts ``pattern`` compiles to: a counted repeat multiplies what it repeats.

    An over-estimate is fine (it only refuses); escapes and character
    classes count as one part, and ``(?...)`` prefixes as a few.
    """
    totals: list[float] = [0.0]  # one running size per open group
    last = 0.0  # the size of the item a quantifier would repeat
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            totals.append(0.0)
            i += 1
            continue
        if char == ")" and len(totals) > 1:
            last = max(totals.pop(), 1.0)
            totals[-1] += last
            i += 1
            continue
        if char == "{" and (repeat := _REPEAT.match(pattern, i)) and any(repeat.groups()):
            counts = [g for g in repeat.groups() if g]
            count = max(float(g) if len(g) < 12 else float("inf") for g in counts)
            totals[-1] += last * (count - 1)
            last *= count
            i = repeat.end()
            continue
        i = _class_end(pattern, i) if char == "[" else i + (2 if char == "\\" else 1)
        totals[-1] += 1
        last = 1.0
    return sum(totals)


_REPEAT = regex.compile(r"\{(\d*)(?:,(\d*))?\}")


def _class_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the character class opened at ``start``."""
    i = start + 1
    if pattern[i:i + 1] == "^":
        i += 1
    if pattern[i:i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _files(ws: Workspace, start: Path, glob: str | None, deadline: float) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for folder, dirs, files in os.walk(start):  # symlinked folders are not followed
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        if time.monotonic() > deadline:  # a huge tree, or many files the glob leaves out
            raise TimeoutError
        for name in sorted(files):
            file = Path(folder) / name
            if glob and not (fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(ws.shown(file), glob)):
                continue
            if ws.holds(file):  # a symlink loop is skipped
                yield file


def _matches(file: Path, pattern: regex.Pattern[str], deadline: float) -> list[tuple[int, str]]:
    """The file's matching lines; ``TimeoutError`` once ``deadline`` passes mid-search."""
    try:
        with open_regular(file) as handle:  # a pipe or device is skipped; at most one byte past the bound
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return []
        text = data.decode("utf-8")
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
