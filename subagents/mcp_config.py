"""The ``mcp_config`` field: the MCP servers a subagent may use.

Parsed and validated now; connecting to the servers comes later. Accepted
shapes, all normalised to ``{server name: server config}``:

* a mapping of server name to config (the my-pi-agent / OpenHands form);
* the ``.mcp.json`` form ``{"mcpServers": {...}}``;
* Claude Code's list form: each item a server name (a reference to a
  server the parent defines, stored as ``{}``) or ``{name: config}``.

A config has ``command`` (with optional ``args`` list and ``env`` mapping)
for a local server, or ``url`` (with optional ``headers``) for a remote one,
and an optional ``transport``/``type``.

Example::

    normalize_mcp_config(["github", {"files": {"command": "mcp-files", "args": ["."]}}])
    # {'github': {}, 'files': {'command': 'mcp-files', 'args': ['.']}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from subagents.errors import brief

TRANSPORTS = ("stdio", "sse", "http", "streamable_http", "streamable-http", "websocket")


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
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"expected MCP server names to be non-empty strings, got {brief(name)}")
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
    return config
