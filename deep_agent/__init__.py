"""Assembling a root agent that delegates to governed subagents.

deepagents' names are here too, so a migrating user changes only the import::

    from deep_agent import CompiledSubAgent, SubAgent, SubAgentMiddleware, create_deep_agent
"""

from deep_agent.factory import create_deep_agent, resolve_root_model
from middleware import SubAgentMiddleware
from subagents.spec import CompiledSubAgent, CompiledSubagent
from subagents.spec_dicts import AsyncSubAgent, SubAgent

__all__ = [
    "AsyncSubAgent",
    "CompiledSubAgent",
    "CompiledSubagent",
    "SubAgent",
    "SubAgentMiddleware",
    "create_deep_agent",
    "resolve_root_model",
]
