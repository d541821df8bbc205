"""Assembling a root agent that delegates to governed subagents. deepagents' names are here too, so a migrating user
changes only the import (docs/migrating.md); the rest of deepagents' ``__all__`` and its ``backends`` are deepagents'
own objects, with the ``deepagents`` extra installed (without it, importing one is an ``ImportError`` naming the
extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subagents._exports import lazy_exports

if TYPE_CHECKING:  # re-exported (the "as" says so), imported lazily below
    from deep_agent._factory import DeepAgentState as DeepAgentState
    from deep_agent._factory import create_deep_agent as create_deep_agent
    from deep_agent._factory import resolve_root_model as resolve_root_model
    from deep_agent._local_model import OpenAICompatibleChat as OpenAICompatibleChat
    from deep_agent._testing import ScriptedChatModel as ScriptedChatModel
    from deep_agent._testing import ScriptExhausted as ScriptExhausted
    from deep_agent._testing import tool_call as tool_call
    from middleware import AsyncSubAgentMiddleware as AsyncSubAgentMiddleware
    from middleware import AsyncSubAgentState as AsyncSubAgentState
    from middleware import SubAgentMiddleware as SubAgentMiddleware
    from subagents import CompiledSubagent as CompiledSubagent
    from subagents._spec import AsyncSubAgent as AsyncSubAgent
    from subagents._spec import CompiledSubAgent as CompiledSubAgent
    from subagents._spec import SubAgent as SubAgent
    from subagents.background import aanswer_approval as aanswer_approval
    from subagents.background import answer_approval as answer_approval

_WHERE = {name: module for module, names in {
    "deep_agent._factory": ("DeepAgentState", "create_deep_agent", "resolve_root_model"),
    "deep_agent._local_model": ("OpenAICompatibleChat",),
    "deep_agent._testing": ("ScriptExhausted", "ScriptedChatModel", "tool_call"),
    "middleware": ("AsyncSubAgentMiddleware", "AsyncSubAgentState", "SubAgentMiddleware"),
    "subagents": ("CompiledSubagent",),
    "subagents.background": ("aanswer_approval", "answer_approval"),
    "subagents._spec": ("AsyncSubAgent", "CompiledSubAgent", "SubAgent"),
}.items() for name in names}

__all__ = sorted(_WHERE)

_ours = lazy_exports(__name__, _WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return _ours(name)
    from deep_agent._deepagents import from_deepagents  # only when a name not ours is asked for

    return from_deepagents(name)
