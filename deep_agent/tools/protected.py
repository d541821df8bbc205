"""What no tool of the agent may change: the paths that make code run later, outside any sandbox.

One set per run, computed once (:meth:`Protected.of`) and obeyed by every
writer: ``Bash``'s sandbox mounts each path read-only (and a missing one as
an empty read-only placeholder, so it cannot be created either), and every
in-process writer goes through :meth:`Workspace.open_for_writing
<deep_agent.tools.workspace.Workspace>`, which refuses them. The set:

* every git directory of the workspace, whole: ``.git`` (created or not),
  where a ``.git`` file's ``gitdir:`` and a ``commondir`` point, and the git
  directories of nested repositories and submodules (``.git/modules`` is
  inside ``.git``): git's hooks, config and ``commondir`` run commands on
  the user's next ``git status``;
* the agent, skill, hook and MCP files (``.claude``, ``.agents``,
  ``.deep_agent``, ``.mcp.json``): the next run reads them;
* the state folder, when one is given;
* the scripts and programs trusted hooks and MCP servers name (``extra``):
  they run on the host at the next tool call;
* the interpreter and virtual environment this program runs from.

Example::

    protected = Protected.of("/home/me/project", extra=["scripts/guard.sh"])
    protected.why(Path("/home/me/project/.git/config"))   # "a git directory (...)"
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from subagents.errors import SubagentsError

AGENT_FILES = (".claude", ".agents", ".deep_agent", ".mcp.json")
"""Folders and files in the workspace whose contents the next run reads as agents, skills, hooks or MCP servers."""

GIT = "a git directory (its hooks, config and commondir run commands on the next git command)"
AGENT = "agent, skill, hook or MCP files (the next run reads them)"
STATE = "the state folder"
SCRIPT = "a script a trusted hook or MCP server runs (it would run outside the sandbox)"
RUNTIME = "the interpreter or virtual environment this program runs from"


class ProtectedPath(SubagentsError, PermissionError):
    """A tool tried to write a protected path; :attr:`path` and :attr:`reason` say which and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(errno.EACCES, f"protected, not writable by the agent's tools: {reason}", str(path))
        self.path, self.reason = path, reason


@dataclasses.dataclass(frozen=True)
class Protected:
    """Resolved paths -> why each is protected (a path inside one is protected too).

    ``root``: the workspace, whose nested repositories' git directories are
    found on first use (one walk per run, not one per workspace built) and
    in which any path through a folder named ``.git`` is protected.
    """

    fixed: dict[Path, str]
    root: Path | None = None

    @functools.cached_property
    def paths(self) -> dict[Path, str]:
        """Every protected path: the fixed ones and the git directories of nested repositories."""
        found = dict(self.fixed)
        if self.root is not None:
            for path in _git_dirs(self.root):
                found.setdefault(path, GIT)
        return found

    @classmethod
    def of(cls, workspace: str | os.PathLike[str], *, state_dir: str | os.PathLike[str] | None = None,
           extra: Iterable[str | os.PathLike[str]] = ()) -> Protected:
        """The protected set of ``workspace`` (``extra``: scripts hooks and MCP servers name, relative to it)."""
        root = Path(workspace).resolve()
        found: dict[Path, str] = {}
        for name in AGENT_FILES:
            found.setdefault((root / name).resolve(), AGENT)
        for path in _leads_to(root / ".git"):
            found.setdefault(path, GIT)
        if state_dir is not None:
            found.setdefault((root / state_dir).resolve(), STATE)
        for script in extra:
            found.setdefault((root / script).resolve(), SCRIPT)
        for runtime in {sys.prefix, sys.exec_prefix, os.path.realpath(sys.executable)}:
            found.setdefault(Path(runtime).resolve(), RUNTIME)
        return cls(found, root)

    def why(self, path: Path) -> str | None:
        """Why the resolved ``path`` (or a folder holding it) is protected; ``None`` if it is not."""
        if self.root is not None and self.root in path.parents and ".git" in path.relative_to(self.root).parts:
            return GIT
        for candidate in (path, *path.parents):
            if (reason := self.paths.get(candidate)) is not None:
                return reason
        return None

    def check(self, path: Path) -> None:
        """Raise :class:`ProtectedPath` if the resolved ``path`` is protected."""
        if (reason := self.why(path)) is not None:
            raise ProtectedPath(path, reason)

    def inside(self, root: Path) -> list[Path]:
        """The protected paths in ``root`` (outside it the sandbox has everything read-only), shortest first."""
        return sorted((p for p in self.paths if p == root or root in p.parents), key=lambda p: len(p.parts))


def _git_dirs(root: Path) -> Iterator[Path]:
    """Every git directory the workspace's ``.git`` entries lead to (its own and nested repositories')."""
    for folder, dirs, files in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")  # its own modules/ are inside it, protected whole
            yield from _leads_to(Path(folder, ".git"))
        elif ".git" in files:
            yield from _leads_to(Path(folder, ".git"))


def _leads_to(dot_git: Path) -> Iterator[Path]:
    """A ``.git`` entry, the git directory a ``.git`` file points to, and that directory's ``commondir``."""
    yield dot_git
    gitdir = dot_git.resolve()
    if dot_git.is_file():
        try:
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return
        if not text.startswith("gitdir:"):
            return
        gitdir = (dot_git.parent / text.removeprefix("gitdir:").strip()).resolve()
        yield gitdir
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return
    if common:
        yield (gitdir / common).resolve()
