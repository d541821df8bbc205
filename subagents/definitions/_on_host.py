"""Where what a folder defines starts: every hook command and every stdio MCP server goes through :func:`launch`.

Unchanged unless a confinement is installed (:func:`confine`): a process whose ``Bash`` runs in a sandbox installs
one (``deep_agent.tools``), so a hook or a server runs under the same sandbox as the agent's own commands: nothing
the agent writes (a ``Makefile`` recipe, a script, a module) runs later with more power than it has.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

DID_NOT_START = signal.SIGUSR2
"""The signal a confined start that never ran its command ends by (the launcher, ``deep_agent.tools._confined``,
stdlib only, sends it to itself): a command's own end, by a signal too, is an exit status, so no command passes
for one that never ran, nor a start that failed for a command that ran."""

Started = tuple[list[str], dict[str, str] | None]
"""What to run: the argv, and the environment (``None``: this process's)."""

Confinement = Callable[[list[str], str | None, dict[str, str]], AbstractContextManager[Started]]
"""``(argv, cwd, declared env) ->`` a context holding what runs it confined, for as long as it runs."""

_installed: list[Confinement] = []


def confine(confinement: Confinement | None) -> None:
    """Install ``confinement`` for every later hook and server start of this process (``None``: remove it)."""
    _installed[:] = [confinement] if confinement is not None else []


def confinement() -> Confinement | None:
    """The installed confinement, if any."""
    return _installed[0] if _installed else None


def absolute_path(path: str | None = None) -> str:
    """``path`` (default: this process's ``PATH``) without its relative entries, which name folders of wherever a
    program runs: ``.`` or ``node_modules/.bin`` in the workspace would let its ``python3`` be the one found."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    return os.pathsep.join(entry for entry in path.split(os.pathsep) if os.path.isabs(entry))


@contextlib.contextmanager
def launch(argv: Sequence[str], cwd: str | None = None, env: Mapping[str, str] | None = None) -> Iterator[Started]:
    """What runs ``argv`` in ``cwd`` (default: the current folder): unchanged, or confined while the context is held.

    ``env``: the entries a server's config declares, given on top of this process's environment (confined: on
    top of the sandbox's). Leaving the context after the process ended is what lets a confinement clean up.
    Every process gets ``PYTHONSAFEPATH=1`` (``python3 -m x`` or ``-c`` imports nothing from its folder, the
    workspace) and a ``PATH`` of absolute folders only (:func:`absolute_path`).
    """
    declared = {str(k): str(v) for k, v in (env or {}).items()}
    declared |= {"PYTHONSAFEPATH": "1", "PATH": absolute_path(declared.get("PATH"))}
    installed = confinement()
    if installed is None:
        yield list(argv), {**os.environ, **declared}
        return
    with installed(list(argv), cwd, declared) as started:
        yield started
