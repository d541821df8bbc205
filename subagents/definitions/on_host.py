"""What this process may run on the host: every hook mapping and MCP server config it has read.

The two normalisers every hook mapping and server config goes through
(:func:`~subagents.definitions.hooks.normalize_hooks`,
:func:`~subagents.definitions.mcp.normalize_mcp_config`) note what they
return, whoever reads it: an agent file (trusted or not: one trusted later
runs it), a spec, ``HookMiddleware``, ``create_deep_agent``, the command line.
A sandbox keeps the files those name out of its commands' reach (the built-in
tools' protected set reads :func:`noted`), so no route to a hook or a server
is left out by a caller that built it another way. Each distinct content is
kept once: a process building many children holds only its distinct ones.
"""

from __future__ import annotations

import json
import os
import threading
from types import SimpleNamespace
from typing import Any

_LOCK = threading.Lock()
_NOTED: dict[str, SimpleNamespace] = {}


def note(*, hooks: Any = None, mcp_config: Any = None) -> None:
    """Record normalised ``hooks`` or ``mcp_config`` (as a definition's fields) as run on the host, from the
    current folder (``folder``): hooks run their shell there, and a relative path names a file from there."""
    if not hooks and not mcp_config:
        return
    try:
        folder = os.getcwd()
    except OSError:  # the current folder was removed: nothing relative to it can be found
        return
    key = json.dumps([hooks, mcp_config, folder], sort_keys=True, default=repr)
    with _LOCK:
        _NOTED.setdefault(key, SimpleNamespace(hooks=hooks, mcp_config=mcp_config, folder=folder))


def noted() -> list[SimpleNamespace]:
    """Everything noted so far, oldest first (a later call returns these first, then the new)."""
    with _LOCK:
        return list(_NOTED.values())
