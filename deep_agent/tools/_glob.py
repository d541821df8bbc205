"""Walking the workspace for a ``Glob`` pattern: skipped folders are never entered, and the walk has a deadline.

``Path.glob`` walks every folder a pattern could reach, ``node_modules``
and ``.git`` included, only for ``Glob`` to drop what it found there, and
it cannot be stopped between two matches: ``**/*.py`` in a project with a
large ``node_modules`` took as long as listing all of it. :class:`GlobWalk`
matches what Python 3.11's ``Path.glob`` matches (``*``, ``?``, ``[...]``
within one name; ``**`` alone for any number of folders; hidden names
match ``*``; a pattern ending in ``**`` or ``/`` lists folders only;
literal leading parts, ``..`` included, must exist as folders) on a walk
that does not enter the skipped folders or symlinked folders, enters a
folder only when the pattern can still match below it, and stops at a
deadline, checked between names too.

The pattern is matched as a small automaton over its segments: each folder
carries the set of segments that could come next, computed once from its
parent's, so a name costs one step whatever the depth (a recursive match
of a path against two ``**`` costs its depth squared).

Example::

    start, segments, dirs_only = walkable_from(Path("."), "src/**/*.py")  # Path("src"), ["**", "*.py"], False
    walk = GlobWalk(start, segments, dirs_only=dirs_only, skipped=frozenset({".git"}),
                    deadline=time.monotonic() + 10)
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
CHECK_EVERY = 256
"""Names matched between two looks at the deadline."""

State = frozenset[int]
"""Indices of the segments that could match the next name (``len(segments)``: the whole pattern matched)."""


def is_wildcard(segment: str) -> bool:
    """Whether a pattern segment has a wildcard (as ``pathlib`` decides it)."""
    return "*" in segment or "?" in segment or "[" in segment


def walkable_from(folder: Path, pattern: str) -> tuple[Path, list[str], bool]:
    """Where the walk starts (``folder`` and the pattern's literal leading parts), the rest, and "folders only".

    Raises ``ValueError`` for a pattern ``Path.glob`` refuses, and for a
    ``..`` after a wildcard: each ``*/..`` multiplies the walk by the number
    of folders (``*/../*/../*/../x`` is minutes in a folder of 30), and
    means no more than the same pattern without it.
    """
    parts = list(PurePosixPath(pattern).parts)
    if not parts:
        raise ValueError(f"Unacceptable pattern: {pattern!r}")  # as Path.glob says it
    if any(STAR_STAR in part and part != STAR_STAR for part in parts):
        raise ValueError("Invalid pattern: '**' can only be an entire path component")
    dirs_only = pattern.endswith("/") or parts[-1] == STAR_STAR
    literal = 0
    while literal < len(parts) and not is_wildcard(parts[literal]):
        literal += 1
    if ".." in parts[literal:]:
        raise ValueError("'..' may only come before the first wildcard (for example '../*.py', not '*/../x')")
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

    def may_go_deeper(self, states: State) -> bool:
        """Whether a folder in these states can hold a match below it."""
        return any(index < self.done for index in states)


class GlobWalk:
    """The paths below ``start`` that match ``segments``, found lazily; ``timed_out`` once the deadline stopped it.

    Skipped folders (by name) are neither entered nor listed; symlinked
    folders are listed, not entered.
    """

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
        for folder, dirs, files in os.walk(start):  # symlinked folders come in dirs, and are not entered
            if self._out_of_time():
                return
            here = states.pop(folder, frozenset())
            deeper = []
            for counted, name in enumerate(dirs, 1):
                if counted % CHECK_EVERY == 0 and self._out_of_time():
                    return
                if name in self.skipped:
                    continue
                after = automaton.step(here, name, real_folder=not os.path.islink(os.path.join(folder, name)))
                if automaton.done in after:
                    yield Path(folder, name)
                if automaton.may_go_deeper(after):
                    states[os.path.join(folder, name)] = after
                    deeper.append(name)
            dirs[:] = deeper
            for counted, name in enumerate(() if self.dirs_only else files, 1):
                if counted % CHECK_EVERY == 0 and self._out_of_time():
                    return
                if automaton.done in automaton.step(here, name) and (
                        not must_exist or os.path.exists(os.path.join(folder, name))):
                    yield Path(folder, name)
