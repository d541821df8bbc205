"""A background child keeps only the middleware of ours that has work: a bare one runs without any."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelFallbackMiddleware, ModelRetryMiddleware
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from subagents import SubagentSpec, TaskCall
from subagents.background._runtime import (
    FusedModelCalls,
    Inboxes,
    LoopModels,
    OwnLoopModels,
    SteeringInbox,
    background_child_middleware,
    may_swap_model,
)
from subagents._boundary import OneLevelGuard, OneLevelToolGuard
from subagents._builder import guard_for
from subagents._settings import DelegationSettings


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, counting what is handed to it (LangChain's traced wraps hop through it)."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _run_one_task(spec: SubagentSpec) -> tuple[str, int]:
    """Run one background task of ``spec`` to its end; its status and the loop's executor hand-offs."""
    middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False, notify=False,
    ))
    executor = CountingExecutor()
    try:
        async def go() -> str:
            asyncio.get_running_loop().set_default_executor(executor)
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}, "metadata": {}}
            call = TaskCall(subagent_type=spec.name, description="job", parent_state={}, tool_call_id="c1",
                            parent_config=config)
            record = await middleware.tasks.start(call, {})
            task = middleware.runtime.table.get(record["id"])
            await task.job
            return str(task.fields["status"])

        status = middleware.runtime.run(go(), timeout=30)
    finally:
        middleware.close()
        executor.shutdown(wait=False)
    return status, executor.submitted


def test_a_bare_background_child_makes_its_model_call_without_thread_hops() -> None:
    # Before: the loop's model wrap and the one-level guard ran as one traced wrap, two hand-offs a call.
    status, hops = _run_one_task(SubagentSpec(name="worker", description="w",
                                              model=ScriptedChatModel(responses=["done"])))
    assert status == "completed"
    assert hops == 0


def test_a_child_whose_middleware_can_swap_the_model_keeps_the_loops_model_wrap() -> None:
    fallback = ModelFallbackMiddleware(ScriptedChatModel(responses=["x"]))
    inbox, own, guard = SteeringInbox(Inboxes()), OwnLoopModels(LoopModels()), OneLevelGuard()
    out = background_child_middleware([fallback, inbox, own, guard])
    assert out[:2] == [fallback, inbox]
    assert isinstance(out[2], FusedModelCalls) and out[2].parts == (own, guard)
    assert len(out) == 3


def test_without_such_middleware_the_loops_model_wrap_goes() -> None:
    inbox, own = SteeringInbox(Inboxes()), OwnLoopModels(LoopModels())
    tool_guard = OneLevelToolGuard()
    assert background_child_middleware([inbox, own, tool_guard]) == [inbox, tool_guard]


def test_a_child_of_one_model_call_a_run_has_no_inbox_node() -> None:
    inbox, own = SteeringInbox(Inboxes()), OwnLoopModels(LoopModels())
    assert background_child_middleware([inbox, own]) == []
    middleware = BackgroundSubagentMiddleware(
        [SubagentSpec(name="bare", description="b", model=ScriptedChatModel(responses=["done"]))],
        settings=DelegationSettings.of(general_purpose=False, notify=False))
    try:
        graph = middleware.registry.graph("bare", parent_model=None, parent_tools=[])
        # Before: a SteeringInbox.before_model node, one more step on every run.
        assert set(graph.nodes) == {"__start__", "model"}
    finally:
        middleware.close()


def _steered_before_its_run(spec: SubagentSpec) -> tuple[str, dict[str, Any]]:
    """Start a task of ``spec`` with a steering message already waiting as its run starts."""
    middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False, notify=False,
    ))
    try:
        async def go() -> tuple[str, dict[str, Any]]:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}, "metadata": {}}
            call = TaskCall(subagent_type=spec.name, description="the job", parent_state={}, tool_call_id="c1",
                            parent_config=config)
            record = await middleware.tasks.start(call, {})
            middleware.runtime.inboxes.post(record["id"], "Only the summary.")  # its run has not begun
            task = middleware.runtime.table.get(record["id"])
            await task.job
            return record["id"], dict(task.fields)

        return middleware.runtime.run(go(), timeout=30)
    finally:
        middleware.close()


def test_steering_that_waits_as_a_bare_childs_run_starts_reaches_its_one_model_call() -> None:
    model = ScriptedChatModel(responses=["the summary"])
    _, fields = _steered_before_its_run(SubagentSpec(name="bare", description="b", model=model))
    assert fields["status"] == "completed" and fields["result"] == "the summary"
    assert fields["turns"] == 1 and len(model.calls) == 1  # in the same run, not as a follow-up
    texts = [m.text for m in model.calls[0]["messages"]]
    assert texts == ["the job", "[Update from your caller] Only the summary."]


def test_a_child_with_tools_gets_waiting_steering_once_before_its_first_model_call() -> None:
    @tool
    def look(x: str) -> str:
        """Look."""
        return "seen"

    model = ScriptedChatModel(responses=["done"])
    spec = SubagentSpec(name="tooled", description="t", model=model, tools=[look])
    middleware = BackgroundSubagentMiddleware([spec], tools=[look],
    settings=DelegationSettings.of(general_purpose=False, notify=False))
    try:
        graph = middleware.registry.graph("tooled", parent_model=None, parent_tools=[look])
        assert "SteeringInbox.before_model" in graph.nodes  # it may call its model again: the node stays
    finally:
        middleware.close()
    _, fields = _steered_before_its_run(spec)
    assert fields["status"] == "completed" and len(model.calls) == 1
    texts = [m.text for m in model.calls[0]["messages"]]
    assert texts.count("[Update from your caller] Only the summary.") == 1


def test_only_a_wrap_that_says_it_keeps_the_model_is_trusted() -> None:
    class Guard(OneLevelGuard):  # a subclass may do anything
        pass

    class Plain(AgentMiddleware):
        pass

    swapped = OneLevelGuard()
    swapped.awrap_model_call = lambda request, handler: handler(request)  # type: ignore[method-assign]
    assert not may_swap_model(OneLevelGuard()) and not may_swap_model(OneLevelToolGuard())
    assert not may_swap_model(SteeringInbox(Inboxes())) and not may_swap_model(Plain())
    assert may_swap_model(Guard()) and may_swap_model(swapped) and may_swap_model(ModelRetryMiddleware())


def test_the_steering_inbox_and_the_loops_model_wrap_need_no_guard() -> None:
    class Inbox(SteeringInbox):  # a subclass is not trusted
        pass

    ours = [SteeringInbox(Inboxes()), OwnLoopModels(LoopModels())]
    assert guard_for(ours, has_tools=False) is None
    assert type(guard_for([*ours, Inbox(Inboxes())], has_tools=False)) is OneLevelGuard
    assert type(guard_for(ours, has_tools=True)) is OneLevelToolGuard
