"""Walking the workspace for a ``Glob`` pattern: skipped folders are never entered, and the walk has a deadline.

``Path.glob`` walks every folder a pattern could reach, ``node_modules``
and ``.git`` included, only for ``Glob`` to drop what it found there, and
it cannot be stopped between two matches: ``**/*.py`` in a project with a
large ``node_modules`` took as long as listing all of it. :func:`walk_glob`
matches the same patterns (``*``, ``?``, ``[...]`` within one name; ``**``
for any number of folders; hidden names match ``*``; a pattern ending in
``**`` lists folders) on a walk that does not enter the skipped folders,
goes no deeper than a pattern without ``**`` can reach, does not follow
symlinked folders, and stops at a deadline.

Example::

    start, rest = walkable_from(Path("."), "src/**/*.py")  # Path("src"), ["**", "*.py"]
    walk = GlobWalk(start, rest, skipped=frozenset({".git"}), deadline=time.monotonic() + 10)
    found = list(walk)  # then walk.timed_out
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

STAR_STAR = "**"


def is_wildcard(segment: str) -> bool:
    """Whether a pattern segment has a wildcard (as ``pathlib`` decides it)."""
    return "*" in segment or "?" in segment or "[" in segment


def walkable_from(folder: Path, pattern: str) -> tuple[Path, list[str]] | None:
    """The folder the walk starts in (``folder`` plus the pattern's literal leading parts) and the rest.

    ``None`` when a ``..`` comes after a wildcard: such a pattern is left to
    ``Path.glob``.
    """
    parts = list(PurePosixPath(pattern).parts)
    if not parts:
        raise ValueError(f"Unacceptable pattern: {pattern!r}")  # as Path.glob says it
    literal = 0
    while literal < len(parts) and not is_wildcard(parts[literal]):
        literal += 1
    if ".." in parts[literal:]:
        return None
    start = Path(os.path.normpath(folder.joinpath(*parts[:literal]))) if literal else folder
    return start, parts[literal:]


class _Matcher:
    """Whether a path below the start folder (as its names) matches the pattern's remaining segments."""

    def __init__(self, segments: Sequence[str]) -> None:
        self.segments = [STAR_STAR if s == STAR_STAR else re.compile(fnmatch.translate(s)) for s in segments]
        self.dirs_only = bool(segments) and segments[-1] == STAR_STAR
        self.max_depth = None if STAR_STAR in segments else len(segments)

    def matches(self, names: Sequence[str]) -> bool:
        return self._match(names, 0, 0)

    def _match(self, names: Sequence[str], at: int, seg: int) -> bool:
        if seg == len(self.segments):
            return at == len(names)
        segment = self.segments[seg]
        if isinstance(segment, str):  # '**', zero or more folders: at most two, so the recursion stays small
            return any(self._match(names, skip, seg + 1) for skip in range(at, len(names) + 1))
        return at < len(names) and segment.match(names[at]) is not None and self._match(names, at + 1, seg + 1)

    def may_hold_matches(self, names: Sequence[str]) -> bool:
        """Whether a folder (as its names) can hold a match: only decided for patterns without ``**``."""
        if self.max_depth is None:
            return True
        return len(names) < self.max_depth and all(
            isinstance(segment, re.Pattern) and segment.match(name) is not None
            for segment, name in zip(self.segments, names, strict=False))


class GlobWalk:
    """The paths below ``start`` that match ``segments``, found lazily; ``timed_out`` once the deadline stopped it.

    Skipped folders (by name) are neither entered nor listed.
    """

    def __init__(self, start: Path, segments: Sequence[str], *, skipped: frozenset[str], deadline: float) -> None:
        self.start, self.segments, self.skipped, self.deadline = start, segments, skipped, deadline
        self.timed_out = False

    def __iter__(self) -> Iterator[Path]:
        start, segments = self.start, self.segments
        if not segments:  # a pattern of literal names only: that path, if it exists
            if start.exists():
                yield start
            return
        if not start.is_dir():
            return
        matcher = _Matcher(segments)
        if matcher.dirs_only and matcher.matches(()):
            yield start  # '**' matches the folder it starts in, as Path.glob lists it
        root = str(start)
        for folder, dirs, files in os.walk(root):  # symlinked folders are listed, not entered
            if time.monotonic() > self.deadline:
                self.timed_out = True
                return
            dirs[:] = [d for d in dirs if d not in self.skipped]
            relative = os.path.relpath(folder, root)
            names: tuple[str, ...] = () if relative == "." else tuple(relative.split(os.sep))
            for name in dirs if matcher.dirs_only else (*dirs, *files):
                if matcher.matches((*names, name)):
                    yield Path(folder, name)
            dirs[:] = [d for d in dirs if matcher.may_hold_matches((*names, d))]
