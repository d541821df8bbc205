"""Attacks on the core promises, as an outsider would try them.

Section 1 holds attacks that broke a promise when they were written; each
asserts the promised behaviour. The few still open are marked ``xfail``
(strict, so a fix flips them) with what is missing. Section 2 holds attacks
the library withstood from the start, kept as regression guards. Everything runs offline on the scripted model, on invoke and ainvoke.

The promises under attack (README "Why", DESIGN "Rules that never bend"):
every ``task`` call gets exactly one ToolMessage and one ledger record, the
parent run goes on, nothing escapes a child but real cancellation, private
keys never cross, parallel siblings can never make the parent's update
invalid, transcripts can be read back whole, bad input is refused up front.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import threading
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp, GraphInterrupt, GraphRecursionError
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from helpers.registry import UniqueStateMiddleware, register

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import Budget, CompiledSubagent, TaskRecord, get_transcript

# -- helpers (local, so this file does not depend on the shared conftest) ------


def _user(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _parallel(*calls: tuple[str, str]) -> list[Any]:
    """A parent script: one message with these (description, subagent_type) task calls, then an answer."""
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
        "parent carried on",
    ]


def _invoke(mode: str, graph: Any, inputs: Any, config: dict[str, Any] | None = None) -> Any:
    if mode == "sync":
        return graph.invoke(inputs, config)
    return asyncio.run(graph.ainvoke(inputs, config))


def _tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def _records(state: dict[str, Any]) -> list[dict[str, Any]]:
    return list(state.get("subagent_tasks", {}).values())


def _assert_one_message_and_record_per_call(state: dict[str, Any], n_calls: int) -> None:
    assert state["messages"][-1].content == "parent carried on"
    assert len(_tool_messages(state)) == n_calls
    assert len(_records(state)) == n_calls
    for record in _records(state):
        TaskRecord.model_validate(record)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


class Boom(BaseException):
    """A BaseException that is not cancellation (pytest's Failed, gevent's Timeout, trio's Cancelled ...)."""


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


@tool
def echo(x: str) -> str:
    """Echo."""
    return x


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


# ------------------------------------------------------------------------------
# Section 1: attacks that broke a promise (fixed, or xfail with what is open)
# ------------------------------------------------------------------------------


_PLACES = ["tool", "model", "before_agent", "after_agent", "wrap_model_call", "wrap_tool_call"]


@pytest.mark.parametrize(("place", "mode"), [(p, m) for p in _PLACES for m in ("sync", "async")
                                             if (p, m) != ("model", "async")])
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


@MODES
def test_parallel_children_cannot_make_a_strict_reducer_crash_the_parent(mode):
    """'No combination of parallel children can crash the parent': each child's write passes the
    trial on its own, but the two together make the parent's reducer raise."""
    model = ScriptedChatModel(
        rules=[("job A", [{"tool_calls": [tool_call("register", key="same")]}, "A done"]),
               ("job B", [{"tool_calls": [tool_call("register", key="same")]}, "B done"])],
        responses=_parallel(("job A", "w"), ("job B", "w")),
    )
    agent = create_deep_agent(model, [register], middleware=[UniqueStateMiddleware()],
                              subagents=[{"name": "w", "description": "w", "tools": ["register"],
                                          "middleware": [UniqueStateMiddleware()]}])
    out = _invoke(mode, agent, {**_user(), "registry": {"seed": "x"}})
    _assert_one_message_and_record_per_call(out, 2)


class _NotesState(AgentState):
    notes: NotRequired[Any]


class _NotesMiddleware(AgentMiddleware):
    state_schema = _NotesState


@tool
def set_notes(text: str, runtime: ToolRuntime) -> Command:
    """Overwrite the shared notes."""
    return Command(update={"notes": text, "messages": [ToolMessage("set", tool_call_id=runtime.tool_call_id)]})


def _compiled(name: str, fn: Any) -> CompiledSubagent:
    return CompiledSubagent(name=name, description=name, runnable=RunnableLambda(fn))


@MODES
def test_a_lone_task_next_to_another_tool_writing_the_same_plain_key_cannot_crash_the_parent(mode):
    """The parallel rule counts only `task` siblings: a `task` call next to any other tool that writes
    the same key without a reducer gives LangGraph two values for one channel (InvalidUpdateError)."""
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="write notes", subagent_type="c"),
                        tool_call("set_notes", text="parent's own")]},
        "parent carried on",
    ])
    child = _compiled("c", lambda inp: {**inp, "notes": "child's", "messages": [AIMessage("done")]})
    agent = create_deep_agent(model, [set_notes], middleware=[_NotesMiddleware()], subagents=[child])
    out = _invoke(mode, agent, {**_user(), "notes": "orig"})
    assert out["messages"][-1].content == "parent carried on"
    assert len(_records(out)) == 1


@MODES
@pytest.mark.parametrize("kind", ["lock-no-checkpointer", "function-with-checkpointer"])
def test_a_value_the_parent_cannot_copy_or_checkpoint_is_skipped_not_fatal(mode, kind):
    """A child's write-back passes the channel trial, then LangGraph's ToolNode deep-copies the task's
    Command (a lock, a socket, a client object cannot be copied) or the parent's checkpointer cannot
    serialise it (a function): the parent's step dies, taking the run with it."""
    value: Any = threading.Lock() if kind.startswith("lock") else (lambda: "a callback")
    saver = InMemorySaver() if kind.endswith("with-checkpointer") else None
    model = ScriptedChatModel(responses=_parallel(("hand me something odd", "c")))
    child = _compiled("c", lambda inp: {**inp, "notes": value, "messages": [AIMessage("done")]})
    agent = create_deep_agent(model, [], middleware=[_NotesMiddleware()], subagents=[child], checkpointer=saver)
    out = _invoke(mode, agent, {**_user(), "notes": "orig"}, {"configurable": {"thread_id": f"{kind}-{mode}"}})
    _assert_one_message_and_record_per_call(out, 1)
    assert out["notes"] == "orig"
    assert "notes" in (_records(out)[0]["skipped_writes"] or {})


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
def test_a_task_call_without_an_id_still_gets_its_tool_message_and_record(mode):
    """Some OpenAI-compatible servers send tool calls without ids. Today the task's ToolMessage
    gets tool_call_id='' and the tool node rejects it: the parent run dies."""
    model = ScriptedChatModel(
        rules=[("alpha", ["A"]), ("beta", ["B"])],
        responses=[AIMessage("", tool_calls=[
            {"name": "task", "args": {"description": "alpha", "subagent_type": "general-purpose"},
             "id": None, "type": "tool_call"},
            {"name": "task", "args": {"description": "beta", "subagent_type": "general-purpose"},
             "id": None, "type": "tool_call"},
        ]), "parent carried on"],
    )
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
def test_two_invalid_task_calls_sharing_an_id_get_a_record_each(mode):
    """Each call gets one ToolMessage and one record; the record id is derived from the call id alone,
    so the second invalid call's record overwrites the first."""
    model = ScriptedChatModel(responses=[AIMessage("", invalid_tool_calls=[
        {"name": "task", "args": "{bad", "id": "same", "error": "bad json", "type": "invalid_tool_call"},
        {"name": "task", "args": "{worse", "id": "same", "error": "bad json", "type": "invalid_tool_call"},
    ]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
def test_invalid_task_calls_in_two_turns_keep_two_records_when_the_model_reuses_call_ids(mode):
    """Valid delegations get ids scoped by thread and checkpoint namespace, but an invalid call's record
    id is a hash of the call id alone: a server that numbers calls per reply ("call_0") makes the second
    turn's record overwrite the first in a checkpointed thread."""

    def bad_call(messages: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "task", "args": {"description": "job"}, "id": "call_0",
                                          "type": "tool_call"}])

    model = ScriptedChatModel(responses=[bad_call, "parent carried on"])
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"reused-ids-{mode}"}}
    _invoke(mode, agent, _user("first"), config)
    out = _invoke(mode, agent, _user("second"), config)
    assert len(_tool_messages(out)) == 2
    assert len(_records(out)) == 2


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
def test_an_approved_childs_jsonl_transcript_holds_each_message_once(mode, tmp_path):
    """After an approval the resumed child records again from its start into the same file: the
    task description and first reply appear twice, and a second header sits mid-file."""

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, "deploy finished"])],
        responses=_parallel(("deploy job", "deployer")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), sessions_dir=str(tmp_path),
                              subagents=[{"name": "deployer", "description": "deploys", "tools": ["deploy"],
                                          "interrupt_on": {"deploy": True}}])
    config = {"configurable": {"thread_id": f"approve-{mode}"}}
    _invoke(mode, agent, _user(), config)
    out = _invoke(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    (record,) = _records(out)
    messages = get_transcript(agent, config, record["id"])
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    lines = open(record["transcript"].split(":", 1)[1], encoding="utf-8").read().splitlines()
    assert sum("metadata" in json.loads(line) for line in lines) == 1, "one header line"


@MODES
def test_a_jsonl_transcript_keeps_messages_with_a_lone_surrogate(mode, tmp_path):
    """Models do emit lone surrogates (a split emoji). The JSONL sink fails to encode them and the
    recorder's error is swallowed: the task completes with an empty transcript."""
    model = ScriptedChatModel(rules=[("job", ["half an emoji: \ud83d"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], sessions_dir=str(tmp_path))
    config = {"configurable": {"thread_id": f"surrogate-{mode}"}}
    out = _invoke(mode, agent, _user(), config)
    (record,) = _records(out)
    assert record["status"] == "completed"
    assert [m.type for m in get_transcript(out, config, record["id"])] == ["human", "ai"]


@MODES
@pytest.mark.xfail(strict=True, reason="OPEN: an abandoned (timed-out) child's slot is released before its running tool returns")
def test_max_concurrent_tasks_still_holds_while_a_timed_out_child_is_still_running(mode):
    """A timed-out child is abandoned, not stopped: its tool keeps running (on invoke its thread, on
    ainvoke the executor thread of a sync tool) while its concurrency slot is already given to the next
    child. With a cap of 1, three children's tools run at once."""
    active, peak, lock = [0], [0], threading.Lock()

    @tool
    def work(x: str) -> str:
        """Slow work."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            threading.Event().wait(0.4)
        finally:
            with lock:
                active[0] -= 1
        return "worked"

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("work", x="1")]}, "done"])],
                              responses=_parallel(*[(f"job {i}", "w") for i in range(3)]))
    agent = create_deep_agent(model, [work], max_concurrent_tasks=1, subagents=[
        {"name": "w", "description": "w", "tools": ["work"], "timeout_s": 0.1}])
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 3)
    assert peak[0] == 1


@pytest.mark.xfail(strict=True, reason="OPEN: the cap is one semaphore for threads and one per event loop, not one across both")
def test_max_concurrent_tasks_caps_the_agent_across_invoke_and_several_event_loops():
    """'caps children of this agent running at once, across its concurrent runs': the cap is one
    semaphore for threads plus one per event loop, so invoke and two ainvoke runs (two loops, as in
    two worker threads of a server) run three children at once under a cap of 1."""
    active, peak, lock = [0], [0], threading.Lock()

    @tool
    def work(x: str) -> str:
        """Slow work."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            threading.Event().wait(0.3)
        finally:
            with lock:
                active[0] -= 1
        return "worked"

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("work", x="1")]}, "done"])],
                              responses=_parallel(("job", "w")))
    agent = create_deep_agent(model, [work], max_concurrent_tasks=1,
                              subagents=[{"name": "w", "description": "w", "tools": ["work"]}])
    runs = [threading.Thread(target=_invoke, args=(mode, agent, _user())) for mode in ("sync", "async", "async")]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    assert peak[0] == 1


def test_a_refused_delegation_emits_its_lifecycle_event():
    """The custom stream carries each task's end ("completed" / "error"); a refused task (unknown type,
    budget spent, nested call) gets a record and a ToolMessage but no event, so a live view misses it."""
    model = ScriptedChatModel(rules=[("ok", ["fine"])],
                              responses=_parallel(("ok", "general-purpose"), ("x", "no-such-agent")))
    agent = create_deep_agent(model, [])
    events = [e for e in agent.stream(_user(), stream_mode="custom") if e.get("type") == "subagent_task"]
    assert sorted((e["agent_type"], e["status"]) for e in events if e["status"] != "running") == [
        ("general-purpose", "completed"), ("no-such-agent", "error")]


def _merge(left: dict | None, right: dict) -> dict:
    return {**(left or {}), **right}


class _MergeState(AgentState):
    registry: NotRequired[Annotated[dict, _merge]]


class _MergeMiddleware(AgentMiddleware):
    state_schema = _MergeState


@MODES
def test_a_removal_from_a_reducer_dict_is_named_in_skipped_writes(mode):
    """'Anything not written is named, with the reason, in skipped_writes.' A child that removed an
    entry from a reducer dict gets an empty contribution written and nothing named."""
    model = ScriptedChatModel(responses=_parallel(("forget seed", "c")))
    child = _compiled("c", lambda inp: {**inp, "registry": {}, "messages": [AIMessage("forgot it")]})
    agent = create_deep_agent(model, [], middleware=[_MergeMiddleware()], subagents=[child])
    out = _invoke(mode, agent, {**_user(), "registry": {"seed": "x"}})
    _assert_one_message_and_record_per_call(out, 1)
    assert out["registry"] == {"seed": "x"}
    assert "registry" in (_records(out)[0]["skipped_writes"] or {})


@MODES
def test_a_refused_delegation_still_has_a_transcript_that_can_be_read_back(mode):
    """'Every delegation, finished or failed, has a record ... and a transcript that can be read back.'
    A refused one (unknown type, budget spent, nested call) has transcript=None, and get_transcript
    raises LookupError for it (the CLI's `transcript TASK_ID` then fails) instead of giving back an
    empty transcript or the task it was given."""
    model = ScriptedChatModel(responses=_parallel(("do the thing", "no-such-agent")))
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"refused-{mode}"}}
    out = _invoke(mode, agent, _user(), config)
    (record,) = _records(out)
    assert record["stop_reason"] == "invalid_call"
    messages = get_transcript(agent, config, record["id"])  # empty, or the task it was given
    assert all(m.text == "do the thing" for m in messages)


@MODES
@pytest.mark.xfail(strict=True, reason="OPEN: a per-call schema's regex can backtrack while holding the GIL, where no deadline can step in")
def test_a_per_call_output_schema_cannot_freeze_the_run_past_timeout_s(mode):
    """The parent model writes `output_schema`, the child model writes the answer: a `pattern` with
    nested quantifiers and a near-miss answer make jsonschema's `re.search` backtrack while holding
    the GIL, so neither invoke's helper thread nor ainvoke's task can be abandoned at timeout_s (0.2 s
    here; the run takes about 1.5 s, and each extra character doubles it: at 40 it never returns)."""
    import time

    schema = {"type": "object", "title": "Verdict", "required": ["word"],
              "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}
    model = ScriptedChatModel(
        rules=[("judge", [{"tool_calls": [tool_call("Verdict", word="a" * 25 + "!")]}] * 3)],
        responses=[{"tool_calls": [tool_call("task", description="judge it", subagent_type="judge",
                                             output_schema=schema)]}, "parent carried on"],
    )
    agent = create_deep_agent(model, [], structured_results=True,
                              subagents=[{"name": "judge", "description": "judges", "timeout_s": 0.2}])
    started = time.monotonic()
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert time.monotonic() - started < 1.0


@MODES
def test_a_compiled_childs_answer_given_as_a_message_dict_is_not_lost(mode):
    """A user's own StateGraph with a plain `messages: list` channel often appends OpenAI-style dicts.
    final_answer only looks at AIMessage objects, so the task 'completes' with an empty answer."""
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    child = _compiled("c", lambda inp: {**inp, "messages": [*inp["messages"],
                                                            {"role": "assistant", "content": "the answer"}]})
    out = _invoke(mode, create_deep_agent(model, [], subagents=[child]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _tool_messages(out)[0].content == "the answer"


@MODES
def test_a_looping_compiled_child_is_stopped_long_before_thousands_of_model_calls(mode):
    """'A looping child: ... the parent's own recursion limit (never a huge constant)'. A compiled
    subagent has no max_turns, and the parent's recursion limit is create_agent's 9,999 unless the
    caller passed one: a looping create_agent child made 5,000 model calls before it was stopped (the
    deepagents behaviour the README's comparison table criticises). A safety valve in the scripted
    model stops it at 150 calls here so the test stays fast."""
    calls = [0]

    def loop(messages: Any) -> Any:
        calls[0] += 1
        if calls[0] > 150:
            raise RuntimeError("safety valve: still looping after 150 model calls")
        return {"tool_calls": [tool_call("echo", x="again")]}

    looper = create_agent(ScriptedChatModel(default=loop), [echo])
    model = ScriptedChatModel(responses=_parallel(("loop forever", "looper")))
    agent = create_deep_agent(model, [], subagents=[
        CompiledSubagent(name="looper", description="loops", runnable=looper)])
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["stop_reason"] in ("max_turns", "recursion")
    assert calls[0] <= 100


def test_a_malformed_price_table_is_refused_when_the_budget_is_built():
    """Bad input gets a clear error naming the argument. Today Budget(prices={"m": (1,)}) is accepted,
    and the parent's first model call dies with IndexError: tuple index out of range."""
    with pytest.raises(ValueError, match="prices"):
        Budget(max_tokens=1_000, prices={"scripted": (1.0,)})


def test_a_malformed_price_table_is_refused_when_the_agent_is_built():
    """Today create_deep_agent(prices={"m": "cheap"}) is accepted; every child then fails with
    'TypeError: unsupported operand type(s) for /: str and int'."""
    with pytest.raises(ValueError, match="prices"):
        create_deep_agent(ScriptedChatModel(responses=["x"]), [], prices={"scripted": "cheap"})


# ------------------------------------------------------------------------------
# Section 2: attacks the library withstood from the start (regression guards)
# ------------------------------------------------------------------------------


@MODES
@pytest.mark.parametrize("place", ["tool", "model", "before_agent", "after_agent", "wrap_model_call",
                                   "wrap_tool_call"])
def test_guard_an_ordinary_exception_anywhere_in_a_child_fails_that_task_alone(mode, place):
    out = _child_raising_at(place, ValueError("disk on fire"), mode)
    _assert_one_message_and_record_per_call(out, 2)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["error"].startswith("ValueError: disk on fire")


@MODES
@pytest.mark.parametrize("exc", [asyncio.CancelledError(), StopIteration(), StopAsyncIteration()],
                         ids=["CancelledError", "StopIteration", "StopAsyncIteration"])
def test_guard_control_flow_exceptions_raised_by_a_child_tool_fail_that_task_alone(mode, exc):
    out = _child_raising_at("tool", exc, mode)
    _assert_one_message_and_record_per_call(out, 2)


def test_guard_generator_exit_from_a_child_tool_fails_that_task_alone_on_ainvoke():
    out = _child_raising_at("tool", GeneratorExit(), "async")
    _assert_one_message_and_record_per_call(out, 2)


@MODES
def test_a_child_tools_generator_exit_is_recorded_as_the_tools_error_on_both_paths(mode):
    """On ainvoke it reaches the runner as the interpreter's RuntimeError("coroutine ignored GeneratorExit")."""
    out = _child_raising_at("tool", GeneratorExit(), mode)
    (failed,) = [r for r in _records(out) if r["status"] == "error"]
    assert failed["stop_reason"] == "tool_error"
    assert failed["error"].startswith("GeneratorExit")


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
    assert "GeneratorExit" in failed["error"] or place == "model"  # a model's: LangChain re-wraps it on ainvoke


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


def test_guard_a_base_exception_raised_by_the_childs_model_on_ainvoke_fails_that_task_alone():
    out = _child_raising_at("model", Boom("not a cancellation"), "async")
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("shape", ["text", None, [AIMessage("hi")], {"foo": 1}, {"messages": 5}],
                         ids=["str", "None", "list", "no-messages", "messages-int"])
def test_guard_a_compiled_child_returning_an_odd_shape_fails_that_task_alone(mode, shape):
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    out = _invoke(mode, create_deep_agent(model, [], subagents=[_compiled("c", lambda inp: shape)]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["status"] == "error"


@MODES
def test_guard_a_key_the_parent_lacks_is_skipped_and_named(mode):
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    child = _compiled("c", lambda inp: {**inp, 7: "x", "subagent_tasks": {"forged": {}},
                                        "messages": [AIMessage("hi")]})
    out = _invoke(mode, create_deep_agent(model, [], subagents=[child]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert "forged" not in out["subagent_tasks"]
    assert _records(out)[0]["skipped_writes"] == {"7": "the parent's state has no such key"}


@MODES
def test_guard_command_parent_from_a_child_tool_is_refused(mode):
    @tool
    def escape(x: str, runtime: ToolRuntime) -> Command:
        """Tries to write into the parent."""
        return Command(graph=Command.PARENT, goto="model",
                       update={"messages": [ToolMessage("s", tool_call_id=runtime.tool_call_id)]})

    model = ScriptedChatModel(
        rules=[("do it", [{"tool_calls": [tool_call("escape", x="1")]}, "did"]), ("fine", ["ok"])],
        responses=_parallel(("do it", "w"), ("fine", "general-purpose")),
    )
    agent = create_deep_agent(model, [escape], subagents=[{"name": "w", "description": "w", "tools": ["escape"]}])
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 2)
    assert sorted(r["stop_reason"] for r in _records(out)) == ["completed", "refused"]


@MODES
def test_guard_duplicate_task_call_ids_each_get_a_message_and_record(mode):
    model = ScriptedChatModel(rules=[("alpha", ["A"]), ("beta", ["B"])], responses=[AIMessage("", tool_calls=[
        {"name": "task", "args": {"description": "alpha", "subagent_type": "general-purpose"}, "id": "dup",
         "type": "tool_call"},
        {"name": "task", "args": {"description": "beta", "subagent_type": "general-purpose"}, "id": "dup",
         "type": "tool_call"},
    ]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("args", [{}, {"description": 5, "subagent_type": "general-purpose"},
                                  {"description": "x", "subagent_type": "general-purpose", "prompt": "y"},
                                  {"description": "x", "subagent_type": "../../etc\x00"}],
                         ids=["missing", "wrong-type", "extra", "traversal-type"])
def test_guard_wrong_task_arguments_get_an_invalid_call_record(mode, args):
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[
        {"name": "task", "args": args, "id": "c1", "type": "tool_call"}]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["stop_reason"] == "invalid_call"


@MODES
def test_guard_an_approval_with_a_failing_and_a_timed_sibling_resumes_once(mode):
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, "deploy finished"]),
               ("sibling fails", [ConnectionError("503")]), ("sibling ok", ["fine"])],
        responses=_parallel(("deploy job", "deployer"), ("sibling fails", "general-purpose"),
                            ("sibling ok", "general-purpose")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), subagents=[
        {"name": "deployer", "description": "d", "tools": ["deploy"], "interrupt_on": {"deploy": True},
         "timeout_s": 30}])
    config = {"configurable": {"thread_id": f"hitl-{mode}"}}
    paused = _invoke(mode, agent, _user(), config)
    assert len(paused["__interrupt__"]) == 1 and deployed == []
    out = _invoke(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    _assert_one_message_and_record_per_call(out, 3)
    assert deployed == ["prod"]
    assert sum(any(m.text == "sibling ok" for m in c["messages"]) for c in model.calls) == 1


def test_guard_cancelling_ainvoke_propagates_and_marks_the_transcript(tmp_path):
    @tool
    async def hang(x: str) -> str:
        """Never returns in time."""
        await asyncio.sleep(5)
        return x

    model = ScriptedChatModel(rules=[("zzz", [{"tool_calls": [tool_call("hang", x="1")]}, "woke"])],
                              responses=_parallel(("zzz", "w")))
    agent = create_deep_agent(model, [hang], sessions_dir=str(tmp_path),
                              subagents=[{"name": "w", "description": "w", "tools": ["hang"]}])

    async def main() -> None:
        running = asyncio.ensure_future(agent.ainvoke(_user(), {"configurable": {"thread_id": "c"}}))
        await asyncio.sleep(0.3)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    (path,) = glob.glob(str(tmp_path / "**" / "*.jsonl"), recursive=True)
    assert json.loads(open(path).read().splitlines()[-1]) == {"type": "cancelled"}


def test_guard_a_keyboard_interrupt_in_a_child_tool_propagates_on_invoke_and_marks_the_transcript(tmp_path):
    @tool
    def ctrl_c(x: str) -> str:
        """Ctrl-C lands while this runs."""
        raise KeyboardInterrupt

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("ctrl_c", x="1")]}, "done"])],
                              responses=_parallel(("job", "w")))
    agent = create_deep_agent(model, [ctrl_c], sessions_dir=str(tmp_path),
                              subagents=[{"name": "w", "description": "w", "tools": ["ctrl_c"]}])
    with pytest.raises(KeyboardInterrupt):
        agent.invoke(_user(), {"configurable": {"thread_id": "kbd"}})
    (path,) = glob.glob(str(tmp_path / "**" / "*.jsonl"), recursive=True)
    assert json.loads(open(path).read().splitlines()[-1]) == {"type": "cancelled"}


@pytest.mark.parametrize("thread_id", ["../x", "a/../../x", "/etc", "..", "x\x00y", "é", "a" * 5000, 12345])
def test_guard_jsonl_paths_stay_inside_a_symlinked_sessions_dir(tmp_path, thread_id):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    model = ScriptedChatModel(rules=[("job", ["done"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], sessions_dir=str(tmp_path / "link"))
    config = {"configurable": {"thread_id": thread_id}}
    out = agent.invoke(_user(), config)
    (record,) = _records(out)
    path = record["transcript"].split(":", 1)[1]
    assert os.path.realpath(path).startswith(str(real.resolve()) + os.sep)
    assert [m.type for m in get_transcript(out, config, record["id"])] == ["human", "ai"]


@MODES
def test_guard_a_checkpointer_failing_in_the_childs_namespace_fails_the_task_alone(mode):
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
def test_guard_a_failing_transcript_store_costs_the_transcript_not_the_task(mode):
    class DownStore(InMemoryStore):
        def put(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("store down")

    model = ScriptedChatModel(rules=[("job", ["done"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], transcript_store=DownStore())
    out = _invoke(mode, agent, _user(), {"configurable": {"thread_id": f"store-{mode}"}})
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["status"] == "completed"


@MODES
def test_guard_many_parallel_calls_under_a_cap_of_one_all_finish(mode):
    model = ScriptedChatModel(rules=[("job", ["done"])],
                              responses=_parallel(*[(f"job {i}", "general-purpose") for i in range(10)]))
    out = _invoke(mode, create_deep_agent(model, [], max_concurrent_tasks=1), _user())
    _assert_one_message_and_record_per_call(out, 10)
    assert {r["status"] for r in _records(out)} == {"completed"}


@MODES
def test_guard_a_fork_never_sees_the_call_in_flight_or_a_system_message(mode):
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
def test_guard_no_excluded_or_private_key_reaches_a_child_or_comes_back(mode):
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
        model, [], subagents=[_compiled("c", child)], dynamic_subagents=True, background=True,
        middleware=[TodoListMiddleware(), ModelCallLimitMiddleware(run_limit=50), ToolCallLimitMiddleware(run_limit=50),
                    _SecretMiddleware()])
    out = _invoke(mode, agent, _user())
    assert sorted(seen) == ["messages"]
    assert out["todos"] == [{"content": "real", "status": "pending"}]
    assert "forged" not in out["subagent_tasks"] and out["subagent_usage"]["tasks"] == 1
    assert not out.get("dynamic_subagents") and not out.get("async_tasks")


class _SharedState(AgentState):
    findings: NotRequired[Annotated[list, __import__("operator").add]]
    notes: NotRequired[Any]


class _SharedMiddleware(AgentMiddleware):
    state_schema = _SharedState


@MODES
def test_guard_parallel_siblings_write_back_by_the_rule(mode):
    def child(tag: str, replace: bool = False) -> CompiledSubagent:
        def run(inp: dict[str, Any]) -> dict[str, Any]:
            findings = [tag] if replace else [*inp["findings"], tag]
            return {**inp, "findings": findings, "notes": tag, "messages": [AIMessage(tag)]}

        return _compiled(tag, run)

    model = ScriptedChatModel(responses=_parallel(("x", "a"), ("x", "b"), ("x", "r")))
    agent = create_deep_agent(model, [], middleware=[_SharedMiddleware()],
                              subagents=[child("a"), child("b"), child("r", replace=True)])
    out = _invoke(mode, agent, {**_user(), "findings": ["seed"], "notes": "orig"})
    _assert_one_message_and_record_per_call(out, 3)
    assert sorted(out["findings"]) == ["a", "b", "seed"] and out["findings"][0] == "seed"
    assert out["notes"] == "orig"
    skipped = {r["agent_type"]: r["skipped_writes"] for r in _records(out)}
    assert set(skipped["a"]) == {"notes"} and set(skipped["r"]) == {"findings", "notes"}


@MODES
def test_guard_a_compiled_deep_agent_child_cannot_delegate_further(mode):
    inner_model = ScriptedChatModel(rules=[("inner job", ["inner answer"])], responses=[
        {"tool_calls": [tool_call("task", description="inner job", subagent_type="general-purpose")]}, "inner done"])
    inner = create_deep_agent(inner_model, [])
    model = ScriptedChatModel(responses=_parallel(("outer job", "nested")))
    agent = create_deep_agent(model, [], subagents=[CompiledSubagent(name="nested", description="n", runnable=inner)])
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert not any(c["messages"][-1].text == "inner job" for c in inner_model.calls), "a grandchild ran"
    assert "subagents cannot delegate" in inner_model.calls[-1]["messages"][-1].text


@MODES
def test_guard_two_parallel_children_paused_for_approval_resume_by_interrupt_id(mode):
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy A", [{"tool_calls": [tool_call("deploy", target="A")]}, "finished A"]),
               ("deploy B", [{"tool_calls": [tool_call("deploy", target="B")]}, "finished B"])],
        responses=_parallel(("deploy A", "deployer"), ("deploy B", "deployer")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), subagents=[
        {"name": "deployer", "description": "d", "tools": ["deploy"], "interrupt_on": {"deploy": True}}])
    config = {"configurable": {"thread_id": f"two-approvals-{mode}"}}
    paused = _invoke(mode, agent, _user(), config)
    interrupts = paused["__interrupt__"]
    assert len(interrupts) == 2 and len({i.value["subagent"]["task_id"] for i in interrupts}) == 2
    out = _invoke(mode, agent, Command(resume={i.id: {"decisions": [{"type": "approve"}]} for i in interrupts}),
                  config)
    _assert_one_message_and_record_per_call(out, 2)
    assert sorted(deployed) == ["A", "B"]
