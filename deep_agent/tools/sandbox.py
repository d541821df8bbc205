"""Where ``Bash`` runs: confined by bubblewrap on Linux, the workspace writable and the rest not.

The profile, from the inside of one command:

* the whole filesystem is mounted read-only (system files, tools and
  libraries work as usual; nothing outside the workspace can be written);
* the user's home folder and ``/tmp`` are empty private folders (so
  ``~/.ssh``, tokens in ``~/.config`` and files beside a checkout in
  ``/tmp`` cannot be read), except the workspace itself, which is mounted
  writable wherever it lives;
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
  (a provider key is the model client's, not the shell's);
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
from pathlib import Path

PROTECTED = (".git/hooks", ".git/config", ".claude", ".agents", ".deep_agent", ".mcp.json")
"""Paths in the workspace a sandboxed command may read but not change: each can make a later tool run code."""

SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)|PASSWORD", re.I)
"""Environment variables the sandboxed command does not get."""


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
        hidden = [p for p in (str(Path.home().resolve()), "/tmp", "/var/tmp") if p != root]
        args = [self.bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
        for folder in hidden:
            if Path(folder).is_dir():
                args += ["--tmpfs", folder]
        # Not the PID namespace: jobs a command leaves running keep host pids and its process group,
        # so the timeout and the end of the run reach them as they reach an unconfined command's.
        args += ["--bind", root, root, *_protected(Path(root)), "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        for name in sorted(os.environ):
            if SECRET_NAME.search(name):
                args += ["--unsetenv", name]
        return [*args, "--chdir", root, "--", "bash", "-c", command]


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
