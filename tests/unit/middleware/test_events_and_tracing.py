"""Events tied to their task and tool call; child runs named and tagged for tracing."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import tool
from langsmith import get_tracing_context

from helpers.graphs import user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call


def two_children():
    model = ScriptedChatModel(
        rules=[("alpha job", ["alpha answer " + "a" * 200]), ("beta job", ["beta answer " + "b" * 200])],
        responses=[
            {"tool_calls": [tool_call("task", description="alpha job", subagent_type="general-purpose"),
                            tool_call("task", description="beta job", subagent_type="general-purpose")]},
            "done",
        ],
        latency_s=0.02,
    )
    return create_deep_agent(model)


def collect(mode, agent):
    kwargs = {"stream_mode": ["custom", "messages"], "subgraphs": True}
    if mode == "sync":
        return list(agent.stream(user("go"), **kwargs))

    async def gather():
        return [chunk async for chunk in agent.astream(user("go"), **kwargs)]

    return asyncio.run(gather())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_lifecycle_events_and_child_messages_correlate_with_tasks(mode):
    chunks = collect(mode, two_children())
    events = [c for ns, kind, c in chunks if kind == "custom" and c.get("type") == "subagent_task"]
    by_task = {}
    for e in events:
        by_task.setdefault(e["task_id"], []).append(e)
    assert len(by_task) == 2
    tool_calls = set()
    for task_id, evs in by_task.items():
        assert [e["status"] for e in evs] == ["running", "completed"]
        assert {e["tool_call_id"] for e in evs} == {evs[0]["tool_call_id"]}
        assert evs[0]["agent_type"] == "general-purpose" and evs[1]["duration_ms"] > 0
        tool_calls.add(evs[0]["tool_call_id"])
    assert len(tool_calls) == 2

    namespaces = {e["task_id"]: e["namespace"] for evs in by_task.values() for e in evs if "namespace" in e}
    child_messages = [(ns, c) for ns, kind, c in chunks if kind == "messages" and ns]
    assert child_messages
    for ns, (message, meta) in child_messages:
        task_id = meta["subagent_task_id"]
        assert task_id in by_task
        assert meta["subagent_tool_call_id"] == by_task[task_id][0]["tool_call_id"]
        assert ns[: len(namespaces[task_id])] == namespaces[task_id]
        expected = "alpha" if "alpha" in message.text else "beta" if "beta" in message.text else None
        if expected:
            other = [t for t in by_task if t != task_id][0]
            assert namespaces[task_id] != namespaces[other]


class RunNames(BaseCallbackHandler):
    def __init__(self):
        self.runs = []

    def on_chain_start(self, serialized, inputs, *, name=None, metadata=None, **kwargs):
        self.runs.append((kwargs.get("name") or name, dict(metadata or {})))


def test_child_runs_are_named_and_tagged_for_tracing(run):
    names = RunNames()
    out = run(two_children(), user("go"), {"callbacks": [names]})
    tasks = out["subagent_tasks"]
    child_runs = [(n, m) for n, m in names.runs if n == "general-purpose"]
    assert len(child_runs) >= 2
    seen = set()
    for _, meta in child_runs:
        assert "ls_agent_type" not in meta  # LangSmith's alone, as in deepagents: see the next test
        assert meta["subagent_task_id"] in tasks
        assert meta["subagent_tool_call_id"] == tasks[meta["subagent_task_id"]]["tool_call_id"]
        seen.add(meta["subagent_task_id"])
    assert seen == set(tasks)


@pytest.mark.parametrize("timeout_s", [None, 60.0])  # the child on this thread, or on a helper thread
def test_child_runs_are_traced_as_subagents_for_langsmith_only(run, timeout_s):
    seen = []

    @tool
    def where_am_i() -> str:
        """Report the tracing metadata."""
        seen.append(dict(get_tracing_context().get("metadata") or {}))
        return "here"

    model = ScriptedChatModel(
        rules=[("trace me", [{"tool_calls": [tool_call("where_am_i")]}, "traced"])],
        responses=[{"tool_calls": [tool_call("task", description="trace me", subagent_type="worker")]},
                   {"tool_calls": [tool_call("where_am_i")]}, "done"],
    )
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "tools": [where_am_i],
            "timeout_s": timeout_s}
    run(create_deep_agent(model, tools=[where_am_i], subagents=[spec]), user("go"))
    assert [m.get("ls_agent_type") for m in seen] == ["subagent", None]  # the child's call, then the root's


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_langgraph_run_stream_subagent_handles_carry_the_tool_call():
    agent = two_children()
    run = agent.stream_events(user("go"), version="v3")
    handles = [(sub.name, sub.cause, sub.path) for sub in run.subagents]
    ledger = run.output["subagent_tasks"]
    assert sorted(h[0] for h in handles) == ["general-purpose", "general-purpose"]
    assert {h[1]["tool_call_id"] for h in handles} == {r["tool_call_id"] for r in ledger.values()}
    assert all(h[2][0].startswith("tools:") for h in handles)


def one_failing_child():
    model = ScriptedChatModel(
        rules=[("bad job", [RuntimeError("child model exploded")]), ("good job", ["good answer"])],
        responses=[
            {"tool_calls": [tool_call("task", description="bad job", subagent_type="general-purpose"),
                            tool_call("task", description="good job", subagent_type="general-purpose")]},
            "done",
        ],
    )
    return create_deep_agent(model)


def stream_v3(mode, agent):
    if mode == "sync":
        run = agent.stream_events(user("go"), version="v3")
        subs = list(run.subagents)
        output = run.output
        return [(sub.cause["tool_call_id"], sub.status, sub.error) for sub in subs], output

    async def gather():
        run = await agent.astream_events(user("go"), version="v3")
        subs = [sub async for sub in run.subagents]
        output = await run.output()
        return [(sub.cause["tool_call_id"], sub.status, sub.error) for sub in subs], output

    return asyncio.run(gather())


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_langgraph_run_stream_reports_a_failed_child_as_failed_with_its_error(mode):
    handles, output = stream_v3(mode, one_failing_child())
    by_call = {r["tool_call_id"]: r for r in output["subagent_tasks"].values()}
    assert sorted(by_call[call]["status"] for call, _, _ in handles) == ["completed", "error"]
    for call, status, error in handles:
        record = by_call[call]
        if record["status"] == "error":
            assert status == "failed"
            assert "child model exploded" in error
        else:
            assert (status, error) == ("completed", None)
    assert output["messages"][-1].text == "done"  # the parent went on


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_langgraph_lifecycle_and_subgraph_projections_say_failed_too():
    run = one_failing_child().stream_events(user("go"), version="v3")
    events = list(run.lifecycle)
    ended = {e["event"]: e for e in events if e["event"] != "started"}
    assert set(ended) == {"failed", "completed"}
    assert "child model exploded" in ended["failed"]["error"]
    run = one_failing_child().stream_events(user("go"), version="v3")
    subgraphs = list(run.subgraphs)
    run.output
    assert sorted(s.status for s in subgraphs) == ["completed", "failed"]
