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
* what their config names in the workspace (:data:`CONFIG_KEYS`): an
  included file, ``core.hooksPath``, the scripts of ``core.fsmonitor``,
  filters, diff and merge drivers;
* the agent, skill, hook and MCP files (``.claude``, ``.agents``,
  ``.deep_agent``, ``.mcp.json``, and the ``agent_files`` the run reads
  from elsewhere): the next run reads them;
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
import re
import shlex
import shutil
import stat
import subprocess
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
CONFIG = "a file a repository's git config includes, or its hooks or commands run (git runs it on the host)"
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
        """Every protected path: the fixed ones, the git directories of nested repositories, and the
        workspace files their config names (:func:`_named_by_config`)."""
        found = dict(self.fixed)
        if self.root is not None:
            for dot_git in _git_entries(self.root):
                gitdirs = list(_leads_to(dot_git))
                for path in gitdirs:
                    found.setdefault(path, GIT)
                for path in _named_by_config(gitdirs, dot_git.parent):
                    if path == self.root or self.root in path.parents:
                        found.setdefault(path, CONFIG)
        return found

    @classmethod
    def of(cls, workspace: str | os.PathLike[str], *, state_dir: str | os.PathLike[str] | None = None,
           extra: Iterable[str | os.PathLike[str]] = (),
           agent_files: Iterable[str | os.PathLike[str]] = ()) -> Protected:
        """The protected set of ``workspace``.

        ``extra``: scripts hooks and MCP servers name; ``agent_files``: folders and files the run reads
        agents, skills, hooks or MCP servers from besides the workspace's own (``--agents-dir``, the
        ones of the folder it started in); both relative to the workspace.
        """
        root = Path(workspace).resolve()
        found: dict[Path, str] = {}
        for name in (*AGENT_FILES, *agent_files):
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


def _git_entries(root: Path) -> Iterator[Path]:
    """Every ``.git`` folder or file in the workspace (its own and nested repositories'), and every
    folder below it git takes for a bare repository."""
    for folder, dirs, files in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")  # its own modules/ are inside it, protected whole
            yield Path(folder, ".git")
        elif ".git" in files:
            yield Path(folder, ".git")
        if folder != str(root) and looks_bare(files, dirs):
            dirs.clear()
            yield Path(folder)


def looks_bare(files: list[str], dirs: list[str]) -> bool:
    """Whether a folder holding ``files`` and ``dirs`` is one git discovers as a bare repository."""
    return "HEAD" in files and "objects" in dirs and "refs" in dirs


CONFIG_KEYS = (r"^(core\.(hookspath|fsmonitor|sshcommand|editor|pager|askpass)|include\.path|includeif\..*\.path"
               r"|filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|merge\..*\.driver"
               r"|sequence\.editor|gpg\.program|credential\.helper)$")
"""The git settings that name a file to include, a hooks folder or a command to run."""

_SAFE_GIT_ENV = {"PATH": os.defpath, "HOME": str(Path.home()),  # HOME: git expands ~ in include.path with it
                 "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}


def _named_by_config(gitdirs: list[Path], worktree: Path) -> Iterator[Path]:
    """The paths a repository's config (includes followed) names in :data:`CONFIG_KEYS`.

    Read by ``git config --file`` with no system, global or environment
    config, so nothing is run: an included file and ``core.hooksPath`` are
    named whole; of a command, each word that names an existing file or
    holds a ``/`` (a script not there yet), resolved as git runs it, from
    the working tree.
    """
    for gitdir in gitdirs:
        for name in ("config", "config.worktree"):
            if not (gitdir / name).is_file():
                continue
            try:
                done = subprocess.run(
                    [shutil.which("git") or "git", "config", "--file", str(gitdir / name), "--includes",
                     "--show-origin", "-z", "--get-regexp", CONFIG_KEYS],
                    env=_SAFE_GIT_ENV, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
            except (OSError, subprocess.TimeoutExpired):
                continue  # no git here: nothing reads the config either
            fields = done.stdout.decode("utf-8", "replace").split("\0")
            for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
                key, _, value = entry.partition("\n")
                if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
                    yield (Path(origin.removeprefix("file:")).parent / Path(value).expanduser()).resolve()
                elif key == "core.hookspath":
                    yield (worktree / Path(value).expanduser()).resolve()
                else:
                    yield from _words_naming_files(value, worktree)


def _words_naming_files(command: str, folder: Path) -> Iterator[Path]:
    """The words of a shell command (split also at ``=`` and ``:``) naming a file in ``folder`` or holding a ``/``."""
    try:
        words = shlex.split(command.removeprefix("!"))
    except ValueError:
        words = command.split()
    for word in words:
        for part in re.split(r"[=:]", word):
            if part and ("/" in part or (folder / part).is_file()):
                yield (folder / Path(part).expanduser()).resolve()


def _leads_to(dot_git: Path) -> Iterator[Path]:
    """A ``.git`` entry, the git directory a ``.git`` file points to, and that directory's ``commondir``."""
    yield dot_git
    gitdir = dot_git.resolve()
    if dot_git.is_file():
        text = _pointer(dot_git)
        if not text.startswith("gitdir:"):
            return
        gitdir = (dot_git.parent / text.removeprefix("gitdir:").strip()).resolve()
        yield gitdir
    common = _pointer(gitdir / "commondir")
    if common:
        yield (gitdir / common).resolve()


def _pointer(path: Path) -> str:
    """The first line or so of a small pointer file (``.git``, ``commondir``); ``""`` if it is not a regular file.

    Opened without blocking and checked on the open file: a pipe planted in its place is never waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
