"""``max_root_turns`` ends a run with its message in the corners a careful user would try.

Each case is a way a run could get past the limit, be stopped too early, or
end in a history a later call cannot use.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents.middleware import ModelCallLimitMiddleware, ModelRetryMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

ASYNC = [False, True]


@tool
def step() -> str:
    """One step of work."""
    return "ok"


class Answer(BaseModel):
    text: str


def run(agent: Any, payload: Any, config: dict[str, Any], use_async: bool) -> dict[str, Any]:
    if use_async:
        return asyncio.run(agent.ainvoke(payload, config))  # type: ignore[no-any-return]
    return agent.invoke(payload, config)  # type: ignore[no-any-return]


@pytest.mark.parametrize("use_async", ASYNC)
def test_a_stop_hook_that_always_blocks_does_not_carry_the_run_past_the_limit(use_async: bool) -> None:
    # The limit's own message is not the agent choosing to stop: a Stop hook that blocks it would send
    # the run back to a model call the limit refuses again, round after round, to the recursion limit.
    hooks = {"Stop": [{"hooks": [{"type": "command", "command": "echo keep going >&2; exit 2"}]}]}
    model = ScriptedChatModel(default="an answer")
    agent = create_deep_agent(model, hooks=hooks, settings=DelegationSettings.of(max_root_turns=3))

    out = run(agent, {"messages": [("user", "go")]}, {"recursion_limit": 80}, use_async)

    assert len(model.calls) == 3
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and "max_root_turns=3" in last.text
    # The hook still had its say on the model's own answers, before the limit.
    assert sum("keep going" in m.text for m in out["messages"] if m.type == "human") == 3


@pytest.mark.parametrize("use_async", ASYNC)
def test_a_negative_count_written_by_the_caller_buys_no_calls_past_the_limit(use_async: bool) -> None:
    # A plain input never reaches the private count, but Command(update=...) writes any key; a
    # negative count must not let the run call the model until LangGraph's recursion limit.
    model = ScriptedChatModel(default={"tool_calls": [tool_call("step")]})
    agent = create_deep_agent(model, tools=[step], checkpointer=InMemorySaver(),
    settings=DelegationSettings.of(max_root_turns=3))
    crafted = Command(update={"messages": [("user", "go")], "run_model_call_count": -100})

    out = run(agent, crafted, {"configurable": {"thread_id": "t"}, "recursion_limit": 60}, use_async)

    assert len(model.calls) == 3
    assert "max_root_turns=3" in out["messages"][-1].text


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_a_bad_max_root_turns_is_refused_even_when_a_model_call_limit_of_the_callers_replaces_it(bad: Any) -> None:
    # The caller's ModelCallLimitMiddleware decides the limit, but a bad argument is still a mistake
    # to report, not one to drop silently.
    with pytest.raises(ValueError, match="max_root_turns"):
        create_deep_agent(ScriptedChatModel(default="x"),
                          middleware=[ModelCallLimitMiddleware(run_limit=5)], settings=DelegationSettings.of(
                              max_root_turns=bad,
                          ))


@pytest.mark.parametrize("use_async", ASYNC)
def test_the_limit_message_is_signed_with_the_agent_name_as_the_model_messages_are(use_async: bool) -> None:
    # A supervisor or a swarm tells its agents' messages apart by AIMessage.name; the message that
    # ends a named agent's run must not be the one that belongs to nobody.
    model = ScriptedChatModel(default={"tool_calls": [tool_call("step")]})
    agent = create_deep_agent(model, tools=[step], name="researcher",
    settings=DelegationSettings.of(max_root_turns=2))

    out = run(agent, {"messages": [("user", "go")]}, {}, use_async)

    ais = [m for m in out["messages"] if isinstance(m, AIMessage)]
    assert len(ais) == 3 and "max_root_turns=2" in ais[-1].text
    assert [m.name for m in ais] == ["researcher"] * 3


# -- what the docs promise about the count (docs/local-models.md, "What max_root_turns counts") --


@pytest.mark.parametrize("use_async", ASYNC)
def test_a_call_retried_by_model_retry_middleware_counts_once(use_async: bool) -> None:
    failed = []

    def every_other_fails(messages: Any) -> Any:
        if len(failed) < 3 and len(failed) == sum(m.type == "ai" for m in messages):
            failed.append(1)
            return RuntimeError("upstream 500")
        return {"tool_calls": [tool_call("step")]}

    model = ScriptedChatModel(default=every_other_fails)
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    agent = create_deep_agent(model, tools=[step], middleware=[retry],
    settings=DelegationSettings.of(max_root_turns=3))

    out = run(agent, {"messages": [("user", "go")]}, {}, use_async)

    assert len(failed) == 3 and len(model.calls) == 6  # three turns, each after one failed attempt
    assert sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in out["messages"]) == 3
    assert "max_root_turns=3" in out["messages"][-1].text


@pytest.mark.parametrize("use_async", ASYNC)
def test_parallel_tool_calls_and_the_childrens_own_calls_do_not_count(use_async: bool) -> None:
    model = ScriptedChatModel(
        rules=[("child work", [{"tool_calls": [tool_call("step")]}, {"tool_calls": [tool_call("step")]}, "child done"])],
        responses=[{"tool_calls": [tool_call("task", description="child work A", subagent_type="general-purpose"),
                                   tool_call("task", description="child work B", subagent_type="general-purpose"),
                                   tool_call("step"), tool_call("step")]},
                   "root answer"])
    agent = create_deep_agent(model, tools=[step], settings=DelegationSettings.of(max_root_turns=2))

    out = run(agent, {"messages": [("user", "go")]}, {}, use_async)

    assert out["messages"][-1].text == "root answer"
    assert len(model.calls) == 2 + 2 * 3


@pytest.mark.parametrize("use_async", ASYNC)
def test_each_invoke_and_each_resume_counts_from_zero(use_async: bool) -> None:
    # Per run, as documented: a run paused for approval every turn is bounded by whoever resumes it.
    model = ScriptedChatModel(default={"tool_calls": [tool_call("step")]})
    agent = create_deep_agent(model, tools=[step], interrupt_on={"step": True},
                              checkpointer=InMemorySaver(), settings=DelegationSettings.of(max_root_turns=2))
    config = {"configurable": {"thread_id": "t"}}

    out = run(agent, {"messages": [("user", "go")], "run_model_call_count": 10**6}, config, use_async)
    for _ in range(4):
        assert "__interrupt__" in out
        out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config, use_async)

    assert len(model.calls) == 5  # more than max_root_turns on the thread, never a refusal


@pytest.mark.parametrize("use_async", ASYNC)
def test_a_stopped_structured_run_keeps_no_earlier_answer_and_the_thread_goes_on(use_async: bool) -> None:
    model = ScriptedChatModel(default={"tool_calls": [tool_call("Answer", text="first")]})
    agent = create_deep_agent(model, tools=[step], response_format=ToolStrategy(Answer),
                              checkpointer=InMemorySaver(), settings=DelegationSettings.of(max_root_turns=2))
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, {"messages": [("user", "one")]}, config, use_async)["structured_response"] == Answer(text="first")

    model.default = {"tool_calls": [tool_call("step")]}
    stopped = run(agent, {"messages": [("user", "two")]}, config, use_async)
    assert "max_root_turns=2" in stopped["messages"][-1].text
    assert stopped["structured_response"] is None  # not the first question's answer

    model.default = {"tool_calls": [tool_call("Answer", text="third")]}
    answered = run(agent, {"messages": [("user", "three")]}, config, use_async)
    assert answered["structured_response"] == Answer(text="third")
