"""A background task waiting for approval: shown safely whatever it asks, announced once, settled by what follows."""

from __future__ import annotations

import json
import threading
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import interrupt

from helpers.background import (  # noqa: F401 - background is a fixture
    NOTICE,
    background,
    last_tool_result,
    ledger,
    notices,
    on_task,
    start,
    started_ids,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call

PUBLISHER = {"name": "publisher", "description": "Publishes.", "tools": ["publish"],
             "interrupt_on": {"publish": True}}


@tool
def publish(target: str) -> str:
    """Publish."""
    return f"published to {target}"


def thread() -> dict[str, Any]:
    import time

    return {"configurable": {"thread_id": f"approval-{time.monotonic_ns()}"}}


def test_an_interrupt_value_json_cannot_hold_is_recorded_as_json_and_announced(run, background):
    # The child asks only once the first turn is over, so its notice comes in the second turn,
    # the one this test reads; a fast child (or a slow parent) otherwise had it in the first.
    first_turn_over = threading.Event()

    @tool
    def ask(x: str) -> str:
        """Ask a human."""
        assert first_turn_over.wait(30), "the first turn never ended"
        return f"answer: {interrupt({(1, 2): 'which of these?', b'raw': 1})!r}"

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("job", [{"tool_calls": [tool_call("ask", x="1")]}, "child finished"]),
        ("PARENT start", [start(("job", "general-purpose")), "started"]),
    ], default="ok")
    agent = create_agent(model, [ask], middleware=[background()], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    first_turn_over.set()
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    out = run(agent, user("PARENT news?"), config)  # the turn goes on
    (notice,) = notices(out)
    assert "which of these?" in notice and out["messages"][-1].text == "noted"
    (request,) = ledger(out)[task_id]["approval_request"]
    assert json.loads(json.dumps(request))["value"] == {"(1, 2)": "which of these?", "raw": 1}


def test_a_task_waiting_for_approval_is_announced_once_across_model_calls_and_turns(run, background):
    @tool
    def note(text: str) -> str:
        """Take a note (the parent's own tool)."""
        return "noted"

    def parent_on_notice(messages: list[Any]) -> Any:  # three steps of its own work, then an answer
        notes = sum(m.type == "tool" and m.name == "note" for m in messages)
        return {"tool_calls": [tool_call("note", text=str(notes))]} if notes < 3 else "ok"

    model = ScriptedChatModel(rules=[
        (NOTICE, [parent_on_notice] * 10),
        ("publish the report", [{"tool_calls": [tool_call("publish", target="prod")]}, "done"]),
        ("PARENT start", [start(("publish the report", "publisher")), "started"]),
    ], default="ok")
    agent = create_agent(model, [publish, note], middleware=[background([PUBLISHER])], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    out = run(agent, user("PARENT carry on"), config)
    assert len(notices(out)) == 1 and ledger(out)[task_id]["announced"] is True
    out = run(agent, user("PARENT and now"), config)
    assert len(notices(out)) == 1  # the same one: nothing new was announced
    assert ledger(out)[task_id]["status"] == "waiting_for_approval"


def test_a_child_that_fails_after_its_answer_is_an_error_with_its_error(run, background):
    published: list[str] = []
    first_turn_over = threading.Event()

    @tool
    def hold() -> str:
        """Hold until the parent's first turn is over."""
        # A child asking before that turn ended was announced, and approved, in that same turn.
        first_turn_over.wait(10)
        return "held"

    @tool
    def publish_once(target: str) -> str:
        """Publish."""
        published.append(target)
        return f"published to {target}"

    def fails(messages: list[Any]) -> Any:
        raise RuntimeError("provider said 429: rate limited")

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("publish the report", [{"tool_calls": [tool_call("hold")]},
                                {"tool_calls": [tool_call("publish_once", target="prod")]}, fails]),
        ("PARENT start", [start(("publish the report", "publisher")), "started"]),
    ], default="ok")
    spec = {**PUBLISHER, "tools": ["hold", "publish_once"], "interrupt_on": {"publish_once": True}}
    middleware = background([spec])
    agent = create_agent(model, [hold, publish_once], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    first_turn_over.set()
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    out = run(agent, user("PARENT news"), config)  # told
    assert "asks for approval" in notices(out)[-1]
    middleware.answer_approval(out, task_id, "approve")  # the person answers, through the application
    wait_for(lambda: background.status(task_id) == "error")
    assert published == ["prod"]
    out = run(agent, user("PARENT what now?"), config)
    record = ledger(out)[task_id]
    assert record["status"] == "error" and "429: rate limited" in record["error"]
    assert record["approval_request"] is None and "429: rate limited" in notices(out)[-1]


def test_an_approval_request_holding_an_integer_beyond_64_bits_is_kept_as_text(run, background):
    """A runnable child (a RemoteGraph, any Runnable) may pause with any value: msgpack holds 64-bit integers."""
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda
    from langgraph.types import Interrupt

    from subagents import CompiledSubagent

    async def child(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [*inputs["messages"], AIMessage(content="need approval")],
                "__interrupt__": [Interrupt(value={"pay": {"amount": 2**64, 2**70: "key"}}, id="i1")]}

    model = ScriptedChatModel(rules=[(NOTICE, ["noted"]), ("PARENT start", [start(("pay job", "payer")), "started"])],
                              default="ok")
    middleware = background([CompiledSubagent(name="payer", description="pays", runnable=RunnableLambda(child))])
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "bigint"}}
    (task_id,) = started_ids(run(agent, user("PARENT start"), config)["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    out = run(agent, user("PARENT news"), config)
    (request,) = ledger(out)[task_id]["approval_request"]
    assert request["value"]["pay"] == {"amount": str(2**64), str(2**70): "key"}
    assert "asks for approval" in notices(out)[-1]


def test_a_new_request_under_the_same_waiting_status_is_announced(run, background):
    """The child asks twice; the ledger missed the answer between (the parent's step failed): it must hear again."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from subagents import CompiledSubagent

    def node(state: MessagesState) -> dict[str, Any]:
        first = interrupt({"action": "send $1 to alice"})
        second = interrupt({"action": "send $1,000,000 to mallory"})
        return {"messages": [AIMessage(content=f"done: {first} / {second}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    model = ScriptedChatModel(rules=[(NOTICE, ["noted"]), ("PARENT start", [start(("pay job", "payer")), "started"])],
                              default="ok")
    middleware = background([CompiledSubagent(name="payer", description="pays", runnable=graph.compile())])
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "again"}}
    (task_id,) = started_ids(run(agent, user("PARENT start"), config)["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    first = run(agent, user("PARENT news"), config)
    assert "alice" in notices(first)[-1]
    # The answer reaches the child, but not the ledger (as when the step that sent it failed).
    middleware.runtime.run(middleware.tasks.local.steer(ledger(first)[task_id], "approve", None))
    wait_for(lambda: "mallory" in json.dumps(background.task(task_id).fields.get("approval_request")))
    later = run(agent, user("PARENT news again"), config)
    fresh = [n for n in notices(later) if n not in notices(first)]
    assert len(fresh) == 1 and "mallory" in fresh[0]
    assert [n for n in notices(run(agent, user("PARENT and now"), config)) if n not in notices(later)] == []
