"""``create_deep_agent``: a root agent that delegates through ``task``.

Example::

    from deep_agent import create_deep_agent

    agent = create_deep_agent(
        "openai:gpt-4.1-mini",
        tools=[search],
        subagents=[{"name": "researcher", "description": "Finds facts.",
                    "system_prompt": "Research and cite.", "tools": ["search"]}],
        system_prompt="You plan and delegate.",
    )
    agent.invoke({"messages": [{"role": "user", "content": "Compare A and B"}]})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel

from middleware import SubAgentMiddleware
from subagents import AnySpec, private_state_keys


def resolve_root_model(model: str | BaseChatModel) -> BaseChatModel:
    """A ``"provider:model"`` string through ``init_chat_model``, or the model itself."""
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            f"model: expected a 'provider:model' string or a BaseChatModel, got {type(model).__name__}"
        )
    return model


def create_deep_agent(
    model: str | BaseChatModel,
    tools: Sequence[Any] = (),
    *,
    subagents: Sequence[AnySpec | Mapping[str, Any]] = (),
    system_prompt: str | None = None,
    middleware: Sequence[Any] = (),
    general_purpose: bool = True,
    max_concurrent_tasks: int | None = None,
    unknown_tools: Literal["error", "warn", "ignore"] = "warn",
    response_format: Any = None,
    checkpointer: Any = None,
    store: Any = None,
    name: str | None = None,
    **create_agent_kwargs: Any,
) -> Any:
    """Build a compiled root agent whose subagents are reached through ``task``.

    Children inherit ``model`` and ``tools`` unless their spec says otherwise.
    Keys that ``middleware`` marks private never reach a child. Further
    keyword arguments go to :func:`langchain.agents.create_agent`.
    """
    root_model = resolve_root_model(model)
    tools = list(tools)
    delegation = SubAgentMiddleware(
        subagents,
        model=root_model,
        tools=tools,
        general_purpose=general_purpose,
        max_concurrent_tasks=max_concurrent_tasks,
        private_state_keys=private_state_keys(middleware),
        unknown_tools=unknown_tools,
    )
    return create_agent(
        root_model,
        tools,
        system_prompt=system_prompt,
        middleware=[*middleware, delegation],
        response_format=response_format,
        checkpointer=checkpointer,
        store=store,
        name=name,
        **create_agent_kwargs,
    )
