"""``Glob`` and ``Grep``: finding files and text in the workspace, with Claude Code's argument names.

Nothing outside the workspace is listed or read: matches that resolve
outside it (through ``..`` or a symlink), or that cannot be resolved (a
symlink loop), are skipped, and symlinked folders are not followed.

A search is bounded in time: ``Grep`` matches with the ``regex`` package
(the same syntax as ``re``), whose searches take a timeout, so a pattern
that backtracks catastrophically (``(a|aa)+$`` on a long line) ends the
call after :data:`GREP_SECONDS` with an error naming the pattern and the
file, rather than hanging the agent. ``Glob`` stops after
:data:`MAX_GLOB_SCANNED` matches and says so.

Example::

    glob, grep = search_tools(Workspace("."))
    glob.invoke({"pattern": "**/*.py"})
    grep.invoke({"pattern": "def main", "glob": "*.py", "output_mode": "content"})
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Literal

import regex
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from deep_agent.tools._files import _tool
from deep_agent.tools._workspace import Workspace

MAX_MATCHES = 500
MAX_FILE_BYTES = 2_000_000
GREP_SECONDS = 10.0
"""How long one ``Grep`` call may spend matching, over all its files."""
MAX_GLOB_SCANNED = 20_000
"""Matches ``Glob`` collects (to sort them newest first) before it stops looking."""
_SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".deep_agent"}


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
        try:
            matches = (p for p in folder.glob(pattern) if ws.holds(p) and not _skipped(ws, p))
            found = list(islice(matches, MAX_GLOB_SCANNED + 1))
        except (ValueError, OSError) as exc:
            raise ToolException(f"pattern {pattern!r}: {exc}") from None
        stopped = len(found) > MAX_GLOB_SCANNED
        found = found[:MAX_GLOB_SCANNED]
        found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
        lines = [ws.shown(p) for p in found[:MAX_MATCHES]]
        if stopped:
            lines.append(f"... [stopped looking after {MAX_GLOB_SCANNED} matches: narrow the pattern or path]")
        elif len(found) > MAX_MATCHES:
            lines.append(f"... [{len(found) - MAX_MATCHES} more matches]")
        return ws.bound("\n".join(lines) or "no files match")

    def grep(pattern: str, path: str | None = None, glob: str | None = None,
             output_mode: str = "files_with_matches") -> str:
        try:
            compiled = regex.compile(pattern)
        # not only regex.error: OverflowError (a{99999999999}) and RecursionError (deep groups) too
        except (regex.error, OverflowError, RecursionError) as exc:
            reason = "it nests too deeply" if isinstance(exc, RecursionError) else exc
            raise ToolException(f"pattern {pattern[:200]!r} is not a valid regular expression: {reason}") from None
        lines: list[str] = []
        deadline = time.monotonic() + GREP_SECONDS
        for file in _files(ws, ws.path(path, field="path"), glob):
            try:
                hits = _matches(file, compiled, deadline)
            except TimeoutError:
                raise ToolException(f"pattern {pattern[:200]!r} took more than {GREP_SECONDS:g} s to match "
                                    f"(stopped in {ws.shown(file)}): it may backtrack without end; "
                                    "simplify it or narrow path or glob") from None
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
        return ws.bound("\n".join(lines) or "no matches")

    return [
        _tool(ws, glob, "Glob", GlobInput, "Find files of the workspace by glob pattern, newest first."),
        _tool(ws, grep, "Grep", GrepInput, "Search file contents of the workspace with a regular expression."),
    ]


def _skipped(ws: Workspace, path: Path) -> bool:
    if not path.is_relative_to(ws.root):
        return False
    return any(part in _SKIPPED_DIRS for part in path.relative_to(ws.root).parts)


def _files(ws: Workspace, start: Path, glob: str | None) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for folder, dirs, files in os.walk(start):  # symlinked folders are not followed
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            file = Path(folder) / name
            if glob and not (fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(ws.shown(file), glob)):
                continue
            if ws.holds(file):  # a symlink loop is skipped
                yield file


def _matches(file: Path, pattern: regex.Pattern[str], deadline: float) -> list[tuple[int, str]]:
    """The file's matching lines; ``TimeoutError`` once ``deadline`` passes mid-search."""
    try:
        status = file.stat()
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
            return []  # a pipe or device would block or never end
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []  # binary or unreadable files are not searched
    return [(i, line[:500]) for i, line in enumerate(text.splitlines(), 1)
            if pattern.search(line, timeout=max(deadline - time.monotonic(), 0.001))]
