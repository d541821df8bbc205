"""Turning a :class:`SubagentSpec` into a compiled child graph.

The child is built with :func:`langchain.agents.create_agent` under the
spec's name, so it runs as a named subgraph of the parent. Fields map onto
LangChain's own middleware: ``HumanInTheLoopMiddleware`` for
``permission_mode`` and ``interrupt_on``, ``SummarizationMiddleware`` for
``condenser``; a middleware of one of these classes in the spec's own
``middleware`` wins over the one the field would add (``create_agent``
refuses two). ``max_turns`` is enforced by the runner's meter at each model
call rather than by ``ModelCallLimitMiddleware``: the same limit, without
two extra graph steps per turn on the delegation hot path (a caller's own
``ModelCallLimitMiddleware`` in ``middleware`` still works).

The system prompt is the spec's own (never the parent's), followed by an
``<available_skills>`` block for exactly the skills the spec names.

Example::

    graph = build_subagent(spec, parent_model=model, parent_tools=[search, write_file],
                           options=BuildOptions(risky_tools={"write_file"}))
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, SummarizationMiddleware

from subagents._build_options import BuildOptions
from subagents._child_state import child_state_schema
from subagents._model_middleware import middleware_for_model
from subagents._one_level import (
    guard_for,
    is_delegating_middleware,
    is_forbidden_tool,
    strip_agents_block,
    tool_name,
)
from subagents._spec import SpecError, SubagentSpec
from subagents.definitions._condenser import condenser_middleware
from subagents.definitions._hook_middleware import HookMiddleware
from subagents.definitions._mcp_tools import LIST_TIMEOUT_S, McpToolset, is_mcp_name, select_mcp_tools
from subagents.definitions._models import resolve_model
from subagents.definitions._permissions import approval_rules, effective_permission_mode
from subagents.definitions._skills import available_skills_block
from subagents.definitions._spec_skills import skills_for

log = logging.getLogger(__name__)

UnknownToolPolicy = Literal["error", "warn", "ignore"]


def resolve_tools(
    spec: SubagentSpec,
    parent_tools: Sequence[Any],
    *,
    unknown_tools: UnknownToolPolicy = "warn",
) -> list[Any]:
    """The child's tools: allow list (or the parent's), minus denied and forbidden ones.

    A name the parent does not have never widens the child's tools: it is an
    error, a warning or ignored, as ``unknown_tools`` says. An allow list
    that resolves to nothing gives a child with no tools.
    """
    by_name = {tool_name(t): t for t in parent_tools}
    if spec.tools is None:
        chosen = list(parent_tools)
    else:
        chosen = []
        for item in spec.tools:
            if not isinstance(item, str):
                chosen.append(item)
            elif item in by_name:
                chosen.append(by_name[item])
            elif not is_forbidden_tool({"name": item}) and not is_mcp_name(item):
                _report_unknown_tool(spec.name, item, sorted(by_name), unknown_tools)
    denied = set(spec.disallowed_tools)
    return [t for t in chosen if tool_name(t) not in denied and not is_forbidden_tool(t)]


def _report_unknown_tool(
    agent: str, name: str, available: list[str], policy: UnknownToolPolicy
) -> None:
    message = (
        f"subagent {agent!r}: field 'tools' names {name!r}, which the parent does not have "
        f"(available: {', '.join(available) or 'none'})"
    )
    if policy == "error":
        raise SpecError(message)
    if policy == "warn":
        warnings.warn(message, stacklevel=4)


def build_subagent(
    spec: SubagentSpec,
    *,
    parent_model: Any,
    parent_tools: Sequence[Any],
    unknown_tools: UnknownToolPolicy = "warn",
    options: BuildOptions | None = None,
    inherited_middleware: Sequence[Any] | Callable[[], Sequence[Any]] = (),
) -> Any:
    """Compile one spec into a child graph (called once per spec, on first use).

    ``inherited_middleware`` is the parent's model-level middleware (model
    fallback, model retry): a child that inherits the parent's model gets it too.
    """
    options = options or BuildOptions()

    def model_for(name: Any) -> Any:
        return resolve_model(
            name,
            parent_model,
            agent=spec.name,
            profiles=options.model_profiles,
            unknown_model=options.unknown_model,
        )

    model = model_for(spec.model)
    tools = resolve_tools(spec, parent_tools, unknown_tools=unknown_tools)
    mcp = _mcp_toolset(spec, options)
    if mcp is not None:
        tools += select_mcp_tools(mcp.tools, spec.tools, spec.disallowed_tools)

    middleware = _child_middleware(spec, options, tools, model, model_for)
    middleware = [*middleware_for_model(spec, inherits_model=model is parent_model,
                                        own=middleware, inherited=inherited_middleware), *middleware]
    # A structured response keeps the tools node too: without one, LangChain loops a
    # plain-text answer back to the model instead of ending the child.
    has_tools = (bool(tools) or spec.response_format is not None
                 or any(getattr(mw, "tools", None) for mw in middleware))
    if (guard := guard_for(middleware, has_tools=has_tools)) is not None:
        middleware.append(guard)
    graph = create_agent(
        model,
        tools,
        system_prompt=child_system_prompt(spec, options) or None,
        middleware=middleware,
        response_format=spec.response_format,
        state_schema=child_state_schema(tools, parent_schemas=options.state_schemas,
                                        excluded=options.excluded_keys),
        name=spec.name,
    )
    # The MCP sessions of a task close when its run ends, whichever way it ends.
    return graph if mcp is None else graph.with_config(callbacks=[mcp.lifecycle])


def _child_middleware(spec: SubagentSpec, options: BuildOptions, tools: Sequence[Any], model: Any,
                      model_for: Callable[[Any], Any]) -> list[Any]:
    """The child's own middleware: the spec's (never a delegating one), approvals, condenser, hooks."""
    middleware: list[Any] = []
    for mw in spec.middleware:
        if is_delegating_middleware(mw):
            log.warning("subagent %r: dropped delegating middleware %s", spec.name, mw.name)
            continue
        middleware.append(mw)

    def missing(cls: type) -> bool:
        return not any(isinstance(mw, cls) for mw in middleware)

    rules = approval_rules(
        effective_permission_mode(spec.permission_mode, options.permission_mode),
        [tool_name(t) for t in tools],
        risky_tools=options.risky_tools,
        # deepagents' rule: a spec's own interrupt_on replaces the parent's.
        interrupt_on=spec.interrupt_on if spec.interrupt_on is not None else options.interrupt_on,
    )
    if rules and missing(HumanInTheLoopMiddleware):
        middleware.append(HumanInTheLoopMiddleware(interrupt_on=rules))
    if missing(SummarizationMiddleware):
        try:
            condenser = condenser_middleware(spec.condenser, model, resolve_summarizer=model_for)
        except ValueError as exc:  # e.g. a fraction trigger on a model with no known window
            raise SpecError(f"subagent {spec.name!r}: field 'condenser': {exc}") from exc
        if condenser is not None:
            middleware.append(condenser)
    if spec.hooks:
        middleware.append(HookMiddleware(spec.hooks, agent_type=spec.name))
    return middleware


def _mcp_toolset(spec: SubagentSpec, options: BuildOptions) -> McpToolset | None:
    """The spec's MCP servers (names resolved through the caller's), their tools listed once."""
    if not spec.mcp_config:
        return None
    servers = {
        name: config or options.mcp_servers.get(name, {}) for name, config in spec.mcp_config.items()
    }
    timeout = min(spec.timeout_s or LIST_TIMEOUT_S, LIST_TIMEOUT_S)
    try:
        return McpToolset.connect(spec.name, servers, timeout=timeout)
    except ValueError as exc:
        raise SpecError(f"subagent {spec.name!r}: field 'mcp_config': {exc}") from None


def child_system_prompt(spec: SubagentSpec, options: BuildOptions) -> str:
    """The spec's prompt plus its own skills block; never the parent's prompt or agents."""
    skills = available_skills_block(skills_for(spec.skills, options.skills, agent=spec.name))
    prompt = strip_agents_block(spec.system_prompt)
    return "\n\n".join(part for part in (prompt, skills) if part)
