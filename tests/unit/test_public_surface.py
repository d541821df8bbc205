"""The public constructors stay small: the rest is one typed settings object."""

import inspect

from deep_agent import create_deep_agent
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware

DEEPAGENTS = ["model", "tools", "system_prompt", "middleware", "subagents", "skills", "memory", "permissions",
              "backend", "interrupt_on", "response_format", "state_schema", "context_schema", "checkpointer",
              "store", "debug", "name", "cache"]


def parameters(callable_) -> list[str]:
    return [p for p in inspect.signature(callable_).parameters if p != "self"]


def test_create_deep_agent_takes_deepagents_arguments_and_a_few_more():
    names = parameters(create_deep_agent)
    assert len(names) <= 24, names
    assert set(DEEPAGENTS) <= set(names) and "settings" in names


def test_the_middlewares_take_at_most_eleven():
    assert len(parameters(SubAgentMiddleware.__init__)) <= 11
    assert len(parameters(BackgroundSubagentMiddleware.__init__)) <= 9
    for cls in (SubAgentMiddleware, BackgroundSubagentMiddleware):
        assert "settings" in parameters(cls.__init__)
