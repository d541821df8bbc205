"""Only an unambiguous approval approves a background child's action; anything else rejects it."""

from __future__ import annotations

import threading

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import NOTICE, background, ledger, on_task, start, started_ids, wait_for  # noqa: F401
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.definitions._permissions import is_approval, pending_interrupts, resume_for

BATCH = pending_interrupts([{"id": "i1", "value": {"action_requests": [{"name": "publish"}]}}])
REFUSALS = [
    "OK, but do NOT publish - reject this",
    "yes... actually no",
    "Go ahead and reject it",
    "Approved, go ahead",
    "approve?",
    "approve the staging one only",
    "no",
    "not ok",
    "okay. Wait, no.",
    "",
]


@pytest.mark.parametrize("message", ["approve", " Approved. ", "YES", "ok!", "okay", "go  ahead", "LGTM", "y"])
def test_an_exact_approval_word_approves(message):
    assert is_approval(message)
    assert resume_for(message, BATCH) == {"decisions": [{"type": "approve"}]}


@pytest.mark.parametrize("message", REFUSALS)
def test_anything_else_rejects_with_the_message_as_the_reason(message):
    assert not is_approval(message)
    assert resume_for(message, BATCH) == {"decisions": [{"type": "reject", "message": message}]}


def test_a_refusal_that_starts_with_ok_does_not_run_the_tool(run, background):
    published: list[str] = []
    gate = threading.Event()

    @tool
    def hold() -> str:
        """Hold until released."""
        gate.wait(10)
        return "held"

    @tool
    def publish(target: str) -> str:
        """Publish."""
        published.append(target)
        return f"published to {target}"

    model = ScriptedChatModel(
        rules=[
            (NOTICE, [lambda m: on_task("update_async_task", message=REFUSALS[0])(m)
                      if "asks for approval" in m[-1].text else "noted", "answered"]),
            ("publish the report", [{"tool_calls": [tool_call("hold")]},
                                    {"tool_calls": [tool_call("publish", target="prod")]},
                                    lambda m: f"Outcome: {m[-1].text}"]),
            ("PARENT start", [start(("publish the report", "publisher")), "started"]),
        ],
        default="ok",
    )
    middleware = background([{"name": "publisher", "description": "Publishes.", "tools": ["hold", "publish"],
                              "interrupt_on": {"publish": True}}])
    agent = create_agent(model, [hold, publish], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"refuse-{run.mode}"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    gate.set()  # the child asks only after the parent's turn, so the notice reaches the next one
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    run(agent, user("PARENT news"), config)
    wait_for(lambda: background.status(task_id) == "completed")
    assert published == []
    result = background.task(task_id).fields["result"]
    assert result.startswith("Outcome: ") and REFUSALS[0] in result


@pytest.mark.parametrize(("message", "decision", "sent"), [
    ("", "approve", "approve"),
    ("do NOT publish", "approve", "approve"),  # the structured decision wins over the words
    ("use staging instead", "reject", "use staging instead"),
    ("yes", "reject", "rejected: yes"),       # a reason that reads like approval still rejects
    ("", "reject", "rejected"),
    ("OK, go", None, "OK, go"),
])
def test_a_structured_decision_is_unambiguous(message, decision, sent):
    from subagents.definitions._permissions import decided_message

    assert decided_message(message, decision) == sent
    expected = {"type": "approve"} if decision == "approve" else {"type": "reject", "message": sent}
    assert resume_for(sent, BATCH) == {"decisions": [expected]}


def test_a_decision_answers_a_waiting_task_and_is_refused_for_a_running_one(run, background):

    published: list[str] = []
    gate = threading.Event()

    @tool
    def hold() -> str:
        """Hold until released."""
        gate.wait(10)
        return "held"

    @tool
    def publish(target: str) -> str:
        """Publish."""
        published.append(target)
        return f"published to {target}"

    def answer(messages):
        if "asks for approval" in messages[-1].text:
            return {"tool_calls": [tool_call("update_async_task", task_id=started_ids(messages)[0],
                                             message="yes", decision="reject")]}
        return "noted"

    model = ScriptedChatModel(
        rules=[
            (NOTICE, [answer, "answered"]),
            ("publish the report", [{"tool_calls": [tool_call("hold")]},
                                    {"tool_calls": [tool_call("publish", target="prod")]},
                                    lambda m: f"Outcome: {m[-1].text}"]),
            ("PARENT start", [start(("publish the report", "publisher")),
                              lambda m: {"tool_calls": [tool_call("update_async_task", task_id=started_ids(m)[0],
                                                                  decision="approve")]},
                              "started"]),
        ],
        default="ok",
    )
    middleware = background([{"name": "publisher", "description": "Publishes.", "tools": ["hold", "publish"],
                              "interrupt_on": {"publish": True}}])
    agent = create_agent(model, [hold, publish], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"decision-{run.mode}"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    early = next(m for m in reversed(out["messages"]) if m.type == "tool" and m.name == "update_async_task")
    assert early.status == "error" and "not waiting_for_approval" in early.content, early.content
    gate.set()  # only now may the child ask for approval
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    run(agent, user("PARENT news"), config)
    wait_for(lambda: background.status(task_id) == "completed")
    assert published == [] and "rejected: yes" in background.task(task_id).fields["result"]
