"""Background tasks in this process: parallel, capped, cancelled, steered, failing, followed up."""

from __future__ import annotations

import asyncio
import threading
import time

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import (  # noqa: F401 - background is a fixture
    background,
    NOTICE,
    as_json,
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
from subagents.background import AsyncTaskRecord, wait_for_background
from subagents._settings import DelegationSettings


def first_human(messages) -> str:
    return next(m.text for m in messages if m.type == "human")


def thread() -> dict:
    return {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}


class Gate:
    """A tool that holds each child until released, counting how many wait at once."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

        @tool
        def hold(x: str) -> str:
            """Hold until released."""
            with self._lock:
                self.active += 1
                self.peak = max(self.peak, self.active)
            self.open.wait(10)
            with self._lock:
                self.active -= 1
            return "held"

        self.tool = hold


@tool
async def spin() -> str:
    """One small step of long work."""
    await asyncio.sleep(0.02)
    return "spun"


SPINNER = {"name": "spinner", "description": "Works until told to stop.", "tools": ["spin"],
           "max_turns": 2000}
SPIN_FOREVER = ("spin job", [{"tool_calls": [tool_call("spin")]}] * 2000)


def test_parallel_tasks_outlive_the_turn_and_are_announced_once(run, background):
    gate = Gate()
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("job", [{"tool_calls": [tool_call("hold", x="1")]}, lambda m: f"result of {first_human(m)}"]),
            ("PARENT start", [start(("job 1", "general-purpose"), ("job 2", "general-purpose"),
                                    ("job 3", "general-purpose")), "started three"]),
        ],
        default="ok",
    )
    middleware = background()
    agent = create_agent(model, [gate.tool], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    # The turn ended while every child is still held inside its tool.
    assert out["messages"][-1].text == "started three"
    ids = started_ids(out["messages"])
    assert len(ids) == 3 and set(ledger(out)) == set(ids)
    assert {r["status"] for r in ledger(out).values()} <= {"pending", "running"}
    wait_for(lambda: gate.peak == 3)
    gate.open.set()
    wait_for(lambda: all(background.status(i) == "completed" for i in ids))

    out = run(agent, user("PARENT anything new?"), config)
    (notice,) = notices(out)
    assert all(i in notice for i in ids) and "result of job 2" in notice
    assert out["messages"][-1].text == "noted"
    for task_id, raw in ledger(out).items():
        record = AsyncTaskRecord.model_validate(raw)
        assert record.status == "completed" and record.announced and record.runner == "local"
        assert record.owner == middleware.runtime.owner.name and record.result == f"result of {record.description}"
        assert record.model_calls >= 2 and record.input_tokens > 0 and record.output_tokens > 0
        assert record.finished_at >= record.started_at >= record.created_at

    out = run(agent, user("PARENT and now?"), config)
    assert len(notices(out)) == 1  # announced once, never again


def test_concurrency_cap_keeps_extra_tasks_pending(run, background):
    gate = Gate()
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("job", [{"tool_calls": [tool_call("hold", x="1")]}, "done"]),
            ("PARENT start", [start(*[(f"job {i}", "general-purpose") for i in range(4)]), "started"]),
        ],
        default="ok",
    )
    middleware = background(settings=DelegationSettings.of(max_background_tasks=2))
    agent = create_agent(model, [gate.tool], middleware=[middleware], checkpointer=InMemorySaver())
    out = run(agent, user("PARENT start"), thread())
    ids = started_ids(out["messages"])
    wait_for(lambda: gate.active == 2)
    assert sorted(background.status(i) for i in ids) == ["pending", "pending", "running", "running"]
    gate.open.set()
    wait_for(lambda: all(background.status(i) == "completed" for i in ids))
    assert gate.peak == 2


def test_cancel_stops_a_running_task(run, background):
    model = ScriptedChatModel(
        rules=[
            SPIN_FOREVER,
            ("PARENT start", [start(("spin job", "spinner")), "started"]),
            ("PARENT cancel", [on_task("cancel_async_task"), "cancelled"]),
            ("PARENT check", [on_task("check_async_task"), "checked"]),
            ("PARENT steer", [on_task("update_async_task", message="more"), "tried"]),
        ],
        default="ok",
    )
    agent = create_agent(model, [spin], middleware=[background([SPINNER])],
                         checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.task(task_id).session.meter.model_calls >= 3)

    out = run(agent, user("PARENT cancel"), config)
    assert last_tool_result(out).content == f"Cancelled background task {task_id}."
    assert ledger(out)[task_id]["status"] == "cancelled"
    wait_for(lambda: background.task(task_id).job.done())
    calls = background.task(task_id).session.meter.model_calls

    out = run(agent, user("PARENT check"), config)
    checked = as_json(last_tool_result(out))
    assert checked["status"] == "cancelled" and checked["usage"]["model_calls"] == calls
    assert notices(out) == []  # the parent cancelled it: nothing to announce

    out = run(agent, user("PARENT cancel"), config)
    refused = last_tool_result(out)
    assert refused.status == "error" and "already cancelled" in refused.content
    out = run(agent, user("PARENT steer"), config)
    refused = last_tool_result(out)
    assert refused.status == "error" and "retry_async_task" in refused.content


def test_steering_reaches_a_running_task_before_its_next_model_call(run, background):
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("Wrap up", ["Wrapped up early, as the caller asked."]),
            SPIN_FOREVER,
            ("PARENT start", [start(("spin job", "spinner")), "started"]),
            ("PARENT steer", [on_task("update_async_task", message="Wrap up now"), "steered"]),
        ],
        default="ok",
    )
    agent = create_agent(model, [spin], middleware=[background([SPINNER])],
                         checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.task(task_id).session.meter.model_calls >= 2)

    out = run(agent, user("PARENT steer"), config)
    assert "queued" in last_tool_result(out).content
    wait_for(lambda: background.status(task_id) == "completed")
    assert background.task(task_id).fields["result"] == "Wrapped up early, as the caller asked."
    steered = [c for c in model.calls if any("[Update from your caller] Wrap up now" in m.text
                                             for m in c["messages"])]
    # Same conversation: the steered call still holds the original task and its tool work.
    assert steered and "spin job" in [m.text for m in steered[0]["messages"]]
    out = run(agent, user("PARENT news"), config)
    assert "Wrapped up early" in notices(out)[0]


def test_a_failing_task_fails_alone_and_retry_runs_it_again(run, background):
    gate, failed = Gate(), []

    def flaky(messages):
        # First attempt: hold at the gate, then fail; the retry succeeds.
        if failed:
            return "recovered answer"
        if not any(m.type == "tool" for m in messages):
            return {"tool_calls": [tool_call("hold", x="1")]}
        failed.append(True)
        return RuntimeError("upstream 503")

    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("PARENT start", [start(("fetch the data", "flaky")), "started"]),
            ("PARENT retry", [on_task("retry_async_task"), "retrying"]),
        ],
        default="ok",
    )
    middleware = background(
        [{"name": "flaky", "description": "Sometimes fails.", "model": ScriptedChatModel(default=flaky)}]
    )
    agent = create_agent(model, [gate.tool], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    gate.open.set()
    wait_for(lambda: background.status(task_id) == "error")

    out = run(agent, user("PARENT news"), config)
    assert out["messages"][-1].text == "noted"  # told of the failure, the parent carries on
    record = ledger(out)[task_id]
    assert record["status"] == "error" and record["error"] == "RuntimeError: upstream 503"
    assert "upstream 503" in notices(out)[0]

    out = run(agent, user("PARENT retry"), config)
    assert f"Retrying background task {task_id} (attempt 2)" in last_tool_result(out).content
    wait_for(lambda: background.status(task_id) == "completed")
    out = run(agent, user("PARENT news"), config)
    record = ledger(out)[task_id]
    assert record["status"] == "completed" and record["attempt"] == 2 and record["error"] is None
    assert record["result"] == "recovered answer" and "recovered answer" in notices(out)[-1]


def test_follow_up_continues_the_same_child_conversation(run, background):
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("first question", ["first answer"]),
            ("second question", [lambda m: f"second answer, after {m[2].text!r}"]),
            ("PARENT start", [start(("first question", "general-purpose")), "started"]),
            ("PARENT follow", [on_task("update_async_task", message="second question"), "sent"]),
        ],
        default="ok",
    )
    agent = create_agent(model, middleware=[background()], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    out = run(agent, user("PARENT news"), config)
    assert "first answer" in notices(out)[0]

    out = run(agent, user("PARENT follow"), config)
    assert "follow-up in the same conversation" in last_tool_result(out).content
    wait_for(lambda: background.status(task_id) == "completed" and background.task(task_id).fields["turns"] == 2)
    out = run(agent, user("PARENT news"), config)
    record = ledger(out)[task_id]
    assert record["result"] == "second answer, after 'first answer'" and record["turns"] == 2
    follow_up = next(c for c in model.calls if c["messages"][-1].text == "second question")
    assert [m.text for m in follow_up["messages"][1:3]] == ["first question", "first answer"]


def test_a_task_waiting_for_approval_is_announced_and_only_a_person_approves_it(run, background):
    """Before: the parent's model approved its own child's gated call with update_async_task."""
    gate = Gate()

    @tool
    def publish(target: str) -> str:
        """Publish."""
        return f"published to {target}"

    def on_notice(messages):
        if "asks for approval" in messages[-1].text:
            return on_task("update_async_task", message="approve")(messages)
        return "noted"

    model = ScriptedChatModel(
        rules=[
            (NOTICE, [on_notice, "answered"]),
            ("publish the report", [{"tool_calls": [tool_call("hold", x="1")]},
                                    {"tool_calls": [tool_call("publish", target="prod")]},
                                    lambda m: f"Outcome: {m[-1].text}"]),
            ("PARENT start", [start(("publish the report", "publisher")), "started"]),
        ],
        default="ok",
    )
    middleware = background(
        [{"name": "publisher", "description": "Publishes.", "tools": ["hold", "publish"],
          "interrupt_on": {"publish": True}}]
    )
    agent = create_agent(model, [gate.tool, publish], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    gate.open.set()  # only now may the child ask for approval: the parent's turn is over
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    # Nothing more happens to it without the parent: a wait returns (it used to run to its timeout, False).
    assert wait_for_background(out["async_tasks"], timeout_s=10)

    out = run(agent, user("PARENT news"), config)
    assert "asks for approval" in notices(out)[0] and "publish" in notices(out)[0]
    refused = last_tool_result(out)
    assert refused.status == "error" and "a model cannot give it" in refused.content
    assert background.status(task_id) == "waiting_for_approval"  # the model's "approve" ran nothing
    middleware.answer_approval(out, task_id, "approve")  # the person answers, through the application
    wait_for(lambda: background.status(task_id) == "completed")
    out = run(agent, user("PARENT news"), config)
    assert ledger(out)[task_id]["result"] == "Outcome: published to prod"


def test_a_new_graph_object_in_the_same_process_finds_running_tasks(run, background):
    gate = Gate()
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("job", [{"tool_calls": [tool_call("hold", x="1")]}, "held result"]),
            ("PARENT start", [start(("job", "general-purpose")), "started"]),
        ],
        default="ok",
    )
    saver, config = InMemorySaver(), thread()
    first = create_agent(model, [gate.tool], middleware=[background()], checkpointer=saver)
    out = run(first, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    gate.open.set()
    wait_for(lambda: background.status(task_id) == "completed")
    second = create_agent(model, [gate.tool], middleware=[background()], checkpointer=saver)
    out = run(second, user("PARENT news"), config)
    assert ledger(out)[task_id]["status"] == "completed" and "held result" in notices(out)[0]


def test_a_child_middlewares_generator_exit_settles_the_background_task_as_an_error(background):
    """It used to end the task's driver with the GeneratorExit, leaving the task running forever."""
    from langchain.agents.middleware import AgentMiddleware

    class Quits(AgentMiddleware):
        def after_model(self, state, runtime):
            raise GeneratorExit()

        async def aafter_model(self, state, runtime):
            raise GeneratorExit()

    spec = {"name": "quitter", "description": "q", "model": ScriptedChatModel(default="answer"), "tools": [],
            "middleware": [Quits()]}
    middleware = background(subagents=[spec], settings=DelegationSettings.of(general_purpose=False, notify=False))
    parent = ScriptedChatModel(responses=[start(("work", "quitter")), "started"], default="ok")
    agent = create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("go"), {"configurable": {"thread_id": "quits"}})
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "error")
    assert background.task(task_id).fields["error"].startswith("GeneratorExit")
