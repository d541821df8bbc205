"""Private and excluded keys never cross, in either direction, whoever marks them private.

A key a parent middleware, the agent's own state schema or
``private_state_keys=`` marks private, and the keys excluded by the
boundary (messages, todos, ledgers...), never reach a child and never come
back from one; a forked child sees the conversation, never the call in flight.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import MODES, _assert_one_message_and_record_per_call, _compiled, _invoke, _parallel, _user
from helpers.graphs import tool_messages, user
from middleware import SubAgentMiddleware
from subagents import CompiledSubagent
from subagents._settings import DelegationSettings


class _SecretState(AgentState):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]


class _SecretMiddleware(AgentMiddleware):
    """A parent middleware keeping a private key (a session token, say)."""

    state_schema = _SecretState

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"secret": "s3cr3t-token"}


@MODES
@pytest.mark.xfail(strict=True, reason="OPEN: in a plain create_agent graph the middleware cannot see the parent's middleware list; pass private_state_keys= (create_deep_agent does)")
def test_a_private_key_of_a_parent_middleware_never_crosses_in_a_plain_create_agent_graph(mode):
    """'It never sees ... any key a middleware marks private, and none of those come back.'
    In a plain create_agent graph the child receives the private key and can overwrite it."""
    seen: dict[str, Any] = {}

    def child(inp: dict[str, Any]) -> dict[str, Any]:
        seen.update(inp)
        return {**inp, "secret": "overwritten by the child", "messages": [AIMessage("ok")]}

    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    probe: dict[str, Any] = {}

    class Probe(AgentMiddleware):
        def after_agent(self, state: Any, runtime: Any) -> None:
            probe["secret"] = state.get("secret")

    agent = create_agent(model, [], middleware=[
        _SecretMiddleware(), Probe(), SubAgentMiddleware([_compiled("c", child)])])
    out = _invoke(mode, agent, _user())
    assert out["messages"][-1].content == "parent carried on"
    assert "secret" not in seen, "the child received the parent's private key"
    assert probe["secret"] == "s3cr3t-token", "the child overwrote the parent's private key"


@MODES
def test_a_fork_never_sees_the_call_in_flight_or_a_system_message(mode):
    from langchain_core.messages import SystemMessage

    seen: list[list[Any]] = []

    def spy(messages: list[Any]) -> str:
        seen.append(list(messages))
        return "reviewed"

    model = ScriptedChatModel(rules=[("Review", [spy]), ("other", ["o"])],
                              responses=_parallel(("Review it", "rev"), ("other", "general-purpose")))
    agent = create_deep_agent(model, [], subagents=[
        {"name": "rev", "description": "r", "system_prompt": "CHILD PROMPT", "context": "fork"}])
    out = _invoke(mode, agent, {"messages": [SystemMessage("PARENT SECRET"), HumanMessage("plan"),
                                             AIMessage("ok"), HumanMessage("get a review")]})
    _assert_one_message_and_record_per_call(out, 2)
    (history,) = seen
    assert not any("PARENT SECRET" in m.text for m in history)
    assert not any(getattr(m, "tool_calls", None) for m in history)


@MODES
def test_no_excluded_or_private_key_reaches_a_child_or_comes_back(mode):
    from langchain.agents.middleware import ModelCallLimitMiddleware, TodoListMiddleware, ToolCallLimitMiddleware

    forged = {"todos": [{"content": "forged", "status": "pending"}], "subagent_tasks": {"forged": {"id": "forged"}},
              "subagent_usage": {"tasks": 999}, "thread_model_call_count": 999, "run_model_call_count": 999,
              "jump_to": "end", "dynamic_subagents": {"x": {}}, "async_tasks": {"f": {}}, "skills_metadata": ["x"],
              "thread_tool_call_count": {"x": 9}, "secret": "forged"}
    seen: dict[str, Any] = {}

    def child(inp: dict[str, Any]) -> dict[str, Any]:
        seen.update(inp)
        return {**inp, **forged, "messages": [AIMessage("ok")]}

    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("write_todos", todos=[{"content": "real", "status": "pending"}])]},
        *_parallel(("x", "c"))])
    agent = create_deep_agent(
        model, [], subagents=[_compiled("c", child)], background=True,
        middleware=[TodoListMiddleware(), ModelCallLimitMiddleware(run_limit=50), ToolCallLimitMiddleware(run_limit=50),
                    _SecretMiddleware()], settings=DelegationSettings.of(dynamic_subagents=True))
    out = _invoke(mode, agent, _user())
    assert sorted(seen) == ["messages"]
    assert out["todos"] == [{"content": "real", "status": "pending"}]
    assert "forged" not in out["subagent_tasks"] and out["subagent_usage"]["tasks"] == 1
    assert not out.get("dynamic_subagents") and not out.get("async_tasks")


class _WithSecret(AgentState):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]


def test_a_key_the_agents_own_state_schema_marks_private_never_crosses(run):
    @tool
    def login(runtime: ToolRuntime) -> Command:
        """Log in, keeping a token in private state."""
        return Command(update={"secret": "parent-only token",
                               "messages": [ToolMessage("logged in", tool_call_id=runtime.tool_call_id)]})

    def child(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [*state["messages"], AIMessage(json.dumps({"saw": state.get("secret")}))],
                "secret": "overwritten by the child"}

    seen: dict[str, Any] = {}

    class Peek(AgentMiddleware):
        def after_agent(self, state, runtime):
            seen["secret"] = state.get("secret")

    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("login")]},
                                         {"tool_calls": [tool_call("task", description="peek", subagent_type="peeker")]},
                                         "parent carried on"])
    agent = create_deep_agent(model, [login], state_schema=_WithSecret, middleware=[Peek()], subagents=[
        CompiledSubagent(name="peeker", description="peeks", runnable=RunnableLambda(child))])
    out = run(agent, user("go"))
    assert json.loads(tool_messages(out)[-1].content) == {"saw": None}
    assert seen["secret"] == "parent-only token"


def test_private_state_keys_reads_a_state_schema_as_it_reads_middleware():
    from subagents._boundary import private_state_keys

    assert "secret" in private_state_keys([_WithSecret])
