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
from collections.abc import Sequence
from typing import Any, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, SummarizationMiddleware

from subagents.build_options import BuildOptions
from subagents.condenser import condenser_middleware
from subagents.models import resolve_model
from subagents.one_level import (
    OneLevelGuard,
    OneLevelToolGuard,
    is_delegating_middleware,
    is_forbidden_tool,
    strip_agents_block,
    tool_name,
)
from subagents.permissions import approval_rules, effective_permission_mode
from subagents.spec import SpecError, SubagentSpec

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
            elif not is_forbidden_tool({"name": item}):
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
) -> Any:
    """Compile one spec into a child graph (called once per spec, on first use)."""
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
        interrupt_on=spec.interrupt_on,
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
    has_tools = bool(tools) or any(getattr(mw, "tools", None) for mw in middleware)
    middleware.append(OneLevelToolGuard() if has_tools else OneLevelGuard())

    return create_agent(
        model,
        tools,
        system_prompt=child_system_prompt(spec, options) or None,
        middleware=middleware,
        response_format=spec.response_format,
        name=spec.name,
    )


def child_system_prompt(spec: SubagentSpec, options: BuildOptions) -> str:
    """The spec's prompt plus its own skills block; never the parent's prompt or agents."""
    skills = options.skills.prompt_block(spec.skills, agent=spec.name) if spec.skills else ""
    prompt = strip_agents_block(spec.system_prompt)
    return "\n\n".join(part for part in (prompt, skills) if part)
