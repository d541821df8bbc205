"""Turning a :class:`SubagentSpec` into a compiled child graph.

The child is built with :func:`langchain.agents.create_agent` under the
spec's name, so it runs as a named subgraph of the parent. Its limits are
LangChain's own middleware: ``ModelCallLimitMiddleware`` for ``max_turns``
and ``HumanInTheLoopMiddleware`` for ``interrupt_on``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware
from langchain_core.language_models import BaseChatModel

from subagents.one_level import (
    OneLevelGuard,
    is_delegating_middleware,
    is_forbidden_tool,
    strip_agents_block,
    tool_name,
)
from subagents.spec import DEFAULT_MAX_TURNS, SpecError, SubagentSpec

log = logging.getLogger(__name__)

UnknownToolPolicy = Literal["error", "warn", "ignore"]


def resolve_model(model: str | BaseChatModel | None, parent_model: Any, *, agent: str) -> Any:
    """The child's model: the parent's for ``None``/``"inherit"``, else the named one."""
    if model is None or model == "inherit":
        if parent_model is None:
            raise SpecError(
                f"subagent {agent!r}: field 'model' inherits the parent's model, "
                "but the parent's model is not known yet"
            )
        return parent_model
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        try:
            return init_chat_model(model)
        except Exception as exc:  # noqa: BLE001 - reported with the field named
            raise SpecError(f"subagent {agent!r}: field 'model' {model!r}: {exc}") from exc
    return model


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
) -> Any:
    """Compile one spec into a child graph (called once per spec, on first use)."""
    model = resolve_model(spec.model, parent_model, agent=spec.name)
    tools = resolve_tools(spec, parent_tools, unknown_tools=unknown_tools)

    middleware: list[Any] = []
    for mw in spec.middleware:
        if is_delegating_middleware(mw):
            log.warning("subagent %r: dropped delegating middleware %s", spec.name, mw.name)
            continue
        middleware.append(mw)
    # A caller's own instance of either class wins: create_agent refuses two.
    if not any(isinstance(mw, ModelCallLimitMiddleware) for mw in middleware):
        middleware.append(
            ModelCallLimitMiddleware(
                run_limit=spec.max_turns or DEFAULT_MAX_TURNS, exit_behavior="error"
            )
        )
    if spec.interrupt_on and not any(
        isinstance(mw, HumanInTheLoopMiddleware) for mw in middleware
    ):
        middleware.append(HumanInTheLoopMiddleware(interrupt_on=dict(spec.interrupt_on)))
    middleware.append(OneLevelGuard())

    return create_agent(
        model,
        tools,
        system_prompt=strip_agents_block(spec.system_prompt) or None,
        middleware=middleware,
        response_format=spec.response_format,
        name=spec.name,
    )
