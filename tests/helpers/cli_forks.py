"""A process that has imported the command line once and forks a ``deep-agent`` run per request.

A fresh ``deep-agent run`` spends about 1.1 s of its 2.1 s of CPU importing
LangChain, LangGraph and the project; the suite makes over a hundred runs. This
process (one per test worker: :func:`helpers.cli.program`) imports them once; each
request is then a child forked from it that takes the run's arguments,
environment, working folder and standard streams, as a new process would,
and exits with ``main()``'s status, its exit handlers run. The child's
``sys.path`` is the one the ``deep-agent`` script would start with: the
script's folder, ``PYTHONPATH``, then the interpreter's own.

Requests come on stdin, one JSON line each (``argv``, ``env``, ``cwd`` and
the paths of ``stdin``, ``stdout``, ``stderr``); the answers go to stdout:
``pid N`` once the child is forked, ``exit N`` once it ended. Started by
:func:`helpers.cli.program` only, with ``PYTHONPATH`` naming nothing but the
repository; it ends when its stdin does (its worker's end).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

# What `deep-agent run` and its subcommands import: paid here once.
import langgraph.checkpoint.sqlite  # noqa: F401
import langgraph.checkpoint.sqlite.aio  # noqa: F401

import deep_agent.cli._agents  # noqa: F401
import deep_agent.cli._app
import deep_agent.cli._inspect  # noqa: F401
import deep_agent.cli._run  # noqa: F401
import deep_agent.cli._session  # noqa: F401
import deep_agent.cli._store  # noqa: F401
import deep_agent._factory  # noqa: F401

from deep_agent.tools import _host_code as host_code

_BASE_PATH = [p for p in sys.path if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
"""The interpreter's own path (standard library, site-packages): without PYTHONPATH (started with -P: no folder)."""


def _path(script: str, pythonpath: str) -> list[str]:
    """The ``sys.path`` a Python script starts with: its folder, ``PYTHONPATH``'s folders, the interpreter's."""
    return [os.path.dirname(script), *(p for p in pythonpath.split(os.pathsep) if p), *_BASE_PATH]


# The scan of the installed packages a run makes once (0.35 s of CPU, found on sys.path): made here
# for the usual path (argv[1], argv[2]: the script, the PYTHONPATH most runs have); a child on another path
# forgets it and scans again.
_USUAL_PATH = _path(sys.argv[1], sys.argv[2])
_saved, sys.path[:] = sys.path[:], _USUAL_PATH
host_code.import_names()
sys.path[:] = _saved


def _lines() -> Iterator[dict[str, Any]]:
    """The requests, read unbuffered from fd 0: a child must find no request of ours in ``sys.stdin``'s buffer."""
    pending = b""
    while chunk := os.read(0, 1 << 16):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield json.loads(line)


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become the requested run (its streams, folder, environment, path, arguments)."""
    for fd, (name, flags) in enumerate((("stdin", os.O_RDONLY), ("stdout", os.O_WRONLY), ("stderr", os.O_WRONLY))):
        opened = os.open(request[name], flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = _path(request["argv"][0], request["env"].get("PYTHONPATH", ""))
    if sys.path != _USUAL_PATH:
        host_code.import_names.cache_clear()
    sys.argv = list(request["argv"])


def serve() -> dict[str, Any] | None:
    """Fork a child per request; in a child, return its request (the parent returns at end of input)."""
    if threading.active_count() != 1:  # a thread would be lost in every child: refuse, the caller runs processes
        raise SystemExit(f"cli_forks: {threading.active_count()} threads after the imports")
    os.write(1, b"ready\n")
    for request in _lines():
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return request
        os.write(1, f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
    return None


if __name__ == "__main__":
    if (request := serve()) is not None:
        _child(request)
        sys.exit(deep_agent.cli._app.main())
