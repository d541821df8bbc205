"""One level of delegation: a child never delegates, plans or remembers for the parent.

Three independent defences, each enough on its own:

1. **Tools.** The builder drops every forbidden tool from the child's tool
   list, whatever its allow list says, and :class:`OneLevelGuard` removes
   any that a middleware still contributes from every model request and
   refuses a call to one (see :func:`guard_for` for which child gets which
   guard).
2. **No registry.** The builder drops any delegating middleware (one that
   sets ``delegates = True``, such as ``SubAgentMiddleware``) from the
   child's middleware, so the child has no subagent registry.
3. **Prompt.** :class:`OneLevelGuard` strips any ``<available_agents>``
   block from the child's system prompt.

The runner adds a fourth, at run time: a ``task`` call made from inside a
running child (for instance from a caller's compiled graph) is refused.

The tool names below are a deny list, not knowledge of the middleware
above: they are the delegation, planning and memory tools of this library
*and* of deepagents and Claude Code, which a child must not hold whichever
middleware its parent uses. This library's own tools are also marked with
:data:`DELEGATION_TOOL_TAG`, so a renamed one is still refused.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import SystemMessage, ToolMessage

DELEGATION_TOOL_NAMES: frozenset[str] = frozenset(
    {
        "task",
        "start_async_task",
        "check_async_task",
        "update_async_task",
        "cancel_async_task",
        "list_async_tasks",
        "retry_async_task",
        "create_subagent",
    }
)
TODO_TOOL_NAMES: frozenset[str] = frozenset({"write_todos", "read_todos"})
MEMORY_TOOL_NAMES: frozenset[str] = frozenset(
    {"memory", "save_memory", "read_memory", "update_memory", "delete_memory"}
)
FORBIDDEN_TOOL_NAMES: frozenset[str] = DELEGATION_TOOL_NAMES | TODO_TOOL_NAMES | MEMORY_TOOL_NAMES
"""Tool names a child never holds."""

DELEGATION_TOOL_TAG = "delegation"
"""A tool whose ``metadata`` has this key set is forbidden to children too."""

# An opening or closing tag in any case, with spaces or attributes (bounded, so a scan stays linear).
_AGENTS_TAG = re.compile(r"<\s*(?:(/)\s*)?available_agents\b[^<>]{0,200}>", re.IGNORECASE)


def tool_name(tool: Any) -> str:
    """The name a tool is called by, for tools, functions and dict schemas."""
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name", ""))
    return str(getattr(tool, "name", None) or getattr(tool, "__name__", ""))


def is_forbidden_tool(tool: Any) -> bool:
    """Whether a child may never hold this tool."""
    if tool_name(tool) in FORBIDDEN_TOOL_NAMES:
        return True
    metadata = getattr(tool, "metadata", None) or {}
    return bool(metadata.get(DELEGATION_TOOL_TAG))


def is_delegating_middleware(middleware: Any) -> bool:
    """Whether a middleware gives its agent a way to delegate."""
    if getattr(middleware, "delegates", False):
        return True
    return any(is_forbidden_tool(t) for t in getattr(middleware, "tools", ()) or ())


def strip_agents_block(text: str) -> str:
    """Remove every ``<available_agents>`` block from a prompt, however it is spelled.

    Tags match in any case, with attributes or spaces; nested blocks go
    whole; a block never closed takes the rest of the prompt with it, and a
    stray closing tag goes too.
    """
    while "available_agents" in text.lower() and _AGENTS_TAG.search(text):
        text = _strip_once(text)  # again only if what was left around a block joined into a new tag
    return text


def _strip_once(text: str) -> str:
    kept, depth, start = [], 0, 0
    for tag in _AGENTS_TAG.finditer(text):  # one pass: nesting is counted, not re-matched
        if depth == 0:
            kept.append(text[start:tag.start()])
        depth = max(0, depth - 1) if tag.group(1) else depth + 1
        start = tag.end()
    if depth == 0:
        kept.append(text[start:])
    return "\n\n".join(part.strip() for part in kept if part.strip())


class OneLevelGuard(AgentMiddleware):
    """Keeps delegation out of a child at every model and tool call."""

    name = "OneLevelGuard"

    def _clean(self, request: Any) -> Any:
        tools = [t for t in request.tools if not is_forbidden_tool(t)]
        overrides: dict[str, Any] = {}
        if len(tools) != len(request.tools):
            overrides["tools"] = tools
        system = request.system_message
        if system is not None and "available_agents" in system.text.lower():
            overrides["system_message"] = SystemMessage(content=strip_agents_block(system.text))
        return request.override(**overrides) if overrides else request

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._clean(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._clean(request))


class OneLevelToolGuard(OneLevelGuard):
    """The guard for a child that has tools: it also refuses a call to a forbidden one.

    A child with no tools (and no middleware contributing any) gets the plain
    :class:`OneLevelGuard`, so its graph has no empty tools node.
    """

    name = "OneLevelToolGuard"

    def _refusal(self, request: Any) -> ToolMessage | None:
        call = request.tool_call
        if call["name"] in FORBIDDEN_TOOL_NAMES or (
            request.tool is not None and is_forbidden_tool(request.tool)
        ):
            return ToolMessage(
                content=f"Tool '{call['name']}' is not available to a subagent: "
                "subagents cannot delegate. Do the work yourself.",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        return None

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return self._refusal(request) or await handler(request)


REQUEST_NEUTRAL_MIDDLEWARE: frozenset[type] = frozenset(
    {ModelRetryMiddleware, ModelFallbackMiddleware, SummarizationMiddleware}
)
"""LangChain middleware (these classes exactly, not subclasses) that never adds a tool or prompt text to a request."""


_HOOKS = frozenset({"wrap_model_call", "awrap_model_call", "before_model", "abefore_model",
                    "after_model", "aafter_model", "before_agent", "abefore_agent", "after_agent", "aafter_agent"})
"""Hooks an instance can replace on itself: one that did is no longer the neutral class it claims to be."""


def guard_for(middleware: Sequence[Any], *, has_tools: bool) -> OneLevelGuard | None:
    """The guard a built child needs, given its other middleware; ``None`` when it needs none.

    A child with tools gets :class:`OneLevelToolGuard`: its model may call a
    forbidden tool by name. A child without tools gets :class:`OneLevelGuard`
    only when some middleware could add a tool or an ``<available_agents>``
    block to a model request after the builder has removed them, i.e. any
    middleware that is not one of :data:`REQUEST_NEUTRAL_MIDDLEWARE`. A bare
    child gets none: the builder already gave its model exactly the request
    the guard would leave, and LangChain traces each ``wrap_model_call`` as a
    span of its own, so a guard with nothing to guard costs every model call.
    A neutral middleware with a hook replaced on the instance is not neutral.

    Example::

        guard_for([], has_tools=False)                  # None
        guard_for([TodoListMiddleware()], has_tools=False)  # OneLevelGuard()
    """
    if has_tools:
        return OneLevelToolGuard()
    if any(not _is_neutral(mw) for mw in middleware):
        return OneLevelGuard()
    return None


def _is_neutral(middleware: Any) -> bool:
    return type(middleware) in REQUEST_NEUTRAL_MIDDLEWARE and not _HOOKS & getattr(middleware, "__dict__", {}).keys()
