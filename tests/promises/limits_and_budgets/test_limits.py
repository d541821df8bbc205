"""Limits: max_turns, timeout_s on both paths, and the concurrency cap."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import MODES, _assert_one_message_and_record_per_call, _invoke, _parallel, _records, _user
from helpers.graphs import echo, parent_script, records, tool_messages, user
from helpers.odd_children import _create
from middleware import SubAgentMiddleware
from subagents import (
    DEFAULT_MAX_TURNS,
    CompiledSubagent,
    SpecError,
    SubagentSpec,
    coerce_spec,
)
from subagents._settings import DelegationSettings


def looping_model(*calls):
    return ScriptedChatModel(
        rules=[("go", parent_script(*calls))],
        default={"tool_calls": [tool_call("echo", x="again")]},
    )


def child_calls(model, text):
    return [c for c in model.calls if any(m.text == text for m in c["messages"])]


def test_max_turns_stops_a_runaway_child_with_advice(run):
    model = looping_model(("loop", "looper"))
    agent = create_deep_agent(
        model, [echo], subagents=[{"name": "looper", "description": "l", "tools": ["echo"],
                                   "max_turns": 3}],
    )
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'looper' failed: hit its max_turns limit (3 model calls)")
    assert "Split the task" in msg.content
    assert len(child_calls(model, "loop")) == 3
    assert records(out)[0]["model_calls"] == 3


def test_default_max_turns_applies_when_unset(run):
    model = looping_model(("loop", "general-purpose"))
    out = run(create_deep_agent(model, [echo]), user("go"), {"recursion_limit": 10_000})
    assert f"max_turns limit ({DEFAULT_MAX_TURNS} model calls)" in tool_messages(out)[0].content
    assert len(child_calls(model, "loop")) == DEFAULT_MAX_TURNS


def test_timeout_returns_control_early_and_stops_the_child(run):
    slow = ScriptedChatModel(default={"tool_calls": [tool_call("echo", x="again")]}, latency_s=0.3)
    parent = ScriptedChatModel(responses=parent_script(("slow work", "slow"), ("quick", "quick")))
    quick = ScriptedChatModel(default="quick answer")
    agent = create_deep_agent(
        parent,
        [echo],
        subagents=[
            {"name": "slow", "description": "s", "tools": ["echo"], "model": slow,
             "timeout_s": 0.5, "max_turns": 100},
            {"name": "quick", "description": "q", "model": quick},
        ],
    )
    out = run(agent, user("go"), {"recursion_limit": 1000})
    msgs = {m.content.split(":")[0]: m for m in tool_messages(out)}
    timed_out = msgs["Subagent 'slow' failed"]
    assert timed_out.status == "error" and "timed out after 0.5s" in timed_out.content
    assert "quick answer" in msgs
    calls_at_return = len(slow.calls)
    assert calls_at_return < 100  # control came back early: waiting for the child was 100 calls (30 s)
    time.sleep(0.8)
    # The abandoned child stops at its next model call instead of running on.
    assert len(slow.calls) <= calls_at_return + 1


@pytest.mark.parametrize("cap", [2, None])
def test_concurrency_cap_queues_children_and_none_fail(run, cap):
    active, peak, lock = [0], [0], threading.Lock()

    @tool
    def work(x: str) -> str:
        """Work for a while."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.15)
        with lock:
            active[0] -= 1
        return "worked"

    model = ScriptedChatModel(
        rules=[("job", [{"tool_calls": [tool_call("work", x="1")]}, "job done"])],
        responses=parent_script(*[(f"job {i}", "general-purpose") for i in range(6)]),
    )
    agent = create_deep_agent(model, [work], settings=DelegationSettings.of(max_concurrent_tasks=cap))
    out = run(agent, user("go"))
    assert [m.content for m in tool_messages(out)] == ["job done"] * 6
    if cap:
        assert peak[0] == cap
    else:
        assert peak[0] > 2


def test_invalid_cap_is_rejected():
    with pytest.raises(ValueError, match="max_concurrent_tasks"):
        SubAgentMiddleware(settings=DelegationSettings.of(max_concurrent_tasks=0))


def test_a_generous_max_turns_is_not_cut_short_by_the_inherited_recursion_cap(run):
    model = ScriptedChatModel(
        rules=[("loop", [{"tool_calls": [tool_call("echo", x=str(i))]} for i in range(55)] + ["looped"])],
        responses=parent_script(("loop", "long")),
    )
    agent = create_deep_agent(model, [echo], subagents=[
        {"name": "long", "description": "works long", "tools": ["echo"], "max_turns": 60}])
    out = run(agent, user("go"), {"recursion_limit": 10_000})
    (record,) = records(out)
    assert record["status"] == "completed" and record["model_calls"] == 56


@MODES

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
    agent = create_deep_agent(model, [work], subagents=[
        {"name": "w", "description": "w", "tools": ["work"], "timeout_s": 0.1}], settings=DelegationSettings.of(
            max_concurrent_tasks=1,
        ))
    out = _invoke(mode, agent, _user())
    _assert_one_message_and_record_per_call(out, 3)
    assert peak[0] == 1



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
    agent = create_deep_agent(model, [work],
                              subagents=[{"name": "w", "description": "w", "tools": ["work"]}],
                              settings=DelegationSettings.of(max_concurrent_tasks=1))
    runs = [threading.Thread(target=_invoke, args=(mode, agent, _user())) for mode in ("sync", "async", "async")]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    assert peak[0] == 1


def test_children_blocked_in_sync_tools_cannot_starve_the_parent_on_ainvoke():
    """As many children as asyncio's default pool has threads, each blocked in a sync tool: they time out
    at 0.3 s and the parent answers while the tools still block. Their tools ran on the default pool before,
    so the parent's next step waited for one of those threads (until a tool returned)."""
    import os

    release = threading.Event()
    children = min(32, (os.cpu_count() or 1) + 4)
    unblocked: list[str] = []

    @tool
    def block(x: str) -> str:
        """Blocks."""
        release.wait(60)  # a hang guard only: the test releases it once the parent has answered
        unblocked.append(x)
        return "unblocked"

    @tool
    def parent_step(x: str) -> str:
        """A sync tool of the parent's own."""
        return "parent step ran"

    model = ScriptedChatModel(
        rules=[("job", [{"tool_calls": [tool_call("block", x="1")]}, "done"])],
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="w")
                                   for i in range(children)]},
                   {"tool_calls": [tool_call("parent_step", x="1")]}, "parent carried on"])
    agent = create_deep_agent(model, [block, parent_step], subagents=[
        {"name": "w", "description": "w", "tools": ["block"], "timeout_s": 0.3}])
    try:
        out = _invoke("async", agent, _user())
        answered_while_blocked = not unblocked  # the parent answered before any blocked tool returned
    finally:
        release.set()
    assert {r["stop_reason"] for r in _records(out)} == {"timeout"}
    assert out["messages"][-1].content == "parent carried on"
    assert answered_while_blocked, "the parent waited for its children's blocked tools"


@MODES
def test_a_per_call_output_schema_may_only_use_keywords_checked_in_linear_time(mode):
    """The parent model writes `output_schema`: a `pattern` with nested quantifiers and a near-miss
    answer made jsonschema's `re.search` backtrack while holding the GIL, where no timeout_s can step
    in (at 40 characters it never returned); nested references to shared definitions made the check
    exponential. A schema written in the call may hold neither: the call fails naming it and no child
    starts; a property *named* pattern is only a name."""
    for schema, refused in (
        ({"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}, "'pattern'"),
        ({"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}}, "'patternProperties'"),
        ({"type": "object", "properties": {"pattern": {"type": "string"}}}, None),
        # 21 nested oneOf of two references to the next definition (1.5 KB): 45 s to check an answer of 1.
        ({"type": "object", "$defs": {f"a{k}": {"oneOf": [{"$ref": f"#/$defs/a{k + 1}"}] * 2} for k in range(21)},
          "properties": {"pattern": {"$ref": "#/$defs/a0"}}}, "'$ref'"),
        # Checked again per branch (15 nested allOf: 15 s), quadratic (3,000 small objects: 20 s): none written
        # here at a size that costs anything, only the keyword.
        ({"type": "object", "allOf": [{"type": "object"}], "unevaluatedProperties": False}, "'unevaluatedProperties'"),
        ({"type": "object", "properties": {"pattern": {"type": "array", "uniqueItems": True}}}, "'uniqueItems'"),
        ({"type": "object", "properties": {"uniqueItems": {"type": "string"}}, "nullable": True}, None),
    ):
        model = ScriptedChatModel(
            rules=[("judge", [{"tool_calls": [tool_call("Verdict", pattern="a" * 27 + "!")]}, "done"])],
            responses=[{"tool_calls": [tool_call("task", description="judge it", subagent_type="judge",
                                                 output_schema={"title": "Verdict", **schema})]},
                       "parent carried on"],
        )
        agent = create_deep_agent(model, [],
                                  subagents=[{"name": "judge", "description": "judges", "timeout_s": 5}],
                                  settings=DelegationSettings.of(structured_results=True))
        out = _invoke(mode, agent, _user())
        _assert_one_message_and_record_per_call(out, 1)
        (record,) = _records(out)
        if refused:  # as any bad schema: that call fails naming output_schema, and no child runs
            assert record["status"] == "error" and f"output_schema: {refused}" in record["error"], record
            assert not any(c["messages"][-1].text == "judge it" for c in model.calls)
        else:
            assert record["status"] == "completed", record
        assert out["messages"][-1].content == "parent carried on"


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


@MODES
def test_many_parallel_calls_under_a_cap_of_one_all_finish(mode):
    model = ScriptedChatModel(rules=[("job", ["done"])],
                              responses=_parallel(*[(f"job {i}", "general-purpose") for i in range(10)]))
    out = _invoke(mode, create_deep_agent(model, [], settings=DelegationSettings.of(max_concurrent_tasks=1)), _user())
    _assert_one_message_and_record_per_call(out, 10)
    assert {r["status"] for r in _records(out)} == {"completed"}


def test_parallel_creations_sharing_one_call_id_still_respect_the_cap(run):
    message = AIMessage(content="", tool_calls=[_create("alpha", "c0"), _create("beta", "c0"), _create("gamma", "c0")])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]),
    settings=DelegationSettings.of(dynamic_subagents=True, max_dynamic_subagents=1))
    out = run(agent, user("go"))
    assert list(out["dynamic_subagents"]) == ["alpha"]
    answers = [m.content for m in tool_messages(out)]
    assert len(answers) == 3 and sum(a.startswith("Created") for a in answers) == 1
    assert len({m.tool_call_id for m in tool_messages(out)}) == 3


class AsyncToolWrapper(AgentMiddleware):
    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


def test_timeout_holds_on_ainvoke_when_sync_tools_fill_the_executor():
    returned: list[float] = []

    @tool
    def slow(x: str) -> str:
        """Block for a while."""
        time.sleep(5)
        returned.append(time.time())
        return x

    children = 8
    model = ScriptedChatModel(
        rules=[("slow job", [{"tool_calls": [tool_call("slow", x="y")]}, "finished"])],
        responses=[{"tool_calls": [tool_call("task", description=f"slow job {i}", subagent_type="sleeper")
                                   for i in range(children)]}, "parent carried on"],
    )
    spec = SubagentSpec(name="sleeper", description="sleeps", tools=[slow], timeout_s=0.3,
                        middleware=[AsyncToolWrapper()])
    agent = create_deep_agent(model, subagents=[spec])

    out = asyncio.run(agent.ainvoke(user("go")))
    assert {r["stop_reason"] for r in records(out)} == {"timeout"}
    assert len(records(out)) == children
    # Every child is abandoned at its deadline, not when its 5 s tool returns: each ended before any tool did.
    # (The parent's own sync-only steps may still queue behind the abandoned threads in the executor.)
    assert max(r["finished_at"] for r in records(out)) < min(returned, default=float("inf"))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e12, -1.0])
def test_unusable_timeouts_are_refused_when_the_spec_is_made(value):
    with pytest.raises(SpecError, match="timeout_s"):
        coerce_spec({"name": "a", "description": "d", "timeout_s": value})


def test_an_infinite_timeout_in_an_agent_file_names_the_file_and_field(tmp_path):
    from subagents import load_agent_file

    path = tmp_path / "slow.md"
    path.write_text("---\nname: slow\ndescription: d\ntimeout_s: .inf\n---\nPrompt.\n")
    with pytest.raises(SpecError) as err:
        load_agent_file(path)
    assert str(path) in str(err.value) and "timeout" in str(err.value)


def test_a_blocking_call_in_an_async_tool_is_reported_as_what_held_the_timeout_on_ainvoke():
    """A blocking call in an async tool stands the parent's loop still: no deadline can step in until it
    returns. The record is a timeout that says so and names the tool; before, it read like any timeout."""
    @tool
    async def slow(x: str) -> str:
        """Blocks the event loop."""
        time.sleep(2)
        return "slow done"

    model = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("slow", x="1")]}, "child done"])],
                              responses=_parallel(("job", "w")))
    agent = create_deep_agent(model, [slow], subagents=[
        {"name": "w", "description": "w", "tools": ["slow"], "timeout_s": 0.3}])
    (record,) = _records(_invoke("async", agent, _user()))
    assert record["stop_reason"] == "timeout"
    assert "while its tool 'slow' ran" in record["error"] and "asyncio.to_thread" in record["error"]
