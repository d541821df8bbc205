"""Assembling a root agent that delegates to governed subagents.

deepagents' names are here too, so a migrating user changes only the import::

    from deep_agent import CompiledSubAgent, SubAgent, SubAgentMiddleware, create_deep_agent
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deep_agent.factory import create_deep_agent, resolve_root_model
    from middleware import SubAgentMiddleware
    from subagents import AsyncSubAgent, CompiledSubAgent, CompiledSubagent, SubAgent

_WHERE = {
    "create_deep_agent": "deep_agent.factory",
    "resolve_root_model": "deep_agent.factory",
    "SubAgentMiddleware": "middleware",
    "CompiledSubAgent": "subagents",
    "CompiledSubagent": "subagents",
    "AsyncSubAgent": "subagents",
    "SubAgent": "subagents",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    # Imported on first use, so `deep-agent --help` does not load LangChain.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'deep_agent' has no attribute {name!r}")
