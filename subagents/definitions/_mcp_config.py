"""The ``mcp_config`` field: the MCP servers a subagent may use.

Each server gives that child, and only that child, its tools (see
:mod:`subagents.definitions._mcp_tools`). Accepted shapes, all normalised to
``{server name: server config}``:

* a mapping of server name to config (the my-pi-agent / OpenHands form);
* the ``.mcp.json`` form ``{"mcpServers": {...}}``;
* Claude Code's list form: each item a server name (a reference to a
  server the caller defines in ``create_deep_agent(mcp_servers=...)``,
  stored as ``{}``) or ``{name: config}``.

A config has ``command`` (with optional ``args`` list, ``env`` mapping and
``cwd``) for a local server over stdio, or ``url`` (with optional
``headers``) for a remote one over streamable HTTP (``transport: sse`` for
SSE; a URL ending in ``/sse`` defaults to it), and an optional ``timeout``
in seconds for one call. Server names are letters, digits, ``-`` and ``_``:
they become part of tool names (``mcp__<server>__<tool>``).

Example::

    normalize_mcp_config(["github", {"files": {"command": "mcp-files", "args": ["."]}}])
    # {'github': {}, 'files': {'command': 'mcp-files', 'args': ['.']}}
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from subagents._errors import brief

TRANSPORTS = ("stdio", "sse", "http", "streamable_http", "streamable-http", "websocket")
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "transport", "type", "timeout"})


def normalize_mcp_config(value: Any) -> dict[str, dict[str, Any]] | None:
    """``{server name: config}`` for any accepted shape; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, Mapping) and set(value) == {"mcpServers"}:
        value = value["mcpServers"]
    servers: dict[str, Any] = {}
    if isinstance(value, Mapping):
        servers = dict(value)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str) and item.strip():
                servers[item.strip()] = {}
            elif isinstance(item, Mapping) and len(item) == 1:
                servers.update(item)
            else:
                raise ValueError(
                    f"expected each list item to be a server name or {{name: config}}, got {brief(item)}"
                )
    else:
        raise ValueError(f"expected a mapping of MCP server names to configs, got {brief(value)}")
    return {_name(name): _server(name, config) for name, config in servers.items()}


def _name(name: Any) -> str:
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise ValueError(
            "expected MCP server names of letters, digits, '-' and '_' (at most 40), "
            f"got {brief(name)}"
        )
    return name


def _server(name: str, config: Any) -> dict[str, Any]:
    where = f"MCP server {brief(name)}"
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ValueError(f"{where}: expected a mapping with 'command' or 'url', got {brief(config)}")
    config = dict(config)
    if not config:
        return config
    has_command, has_url = "command" in config, "url" in config
    if has_command == has_url:
        raise ValueError(f"{where}: expected exactly one of 'command' (local) or 'url' (remote)")
    key = "command" if has_command else "url"
    if not isinstance(config[key], str) or not config[key].strip():
        raise ValueError(f"{where}: expected '{key}' to be a non-empty string, got {brief(config[key])}")
    args = config.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ValueError(f"{where}: expected 'args' to be a list of strings, got {brief(args)}")
    for table in ("env", "headers"):
        mapping = config.get(table, {})
        if not isinstance(mapping, Mapping) or not all(isinstance(k, str) for k in mapping):
            raise ValueError(f"{where}: expected '{table}' to be a mapping of strings, got {brief(mapping)}")
    transport = config.get("transport", config.get("type"))
    if transport is not None and transport not in TRANSPORTS:
        raise ValueError(f"{where}: expected transport one of {', '.join(TRANSPORTS)}, got {brief(transport)}")
    timeout = config.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout <= 86_400):
        raise ValueError(f"{where}: expected 'timeout' to be a number of seconds, got {brief(timeout)}")
    unknown = sorted(set(config) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {brief(', '.join(map(str, unknown)))}; "
                         f"expected {', '.join(sorted(_KEYS))}")
    return config


def connection_for(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``langchain-mcp-adapters`` connection for one normalised server config."""
    if not config:
        raise ValueError(
            f"MCP server '{name}' is named but not defined; pass its config in "
            "create_deep_agent(mcp_servers=...) or give it in the agent file"
        )
    if "command" in config:
        connection: dict[str, Any] = {
            "transport": "stdio", "command": config["command"],
            "args": [str(a) for a in config.get("args", [])],
        }
        if config.get("env"):
            # The server still needs PATH and the like; the file's values win.
            connection["env"] = {**os.environ, **{k: str(v) for k, v in config["env"].items()}}
        if config.get("cwd"):
            connection["cwd"] = str(config["cwd"])
        return connection
    transport = config.get("transport", config.get("type"))
    if transport in (None, "http", "streamable-http"):
        sse = transport is None and config["url"].split("?")[0].rstrip("/").endswith("/sse")
        transport = "sse" if sse else "streamable_http"
    connection = {"transport": transport, "url": config["url"]}
    if config.get("headers") and transport != "websocket":
        connection["headers"] = {k: str(v) for k, v in config["headers"].items()}
    return connection


def check_mcp_servers(config: Mapping[str, Mapping[str, Any]] | None,
                      defined: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """``(problems, notes)``: stdio commands that do not exist, URLs that do not parse.

    A bare name (``{}``) is a note unless ``defined`` (the caller's servers) lacks it.
    """
    problems: list[str] = []
    notes: list[str] = []
    for name, server in (config or {}).items():
        if not server:
            if defined is None:
                notes.append(f"MCP server '{name}' refers to a server the caller defines (mcp_servers=)")
            elif name not in defined:
                problems.append(f"MCP server '{name}' is named but not defined")
        elif "command" in server:
            command = server["command"]
            if shutil.which(command) is None:
                problems.append(f"MCP server '{name}': command {brief(command)} not found on PATH")
        else:
            try:
                parts = urlsplit(server["url"])
                valid = parts.scheme in ("http", "https", "ws", "wss") and bool(parts.hostname)
            except ValueError:
                valid = False
            if not valid:
                problems.append(f"MCP server '{name}': url {brief(server['url'])} is not an http(s) or ws(s) URL")
    return problems, notes
