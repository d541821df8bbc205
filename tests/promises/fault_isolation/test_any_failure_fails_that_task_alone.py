"""Any failure in a child, from anywhere, fails that task alone.

Whatever a child raises (an ordinary exception, a stray ``GeneratorExit``, a
``BaseException`` that is not cancellation, LangGraph's own signals, the
library's own errors, an error whose attributes raise), from its model, its
tools, its middleware or the machinery around it, becomes that task's error
result with a typed ``stop_reason``; the parent run goes on and parallel
siblings keep their results. Run on invoke and ainvoke.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp, GraphInterrupt, GraphRecursionError
from langgraph.store.memory import InMemoryStore

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import (
    MODES,
    _assert_one_message_and_record_per_call,
    _compiled,
    _invoke,
    _parallel,
    _records,
    _user,
    echo,
)
from helpers.graphs import records, tool_messages, user
from helpers.odd_children import Boom, _delegating
from subagents import (
    SubagentError,
    SubagentSpec,
)
from subagents._settings import DelegationSettings


def _raising_middleware(hook: str, exc: BaseException) -> AgentMiddleware:
    """A child middleware whose ``hook`` (and its async twin) raises ``exc``."""

    def state_hook(self: Any, state: Any, runtime: Any) -> Any:
        raise exc

    async def astate_hook(self: Any, state: Any, runtime: Any) -> Any:
        raise exc

    def wrap_hook(self: Any, request: Any, handler: Any) -> Any:
        raise exc

    async def awrap_hook(self: Any, request: Any, handler: Any) -> Any:
        raise exc

    sync_fn, async_fn = (wrap_hook, awrap_hook) if hook.startswith("wrap_") else (state_hook, astate_hook)
    cls = type(f"Raises_{hook}", (AgentMiddleware,), {hook: sync_fn, f"a{hook}": async_fn})
    return cls()


def _child_raising_at(place: str, exc: BaseException, mode: str) -> Any:
    """A parent with one failing child ("do it") and one healthy sibling ("fine"), run once."""

    @tool
    def bad(x: str) -> str:
        """Fails."""
        raise exc

    child_script: list[Any] = [{"tool_calls": [tool_call("bad" if place == "tool" else "echo", x="1")]}, "done"]
    if place == "model":
        child_script = [exc]
    spec: dict[str, Any] = {"name": "w", "description": "works", "tools": ["bad", "echo"]}
    if place not in ("tool", "model"):
        spec["middleware"] = [_raising_middleware(place, exc)]
    model = ScriptedChatModel(
        rules=[("do it", child_script), ("fine", ["ok fine"])],
        responses=_parallel(("do it", "w"), ("fine", "general-purpose")),
    )
    agent = create_deep_agent(model, [bad, echo], subagents=[spec])
    return _invoke(mode, agent, _user())


_PLACES = ["tool", "model", "before_agent", "after_agent", "wrap_model_call", "wrap_tool_call"]


@pytest.mark.parametrize(("place", "mode"), [(p, m) for p in _PLACES for m in ("sync", "async")])
def test_a_non_cancellation_base_exception_in_a_child_fails_that_task_alone(mode, place):
    """Fault isolation: only real cancellation propagates; a BaseException that is not one
    (pytest.fail's Failed, gevent.Timeout, a library's own) must become an error result."""
    out = _child_raising_at(place, Boom("not a cancellation"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    failed = [r for r in _records(out) if r["status"] == "error"]
    assert len(failed) == 1 and "Boom" in failed[0]["error"]


def test_generator_exit_raised_by_a_child_tool_fails_that_task_alone_on_invoke():
    """A tool raising GeneratorExit is not a cancellation of the parent (ainvoke already copes)."""
    out = _child_raising_at("tool", GeneratorExit(), "sync")
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("exc", [GraphBubbleUp(), GraphInterrupt()], ids=["GraphBubbleUp", "empty-GraphInterrupt"])
def test_a_bubble_up_that_carries_no_interrupt_fails_the_task_instead_of_vanishing(mode, exc):
    """A child's GraphBubbleUp with no Interrupt in it is not an approval pause: today it either crashes
    the parent (GraphBubbleUp) or silently drops the task's ToolMessage and record (empty GraphInterrupt)."""
    out = _child_raising_at("tool", exc, mode)
    _assert_one_message_and_record_per_call(out, 2)


class _HostileKey:
    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return self is other

    def __str__(self) -> str:
        raise RuntimeError("this key cannot be printed")

    __repr__ = __str__


@MODES
def test_an_unprintable_state_key_from_a_compiled_child_does_not_break_the_failure_path(mode):
    """write_back names each skipped key with str(key): a key whose __str__ raises escapes the task tool."""
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    child = _compiled("c", lambda inp: {**inp, _HostileKey(): 1, "messages": [AIMessage("done")]})
    out = _invoke(mode, create_deep_agent(model, [], subagents=[child]), _user())
    _assert_one_message_and_record_per_call(out, 1)


@MODES
def test_a_tool_raising_graph_recursion_error_is_a_tool_error_not_the_childs_recursion_limit(mode):
    """stop_reason comes from type *and origin*: a tool that runs its own graph and hits that graph's
    limit is a tool_error; today the record says the child hit its own recursion limit."""
    out = _child_raising_at("tool", GraphRecursionError("inner graph hit 5 steps"), mode)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error"


@MODES
@pytest.mark.parametrize("place", ["tool", "model", "before_agent", "after_agent", "wrap_model_call",
                                   "wrap_tool_call"])
def test_an_ordinary_exception_anywhere_in_a_child_fails_that_task_alone(mode, place):
    out = _child_raising_at(place, ValueError("disk on fire"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["error"].startswith("ValueError: disk on fire")


@MODES
@pytest.mark.parametrize("exc", [asyncio.CancelledError(), StopIteration(), StopAsyncIteration()],
                         ids=["CancelledError", "StopIteration", "StopAsyncIteration"])
def test_control_flow_exceptions_raised_by_a_child_tool_fail_that_task_alone(mode, exc):
    out = _child_raising_at("tool", exc, mode)
    _assert_one_message_and_record_per_call(out, 2)


def test_generator_exit_from_a_child_tool_fails_that_task_alone_on_ainvoke():
    out = _child_raising_at("tool", GeneratorExit(), "async")
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("func", ["sync", "async"])
def test_a_child_tools_generator_exit_is_recorded_as_the_tools_error_with_its_text_on_both_paths(mode, func):
    """On ainvoke it failed the task LangChain runs the tool in; asyncio threw it into the coroutine awaiting
    that task, which closed every coroutine between (``GeneratorExit()``, with no text): "(no message)"."""
    exc = GeneratorExit("disk quota exceeded")
    out = _child_raising_at("tool", exc, mode) if func == "sync" else _child_with_async_tool_raising(exc, mode)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error"
    assert failed["error"].startswith("GeneratorExit: disk quota exceeded")


@MODES
@pytest.mark.parametrize("exc", [StopIteration(), TimeoutError("t"), KeyError("k"), RecursionError("r"),
                                 MemoryError("m"), Boom("b")], ids=lambda e: type(e).__name__)
def test_any_error_a_child_tool_raises_is_recorded_as_the_tools(mode, exc):
    """Python turns a StopIteration leaving a generator into a RuntimeError raised from it: still the tool's."""
    out = _child_raising_at("tool", exc, mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error"


@pytest.mark.parametrize(("place", "mode"), [(p, m) for p in [*_PLACES, "before_model", "after_model"]
                                             for m in ("sync", "async")])
def test_a_generator_exit_from_anywhere_in_a_child_fails_that_task_alone(mode, place):
    """On ainvoke, asyncio resumes a coroutine awaiting a task that failed with GeneratorExit by throwing it
    in, which closes every coroutine above: the parent's run too, unless the child is never awaited."""
    out = _child_raising_at(place, GeneratorExit(), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert "GeneratorExit" in failed["error"]


@MODES
@pytest.mark.parametrize("exc", [Boom("not a cancellation"), GeneratorExit("closed"), StopIteration("model stop"),
                                 StopAsyncIteration("model stop")], ids=lambda e: type(e).__name__)
def test_a_base_exception_from_a_child_model_is_a_model_error_with_its_text_on_both_paths(mode, exc):
    """On ainvoke LangChain's model call treats such an error as a result and reads `.generations` off it:
    the task was recorded as `AttributeError: 'Boom' object has no attribute 'generations'`. A StopIteration
    was recorded as the RuntimeError Python raises from it (`coroutine raised StopIteration`)."""
    out = _child_raising_at("model", exc, mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "model_error"
    assert failed["error"] == f"{type(exc).__name__}: {exc}"


@MODES
def test_a_cancelled_error_a_child_model_raises_itself_fails_that_task_alone_as_a_model_error(mode):
    """Not the parent's cancellation: the model's own code raised it (LangGraph names the node on invoke)."""
    out = _child_raising_at("model", asyncio.CancelledError("inner"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "model_error" and "CancelledError" in failed["error"]


# On ainvoke a model's is made anew, without its text, by asyncio's gather inside LangChain's model call: not here.
@pytest.mark.parametrize(("place", "mode"), [(p, m) for p in [*_PLACES, "before_model"] for m in ("sync", "async")
                                             if (p, m) != ("model", "async")])
def test_a_cancelled_error_a_child_raises_itself_keeps_its_text_in_the_record_and_the_answer(mode, place):
    """LangGraph reports a node's own CancelledError as its NodeCancelledError, without the text: the record and
    the parent's ToolMessage said "Node 'tools' raised asyncio.CancelledError", and nothing of what happened."""
    out = _child_raising_at(place, asyncio.CancelledError("the disk went away"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["error"] == "CancelledError: the disk went away"
    assert any("CancelledError: the disk went away" in m.text for m in tool_messages(out))


@pytest.mark.parametrize("place", ["tool", "model"])
def test_a_keyboard_interrupt_a_child_raises_on_a_worker_thread_fails_that_task_alone(place):
    """It ended the parent's whole run, as the user's Ctrl-C: on invoke a child's tools and model run on worker
    threads, where no signal lands (docs/index.md)."""
    out = _child_raising_at(place, KeyboardInterrupt("stop"), "sync")
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert (failed["stop_reason"], failed["error"]) == (f"{place}_error", "KeyboardInterrupt: stop")


@MODES
def test_a_keyboard_interrupt_a_child_raises_under_the_ctrl_c_handler_fails_that_task_alone(mode):
    """With the library's Ctrl-C handler in place (the command line's), a Ctrl-C is noted before it raises:
    one the child raises without one is its own, on the main thread's event loop too."""
    from subagents._runner import stop_on_ctrl_c

    with stop_on_ctrl_c():
        out = _child_with_async_tool_raising(KeyboardInterrupt("stop"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert (failed["stop_reason"], failed["error"]) == ("tool_error", "KeyboardInterrupt: stop")


def test_a_keyboard_interrupt_from_a_child_model_on_the_main_threads_loop_propagates():
    """There, under Python's own handler, it cannot be told from the user's Ctrl-C (docs/index.md)."""
    with pytest.raises(KeyboardInterrupt):
        _child_raising_at("model", KeyboardInterrupt("stop"), "async")


@MODES
def test_a_sys_exit_from_a_child_model_fails_that_task_alone_as_a_model_error(mode):
    """It ended the parent's whole run, where a tool's sys.exit fails its task alone. On ainvoke LangChain
    runs the model in a task of BaseChatModel.agenerate's gather, and asyncio raises a SystemExit out of a task
    through the loop before any callback sees it."""
    out = _child_raising_at("model", SystemExit("model exits"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "model_error" and "SystemExit: model exits" in failed["error"]


@pytest.mark.parametrize(("place", "mode"), [(p, m) for p in _PLACES for m in ("sync", "async")])
def test_a_sys_exit_from_anywhere_in_a_child_fails_that_task_alone_as_on_invoke(mode, place):
    """On ainvoke one a middleware raised ended the parent's whole run: LangGraph runs each node as an asyncio
    task, and asyncio raises a SystemExit out of a task through the loop. The record reads as on invoke."""
    out = _child_raising_at(place, SystemExit("exits"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == {"tool": "tool_error", "model": "model_error"}.get(place, "error")
    assert failed["error"] == "SystemExit: exits"


def _child_with_async_tool_raising(exc: BaseException, mode: str) -> Any:
    def fails(x: str) -> str:
        raise exc

    async def afails(x: str) -> str:
        raise exc

    bad = StructuredTool.from_function(fails, coroutine=afails, name="bad", description="Fails.")
    spec = {"name": "w", "description": "works", "tools": ["bad"]}
    model = ScriptedChatModel(rules=[("do it", [{"tool_calls": [tool_call("bad", x="1")]}, "done"]),
                                     ("fine", ["ok fine"])],
                              responses=_parallel(("do it", "w"), ("fine", "general-purpose")))
    return _invoke(mode, create_deep_agent(model, [bad, echo], subagents=[spec]), _user())


@MODES
def test_a_sys_exit_from_a_child_tools_coroutine_fails_that_task_alone(mode):
    """On ainvoke it ended the parent's whole run: LangChain runs a tool's coroutine as an asyncio task of its
    own, and asyncio re-raises a SystemExit out of a task through the loop before any callback sees it."""
    out = _child_with_async_tool_raising(SystemExit("tool exits"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error" and "SystemExit: tool exits" in failed["error"]


class _ExitingTool(BaseTool):
    """A tool class of its own (no ``func`` or ``coroutine`` to wrap) whose code calls ``sys.exit``."""

    name: str = "bad"
    description: str = "Fails."
    spawns: bool = False

    def _run(self, x: str) -> str:
        raise SystemExit("tool class exits")

    async def _arun(self, x: str) -> str:
        async def exits() -> str:
            raise SystemExit("tool class exits")

        # Or in a task of its own, as a client library the tool calls may make.
        return await (asyncio.create_task(exits()) if self.spawns else exits())


@MODES
@pytest.mark.parametrize("spawns", [False, True], ids=["raises", "spawns-a-task-that-raises"])
def test_a_sys_exit_from_a_child_tool_of_its_own_class_fails_that_task_alone(mode, spawns):
    """On ainvoke it ended the parent's whole run: only a StructuredTool's or Tool's coroutine was kept, and
    LangChain runs any tool's ``_arun`` as an asyncio task of its own."""
    spec = {"name": "w", "description": "works", "tools": ["bad"]}
    model = ScriptedChatModel(rules=[("do it", [{"tool_calls": [tool_call("bad", x="1")]}, "done"]),
                                     ("fine", ["ok fine"])],
                              responses=_parallel(("do it", "w"), ("fine", "general-purpose")))
    out = _invoke(mode, create_deep_agent(model, [_ExitingTool(spawns=spawns), echo], subagents=[spec]), _user())
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error" and "SystemExit: tool class exits" in failed["error"]


def test_a_keyboard_interrupt_from_a_child_tools_coroutine_on_the_main_threads_loop_propagates():
    with pytest.raises(KeyboardInterrupt):
        _child_with_async_tool_raising(KeyboardInterrupt("stop"), "async")


@MODES
def test_a_sys_exit_from_a_signal_handler_during_a_child_model_call_still_ends_the_run(mode):
    """The user's exit (a SIGTERM handler calling sys.exit) is not the model's."""

    def terminated(signum: int, frame: Any) -> None:
        sys.exit("terminated")

    def model_call(messages: Any) -> str:
        signal.raise_signal(signal.SIGTERM)
        return "not reached"

    spec = {"name": "w", "description": "works"}
    model = ScriptedChatModel(rules=[("do it", [model_call])], responses=_parallel(("do it", "w")))
    before = signal.signal(signal.SIGTERM, terminated)
    try:
        with pytest.raises(SystemExit, match="terminated"):
            _invoke(mode, create_deep_agent(model, [], subagents=[spec]), _user())
    finally:
        signal.signal(signal.SIGTERM, before)


class _Swallow(AgentMiddleware):
    """Answers a tool call whose tool raised anything, so the child goes on."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except BaseException:  # noqa: BLE001
            return ToolMessage(content="swallowed", tool_call_id=request.tool_call["id"])

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except BaseException:  # noqa: BLE001
            return ToolMessage(content="swallowed", tool_call_id=request.tool_call["id"])


@MODES
def test_a_generator_exit_the_child_survived_does_not_claim_a_later_unrelated_error(mode):
    @tool
    def quits(x: str) -> str:
        """Raises GeneratorExit."""
        raise GeneratorExit()

    calls = {"count": 0}

    def after_second_model_call(self: Any, state: Any, runtime: Any) -> Any:
        calls["count"] += 1
        if calls["count"] > 1:
            raise RuntimeError("the middleware's own")

    async def aafter_second_model_call(self: Any, state: Any, runtime: Any) -> Any:
        return after_second_model_call(self, state, runtime)

    later = type("Later", (AgentMiddleware,), {"after_model": after_second_model_call,
                                               "aafter_model": aafter_second_model_call})()
    spec = {"name": "w", "description": "works", "tools": ["quits"], "middleware": [_Swallow(), later]}
    model = ScriptedChatModel(rules=[("do it", [{"tool_calls": [tool_call("quits", x="1")]}, "done"])],
                              responses=_parallel(("do it", "w")))
    out = _invoke(mode, create_deep_agent(model, [quits], subagents=[spec]), _user())
    (record,) = _records(out)
    assert record["stop_reason"] == "error" and record["error"] == "RuntimeError: the middleware's own"


@MODES
def test_the_tool_error_that_ended_a_child_is_found_when_a_sibling_tool_failed_too(mode):
    @tool
    def quits(x: str) -> str:
        """Raises GeneratorExit."""
        raise GeneratorExit()

    @tool
    def breaks(x: str) -> str:
        """Raises RuntimeError."""
        raise RuntimeError("tool boom")

    spec = {"name": "w", "description": "works", "tools": ["quits", "breaks"]}
    both = {"tool_calls": [tool_call("quits", x="1"), tool_call("breaks", x="2")]}
    model = ScriptedChatModel(rules=[("do it", [both, "done"])], responses=_parallel(("do it", "w")))
    out = _invoke(mode, create_deep_agent(model, [quits, breaks], subagents=[spec]), _user())
    (record,) = _records(out)
    assert record["stop_reason"] == "tool_error"


def test_a_base_exception_raised_by_the_childs_model_on_ainvoke_fails_that_task_alone():
    out = _child_raising_at("model", Boom("not a cancellation"), "async")
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("shape", ["text", None, [AIMessage("hi")], {"foo": 1}, {"messages": 5}],
                         ids=["str", "None", "list", "no-messages", "messages-int"])
def test_a_compiled_child_returning_an_odd_shape_fails_that_task_alone(mode, shape):
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    out = _invoke(mode, create_deep_agent(model, [], subagents=[_compiled("c", lambda inp: shape)]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["status"] == "error"


@MODES
def test_a_checkpointer_failing_in_the_childs_namespace_fails_the_task_alone(mode):
    class ChildNamespaceFails(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            if config["configurable"].get("checkpoint_ns"):
                raise OSError("disk full")
            return super().put(config, checkpoint, metadata, new_versions)

        async def aput(self, config, checkpoint, metadata, new_versions):
            return self.put(config, checkpoint, metadata, new_versions)

    model = ScriptedChatModel(rules=[("job", ["done"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], checkpointer=ChildNamespaceFails())
    out = _invoke(mode, agent, _user(), {"configurable": {"thread_id": f"cp-{mode}"}})
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["error"] == "OSError: disk full"


@MODES
def test_a_failing_transcript_store_costs_the_transcript_not_the_task(mode):
    class DownStore(InMemoryStore):
        def put(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("store down")

    model = ScriptedChatModel(rules=[("job", ["done"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], settings=DelegationSettings.of(transcript_store=DownStore()))
    out = _invoke(mode, agent, _user(), {"configurable": {"thread_id": f"store-{mode}"}})
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["status"] == "completed"


class _Unstorable(SubagentError):
    stop_reason = threading.Lock()  # type: ignore[assignment]  # nothing a checkpointer can store


class _Claims(SubagentError):
    stop_reason = "completed"


@pytest.mark.parametrize("error", [_Unstorable, _Claims])
def test_the_librarys_error_raised_by_a_childs_tool_is_that_tools_error(run, error):
    @tool
    def nested(x: str) -> str:
        """A tool that itself delegates, and fails."""
        raise error("the nested delegation failed")

    model = _delegating(("job", "general-purpose"),
                        rules=[("job", [{"tool_calls": [tool_call("nested", x="1")]}, "done"])])
    agent = create_deep_agent(model, [nested], checkpointer=InMemorySaver())
    out = run(agent, user("go"), {"configurable": {"thread_id": "t"}})
    (record,) = records(out)
    assert out["messages"][-1].content == "parent carried on"
    assert (record["status"], record["stop_reason"]) == ("error", "tool_error")
    assert "the nested delegation failed" in record["error"]


def test_a_failure_never_takes_a_stop_reason_a_subclass_invents(run):
    class Invents(SubagentError):
        stop_reason = "made_up"  # type: ignore[assignment]

    class Raises(AgentMiddleware):
        def before_model(self, state, runtime):
            raise Invents("no")

    model = _delegating(("job", "w"))
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver(), subagents=[
        {"name": "w", "description": "w", "middleware": [Raises()]}])
    (record,) = records(run(agent, user("go"), {"configurable": {"thread_id": "t"}}))
    assert (record["status"], record["stop_reason"]) == ("error", "error")


def test_the_meters_own_stop_passing_through_a_tool_keeps_its_reason(run):
    """A tool whose inner model call the meter stops (max_turns here) fails with the meter's error: not a tool error."""
    inner = ScriptedChatModel(default="inner answer")

    @tool
    def consult(x: str, runtime: ToolRuntime) -> str:
        """Ask another model, with the child's callbacks."""
        return inner.invoke(x, {"callbacks": runtime.config.get("callbacks")}).text

    model = _delegating(("job", "w"), rules=[("job", [{"tool_calls": [tool_call("consult", x="1")]}, "done"])])
    agent = create_deep_agent(model, [consult], subagents=[
        {"name": "w", "description": "w", "tools": ["consult"], "max_turns": 1}])
    (record,) = records(run(agent, user("go")))
    assert record["stop_reason"] == "max_turns"


class _CauseRaises(Exception):
    @property  # type: ignore[override]
    def __cause__(self):
        raise Boom("cause unreadable")


def test_an_error_whose_cause_raises_a_base_exception_fails_its_task_alone(run):
    @tool
    def flaky(x: str) -> str:
        """Always fails."""
        raise ValueError("first")

    class Rethrow(AgentMiddleware):  # the common wrap-and-re-raise pattern
        def wrap_tool_call(self, request, handler):
            try:
                return handler(request)
            except ValueError:
                raise _CauseRaises("wrapped") from None

        async def awrap_tool_call(self, request, handler):
            try:
                return await handler(request)
            except ValueError:
                raise _CauseRaises("wrapped") from None

    model = _delegating(("job", "w"), ("fine", "general-purpose"),
                        rules=[("job", [{"tool_calls": [tool_call("flaky", x="1")]}, "done"]), ("fine", ["ok fine"])])
    agent = create_deep_agent(model, [flaky], subagents=[
        {"name": "w", "description": "w", "tools": ["flaky"], "middleware": [Rethrow()]}])
    out = run(agent, user("go"))
    assert out["messages"][-1].content == "parent carried on"
    by_type = {r["agent_type"]: r for r in records(out)}
    assert by_type["w"]["status"] == "error" and "wrapped" in by_type["w"]["error"]
    assert by_type["general-purpose"]["result"] == "ok fine"


def test_a_tools_own_model_call_limit_is_that_tools_error(run):
    from langchain.agents.middleware import ModelCallLimitMiddleware

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    @tool
    def research(q: str) -> str:
        """Research with an inner agent under its own call limit."""
        inner_model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("ping")]}] * 5)
        inner = create_agent(inner_model, [ping],
                             middleware=[ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")])
        return inner.invoke(user(q))["messages"][-1].text

    model = _delegating(("job", "w"), rules=[("job", [{"tool_calls": [tool_call("research", q="x")]}, "done"])])
    agent = create_deep_agent(model, [research], subagents=[{"name": "w", "description": "w", "tools": ["research"]}])
    (record,) = records(run(agent, user("go")))
    assert record["stop_reason"] == "tool_error" and "ModelCallLimitExceededError" in record["error"]


@pytest.mark.parametrize("limit", [{"max_turns": 2}, {"max_tokens": 30}])
def test_the_meters_stop_a_tool_wraps_is_still_the_tasks_limit(run, limit):
    helper = ScriptedChatModel(default="inner answer")

    @tool
    def ask(q: str, runtime: ToolRuntime) -> str:
        """Ask a helper model, and report its failure in the tool's own words."""
        config = {"callbacks": runtime.config.get("callbacks")}
        try:
            return helper.invoke(q, config).text + helper.invoke(q, config).text
        except Exception as exc:
            raise RuntimeError(f"helper failed: {exc}") from exc

    model = _delegating(("job", "w"), rules=[("job", [{"tool_calls": [tool_call("ask", q="x")]}, "done"])])
    agent = create_deep_agent(model, [ask], subagents=[{"name": "w", "description": "w", "tools": ["ask"], **limit}])
    (record,) = records(run(agent, user("go")))
    assert record["stop_reason"] == ("max_turns" if "max_turns" in limit else "budget")


class HostileError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


@pytest.mark.parametrize("timeout_s", [None, 60.0])
def test_a_tools_own_timeout_error_is_a_tool_error_not_our_timeout(run, timeout_s):
    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise TimeoutError("socket timed out")

    model = ScriptedChatModel(
        rules=[("fetch it", [{"tool_calls": [tool_call("fetch", url="http://x")]}])],
        responses=[{"tool_calls": [tool_call("task", description="fetch it", subagent_type="fetcher")]},
                   "parent carried on"],
    )
    spec = SubagentSpec(name="fetcher", description="fetches", tools=[fetch], timeout_s=timeout_s)
    out = run(create_deep_agent(model, subagents=[spec]), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "TimeoutError: socket timed out" in msg.content
    assert "timed out after" not in msg.content
    assert records(out)[0]["stop_reason"] == "tool_error"
    assert out["messages"][-1].text == "parent carried on"


def test_an_exception_whose_str_raises_is_still_a_readable_result(run):
    model = ScriptedChatModel(
        rules=[("job", [HostileError()])],
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
                   "parent carried on"],
    )
    out = run(create_deep_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.content.startswith("Subagent 'general-purpose' failed: HostileError")
    assert records(out)[0]["stop_reason"] == "model_error"


def test_a_huge_error_message_is_bounded(run):
    model = ScriptedChatModel(
        rules=[("job", [ValueError("x" * 1_000_000)])],
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
                   "parent carried on"],
    )
    out = run(create_deep_agent(model), user("go"))
    assert len(tool_messages(out)[0].content) < 5_000
