"""Where ``Bash`` runs: confined by bubblewrap on Linux, the workspace writable and the rest not.

The profile, from the inside of one command:

* the whole filesystem is mounted read-only (system files, tools and
  libraries work as usual; nothing outside the workspace can be written);
* the home folders (``/home``, ``/root`` and the user's own), ``/tmp``,
  ``/var/tmp``, ``/run`` (the user's key-agent sockets live there) and the
  folder the workspace sits in are empty private folders (so ``~/.ssh``,
  tokens in ``~/.config``, other checkouts and a secret beside the workspace
  cannot be read), except the workspace itself, which is mounted writable
  wherever it lives; the workspace's parent stays visible only where it holds
  the interpreter or a folder on ``PATH``;
* inside the workspace, what runs commands later, outside the sandbox, is
  read-only (:data:`PROTECTED`: git's hooks and config, the agent, skill,
  hook and MCP files, the command line's state) where it exists when the
  command starts, so a command cannot plant a hook that the next
  ``git commit`` or ``deep-agent run`` would run unconfined; ``.git`` is a
  mount point of its own, so it cannot be renamed away and replaced by one
  whose hooks are writable (the rest of ``.git`` stays writable); a
  ``.git`` file (a worktree's or submodule's pointer) is read-only;
* no keys or tokens in its environment: variables named like ``*_API_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*`` or ``*CREDENTIALS*`` are unset
  (a provider key is the model client's, not the shell's), and so are
  ``SSH_AUTH_SOCK`` and ``GPG_AGENT_INFO``;
* no network (``--allow-network`` shares the host's), new IPC and UTS
  namespaces, a fresh ``/dev``; the process IDs stay the host's, so jobs
  a command leaves running are ended with the run as an unconfined
  command's are.

Debian's ``bubblewrap`` package provides ``bwrap``. Where it is missing,
the command line offers no ``Bash`` unless ``--unsafe-bash`` is given.

Example::

    sandbox = Sandbox.find()          # None without bwrap
    argv = sandbox.argv("/work/project", "ls -1")
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from pathlib import Path

PROTECTED = (".git/hooks", ".git/config", ".claude", ".agents", ".deep_agent", ".mcp.json")
"""Paths in the workspace a sandboxed command may read but not change: each can make a later tool run code."""

SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)|PASSWORD", re.I)
"""Environment variables the sandboxed command does not get."""

AGENT_SOCKETS = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO"})
"""Variables naming the user's key agents, whose sockets a command could use to sign as the user."""


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """A bubblewrap profile for one workspace.

    Args:
        bwrap: the ``bwrap`` executable.
        network: share the host's network (default: none).
    """

    bwrap: str
    network: bool = False

    @classmethod
    def find(cls, *, network: bool = False) -> Sandbox | None:
        """The sandbox of this machine: ``None`` where ``bwrap`` is not installed (or not Linux)."""
        found = shutil.which("bwrap")
        return cls(found, network) if found and os.name == "posix" else None

    def argv(self, workspace: str | os.PathLike[str], command: str) -> list[str]:
        """The command line that runs ``command`` with ``bash -c`` inside the sandbox, in ``workspace``."""
        root = str(Path(workspace).resolve())
        args = [self.bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
        for folder in _hidden(root):
            args += ["--tmpfs", folder]
        resolver = os.path.realpath("/etc/resolv.conf")
        if self.network and resolver.startswith("/run/"):  # DNS, where resolv.conf points into /run
            args += ["--ro-bind", os.path.dirname(resolver), os.path.dirname(resolver)]
        # Not the PID namespace: jobs a command leaves running keep host pids and its process group,
        # so the timeout and the end of the run reach them as they reach an unconfined command's.
        args += ["--bind", root, root, *_protected(Path(root)), "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        for name in sorted(os.environ):
            if SECRET_NAME.search(name) or name in AGENT_SOCKETS:
                args += ["--unsetenv", name]
        return [*args, "--chdir", root, "--", "bash", "-c", command]


def _hidden(root: str) -> list[str]:
    """Folders mounted empty: homes, temporary and runtime files, and the folder the workspace sits in.

    The workspace's parent holds its neighbours (other checkouts, a secret
    beside it); it stays visible only where it holds the programs commands
    need (the interpreter's prefix or a folder on ``PATH``), or is ``/``.
    """
    parent = str(Path(root).parent)
    needed = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, *os.get_exec_path()) if p}
    needed = {n for n in needed if not (n == root or n.startswith(root + "/"))}  # mounted back anyway
    keep_parent = parent == "/" or any(n == parent or n.startswith(parent + "/") for n in needed)
    candidates = [str(Path.home().resolve()), "/tmp", "/var/tmp", "/run", "/home", "/root"]
    if not keep_parent:
        candidates.append(parent)
    folders = sorted({p for p in candidates if p != root and Path(p).is_dir()}, key=len)
    # A folder inside one already hidden is gone with it (the workspace is mounted back afterwards).
    return [p for p in folders if not any(p.startswith(q + "/") for q in folders if q != p)]


def _protected(root: Path) -> list[str]:
    """Mounts that make :data:`PROTECTED` read-only inside ``root`` (after ``root`` is bound writable)."""
    args: list[str] = []
    git = (root / ".git").resolve()
    if git.is_dir() and root in git.parents:
        # A mount point cannot be renamed or removed: `mv .git old && mkdir -p .git/hooks` fails.
        args += ["--bind", str(git), str(git)]
    elif git.is_file() and root in git.parents:
        # A worktree's or submodule's `gitdir: ...` pointer: redirected, it would lead git to planted hooks.
        args += ["--ro-bind", str(git), str(git)]
    for name in PROTECTED:
        target = (root / name).resolve()  # a symlinked .claude: the folder it leads to
        # Outside the workspace everything is read-only already.
        if target.exists() and (target == root or root in target.parents):
            args += ["--ro-bind", str(target), str(target)]
    return args
