"""Where ``Bash`` runs: confined by bubblewrap on Linux, the workspace writable and the rest not.

The profile, from the inside of one command:

* the whole filesystem is mounted read-only (system files, tools and
  libraries work as usual; nothing outside the workspace can be written);
* the user's home folder and ``/tmp`` are empty private folders (so
  ``~/.ssh``, tokens in ``~/.config`` and files beside a checkout in
  ``/tmp`` cannot be read), except the workspace itself, which is mounted
  writable wherever it lives;
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
import shutil
from pathlib import Path


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
        args += ["--bind", root, root, "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        return [*args, "--chdir", root, "--", "bash", "-c", command]
