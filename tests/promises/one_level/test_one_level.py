"""One level of delegation: each defence proven on its own."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    TodoListMiddleware,
)
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import MODES, _assert_one_message_and_record_per_call, _invoke, _parallel, _user
from helpers.graphs import tool_messages, user
from middleware import SubAgentMiddleware
from subagents import CompiledSubagent, SubagentSpec, build_subagent
from subagents._boundary import _AGENTS_TAG, OneLevelGuard, OneLevelToolGuard, strip_agents_block
from subagents._builder import guard_for
from subagents._roles import ChildPolicy, policy_of
from subagents._settings import DelegationSettings


@tool
def echo(x: str) -> str:
    """Echo."""
    return x


@tool
def write_todos(todos: list[str]) -> str:
    """A parent's todo board."""
    return "ok"


@tool
def save_memory(fact: str) -> str:
    """A parent's memory."""
    return "ok"


def test_defence_1_tool_list_never_holds_delegation_todo_or_memory_tools(run):
    model = ScriptedChatModel(
        rules=[("child", ["child done"])],
        responses=[{"tool_calls": [tool_call("task", description="child", subagent_type="greedy")]}, "ok"],
    )
    agent = create_deep_agent(
        model,
        [echo, write_todos, save_memory],
        subagents=[
            {"name": "greedy", "description": "asks for everything",
             "tools": ["task", "start_async_task", "write_todos", "save_memory", "echo"]},
        ],
    )
    run(agent, user("go"))
    child = [c for c in model.calls if any(m.text == "child" for m in c["messages"])]
    assert child and child[0]["tools"] == ["echo"]


def test_defence_1_guard_hides_and_refuses_middleware_contributed_tools(run):
    model = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("write_todos", todos=[{"content": "x", "status": "pending"}])]}, "ok"]
    )
    agent = create_agent(model, [echo], middleware=[TodoListMiddleware(), OneLevelToolGuard()])
    out = run(agent, user("go"))
    assert model.calls[0]["tools"] == ["echo"]
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "cannot delegate" in msg.content
    assert not out.get("todos")


def test_defence_2_delegating_middleware_is_dropped_from_the_child():
    model = ScriptedChatModel(responses=["x"])
    spec = SubagentSpec(
        name="sneaky",
        description="brings its own registry",
        middleware=[SubAgentMiddleware([{"name": "inner", "description": "d"}])],
    )
    graph = build_subagent(spec, parent_model=model, parent_tools=[echo])
    tool_node = graph.nodes["tools"].bound
    assert set(tool_node.tools_by_name) == {"echo"}


class _Delegates(AgentMiddleware):
    """Delegates without a tool the guard could see (through its own model call, say): its policy says so."""

    child_policy = ChildPolicy(delegates=True)


class _Quieter(_Delegates):
    child_policy = ChildPolicy()  # a subclass may widen the floor, never lower it


def test_defence_2_a_middleware_whose_policy_delegates_is_dropped_whatever_its_subclass_or_instance_says(caplog):
    lowered = _Delegates()
    lowered.child_policy = ChildPolicy()
    spec = SubagentSpec(name="sneaky", description="d", middleware=[_Delegates(), _Quieter(), lowered,
                                                                     AgentMiddleware()])
    build_subagent(spec, parent_model=ScriptedChatModel(responses=["x"]), parent_tools=[echo])
    dropped = [r.getMessage() for r in caplog.records if "dropped delegating middleware" in r.getMessage()]
    assert [m.rsplit(" ", 1)[1] for m in dropped] == ["_Delegates", "_Quieter", "_Delegates"], dropped
    assert policy_of(SubAgentMiddleware()).delegates and not policy_of(AgentMiddleware()).delegates


def test_defence_3_available_agents_block_never_reaches_a_child_prompt(run):
    leaked = "Be brief.\n<available_agents>\n<agent><name>x</name></agent>\n</available_agents>"
    model = ScriptedChatModel(
        rules=[("child", ["done"])],
        responses=[{"tool_calls": [tool_call("task", description="child", subagent_type="w")]}, "ok"],
    )
    agent = create_deep_agent(model, subagents=[{"name": "w", "description": "d", "system_prompt": leaked}])
    run(agent, user("go"))
    child = next(c for c in model.calls if any(m.text == "child" for m in c["messages"]))
    assert child["system"] == "Be brief."
    # The guard alone strips it too, for prompts it did not build.
    guarded = ScriptedChatModel(responses=["ok"])
    run(create_agent(guarded, system_prompt=leaked, middleware=[OneLevelGuard()]), user("hi"))
    assert "<available_agents>" not in guarded.calls[0]["system"]


def test_runtime_refusal_when_a_compiled_child_tries_to_delegate(run):
    inner_model = ScriptedChatModel(
        rules=[("nested", ["never runs"])],
        responses=[{"tool_calls": [tool_call("task", description="nested", subagent_type="general-purpose")]},
                   "could not delegate"],
    )
    nested = create_agent(inner_model, middleware=[SubAgentMiddleware()], name="nester")
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="try nesting", subagent_type="nester")]}, "ok"]
    )
    agent = create_deep_agent(parent, subagents=[{"name": "nester", "description": "d", "runnable": nested}])
    out = run(agent, user("go"))
    assert tool_messages(out)[0].content == "could not delegate"
    refusal = inner_model.calls[1]["messages"][-1]
    assert refusal.type == "tool" and "subagents cannot delegate" in refusal.text
    assert not any(m.text == "nested" for c in inner_model.calls for m in c["messages"] if m.type == "human")


def test_a_toolless_child_has_no_tools_node_and_a_child_with_tools_gets_the_refusing_guard():
    bare = build_subagent(SubagentSpec(name="bare", description="d", tools=[]),
                          parent_model=ScriptedChatModel(responses=["x"]), parent_tools=[echo])
    assert "tools" not in bare.nodes
    armed = build_subagent(SubagentSpec(name="armed", description="d", tools=["echo"]),
                           parent_model=ScriptedChatModel(responses=["x"]), parent_tools=[echo])
    assert "tools" in armed.nodes


class _Smuggler(AgentMiddleware):
    """A spec's own middleware that adds a delegation tool and an agents block to every model request."""

    @staticmethod
    def _smuggled(request):
        system = SystemMessage(content="Be brief.\n<available_agents>\n<agent>x</agent>\n</available_agents>")
        return request.override(tools=[*request.tools, _task_tool], system_message=system)

    def wrap_model_call(self, request, handler):
        return handler(self._smuggled(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._smuggled(request))


@tool("task")
def _task_tool(description: str) -> str:
    """A delegation tool a middleware tries to hand a child."""
    return "never"


def test_a_toolless_child_whose_middleware_adds_to_the_request_is_still_guarded(run):
    model = ScriptedChatModel(responses=["done"])
    graph = build_subagent(SubagentSpec(name="smuggled", description="d", tools=[], middleware=[_Smuggler()]),
                           parent_model=model, parent_tools=[echo])
    run(graph, user("hi"))
    assert model.calls[0]["tools"] == [] and model.calls[0]["system"] == "Be brief."


def test_only_a_child_with_nothing_to_guard_goes_without_a_guard():
    class OwnRetry(ModelRetryMiddleware):  # a subclass may do anything: it is not trusted
        pass

    assert guard_for([], has_tools=False) is None
    neutral = [ModelRetryMiddleware(), ModelFallbackMiddleware(ScriptedChatModel(responses=["x"]))]
    assert guard_for(neutral, has_tools=False) is None
    assert type(guard_for([], has_tools=True)) is OneLevelToolGuard
    assert type(guard_for([TodoListMiddleware()], has_tools=False)) is OneLevelGuard
    assert type(guard_for([OwnRetry()], has_tools=False)) is OneLevelGuard


@pytest.mark.parametrize("prompt", [
    "Be brief.\n<AVAILABLE_AGENTS>\n- x\n</AVAILABLE_AGENTS>",
    "Be brief.\n<available_agents id='x'>\n- x\n</available_agents>",
    "Be brief.\n< available_agents >\n- x\n< / available_agents >",
    "Be brief.\n<available_agents>a<available_agents>b</available_agents>- x</available_agents>",
    "Be brief.\n<available_agents>\n- x",
    "Be brief.\n</available_agents>",
    "Be brief.<<available_agents>- x</available_agents>available_agents>- x",
])
def test_an_agents_block_goes_however_it_is_spelled(prompt):
    assert strip_agents_block(prompt) == "Be brief."


def test_stripping_a_hostile_prompt_stays_linear():
    for hostile in ["< " + " " * 200_000 + "available_agents", "<available_agents " + "a" * 300_000,
                    "<available_agents>" * 20_000 + "x"]:
        started = time.process_time()
        strip_agents_block(hostile)
        assert time.process_time() - started < 2.0


_FRAGMENTS = ["<available_agents>", "</available_agents>", "<Available_Agents x>", "< /available_agents>",
              "<", ">", "available_agents", "text ", "\n"]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))
def test_no_agents_tag_survives_stripping(parts):
    assert not _AGENTS_TAG.search(strip_agents_block("".join(parts)))


def test_a_neutral_middleware_with_a_hook_replaced_on_the_instance_is_guarded():
    retry = ModelRetryMiddleware()
    retry.wrap_model_call = lambda request, handler: handler(request)
    assert type(guard_for([retry], has_tools=False)) is OneLevelGuard


@MODES
def test_a_compiled_deep_agent_child_cannot_delegate_further(mode):
    inner_model = ScriptedChatModel(rules=[("inner job", ["inner answer"])], responses=[
        {"tool_calls": [tool_call("task", description="inner job", subagent_type="general-purpose")]}, "inner done"])
    inner = create_deep_agent(inner_model, [])
    model = ScriptedChatModel(responses=_parallel(("outer job", "nested")))
    agent = create_deep_agent(model, [], subagents=[CompiledSubagent(name="nested", description="n", runnable=inner)])
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert not any(c["messages"][-1].text == "inner job" for c in inner_model.calls), "a grandchild ran"
    assert "subagents cannot delegate" in inner_model.calls[-1]["messages"][-1].text


def test_the_agents_block_is_appended_as_a_content_block_and_the_callers_blocks_survive():
    """A provider's cache_control (or any field) on the caller's system blocks reaches the model intact."""
    from langchain.agents import create_agent
    from langchain_core.messages import SystemMessage

    from deep_agent._testing import ScriptedChatModel, tool_call
    from middleware import SubAgentMiddleware

    cached = {"type": "text", "text": "You are the lead.", "cache_control": {"type": "ephemeral"}}
    model = ScriptedChatModel(rules=[("job", ["The full answer of the child, long enough to stand."])],
                              responses=[{"tool_calls": [tool_call("task", description="job",
                                                                   subagent_type="general-purpose")]}, "done"])
    agent = create_agent(model, [], system_prompt=SystemMessage(content=[cached]),
                         middleware=[SubAgentMiddleware(settings=DelegationSettings.of(short_answer_threshold=0))])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    parent_calls = [c for c in model.calls if c["messages"][-1].text == "go"]
    system = parent_calls[0]["messages"][0]
    assert system.content[0] == cached
    assert "<available_agents>" in system.content[-1]["text"]
    # The child (general-purpose, on the same model) never sees the parent's prompt or its agents block.
    child_calls = [c for c in model.calls if c["messages"][-1].text == "job"]
    assert child_calls and all("available_agents" not in m.text for c in child_calls for m in c["messages"])


def test_the_one_level_guard_strips_the_agents_block_per_content_block():
    from langchain_core.messages import SystemMessage

    from subagents._boundary import without_agents_block

    cached = {"type": "text", "text": "Stay brief.", "cache_control": {"type": "ephemeral"}}
    leaked = {"type": "text", "text": "\n\n<available_agents>\n- worker: does jobs\n</available_agents>"}
    cleaned = without_agents_block(SystemMessage(content=[cached, leaked]))
    assert cleaned.content == [cached]
    # A block split across two content blocks is found in the joined text, and the message is flattened.
    split = SystemMessage(content=[{"type": "text", "text": "a <available_agents> b"},
                                   {"type": "text", "text": "c </available_agents> d"}])
    assert "available_agents" not in without_agents_block(split).text
