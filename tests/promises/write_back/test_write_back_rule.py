"""What a child writes back: only keys it changed, by the write-back rule, never an invalid parent update.

Parallel siblings writing one plain key, a strict reducer, a value the
parent cannot copy or checkpoint, a removal from a reducer dict, a key the
parent lacks, a write-back replayed or resumed after a pause: each is
written by the rule or skipped and named, and the parent run goes on.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

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
)
from helpers.containment import SharedState, start
from helpers.graphs import records, tool_messages, user
from helpers.odd_children import Boom, _delegating
from helpers.registry import UniqueStateMiddleware, register
from middleware import SubAgentMiddleware
from subagents import (
    CompiledSubagent,
    SubagentSpec,
)
from subagents._settings import DelegationSettings


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


class CopiesOnce:
    """Its deep copy works once, then raises; the copy is a new one (which copies once too), or itself."""

    def __init__(self, fresh: bool) -> None:
        self.fresh, self.copied = fresh, False

    def __deepcopy__(self, memo: dict[int, Any]) -> CopiesOnce:
        if self.copied:
            raise Boom("copied twice")
        self.copied = True
        return CopiesOnce(self.fresh) if self.fresh else self


@MODES
@pytest.mark.parametrize("fresh", [True, False], ids=["copy is new", "copy is itself"])
def test_a_value_whose_copy_works_only_once_never_reaches_langgraphs_copy_of_the_update(mode, fresh):
    """The write-back's check copied the child's value once; LangGraph's ToolNode copied it again to carry the
    task's Command, and that copy raised: the parent's run died."""
    model = ScriptedChatModel(responses=_parallel(("hand me something odd", "c")))
    child = _compiled("c", lambda inp: {**inp, "notes": CopiesOnce(fresh), "messages": [AIMessage("done")]})
    agent = create_deep_agent(model, [], middleware=[_NotesMiddleware()], subagents=[child])
    out = _invoke(mode, agent, {**_user(), "notes": "orig"})
    _assert_one_message_and_record_per_call(out, 1)
    skipped = _records(out)[0]["skipped_writes"] or {}
    if fresh:  # our copy went back, and LangGraph copied that
        assert isinstance(out["notes"], CopiesOnce) and skipped == {}
    else:
        assert out["notes"] == "orig" and skipped == {"notes": "the value cannot be copied (Boom)"}


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
def test_a_key_the_parent_lacks_is_skipped_and_named(mode):
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    child = _compiled("c", lambda inp: {**inp, 7: "x", "subagent_tasks": {"forged": {}},
                                        "messages": [AIMessage("hi")]})
    out = _invoke(mode, create_deep_agent(model, [], subagents=[child]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert "forged" not in out["subagent_tasks"]
    assert _records(out)[0]["skipped_writes"] == {"7": "the parent's state has no such key"}


class _SharedState(AgentState):
    findings: NotRequired[Annotated[list, __import__("operator").add]]
    notes: NotRequired[Any]


class _SharedMiddleware(AgentMiddleware):
    state_schema = _SharedState


@MODES
def test_parallel_siblings_write_back_by_the_rule(mode):
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


class _Sticky:
    def __deepcopy__(self, memo):
        raise Boom("cannot be copied")


class _Findings(AgentState):
    findings: NotRequired[Annotated[list, operator.add]]


def test_a_write_back_whose_copy_raises_a_base_exception_is_skipped(run):
    class AddFinding(AgentMiddleware):
        state_schema = _Findings

        def after_agent(self, state, runtime):
            return {"findings": [_Sticky()]}

    model = _delegating(("job", "w"), rules=[("job", ["done"])])
    spec = SubagentSpec(name="w", description="w", middleware=[AddFinding()])
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                         state_schema=_Findings)
    out = run(agent, {**user("go"), "findings": []})
    (record,) = records(out)
    assert out["messages"][-1].content == "parent carried on" and out["findings"] == []
    assert record["status"] == "completed" and "cannot be copied (Boom)" in record["skipped_writes"]["findings"]


@tool
def register_approved(key: str, runtime: ToolRuntime) -> Command:
    """Register a key, once a human approves."""
    return Command(update={"registry": {key: runtime.tool_call_id},
                           "messages": [ToolMessage("registered", tool_call_id=runtime.tool_call_id)]})


def _registering(saver: Any, b_key: str, b_tool: str) -> Any:
    model = ScriptedChatModel(
        rules=[("job A", [{"tool_calls": [tool_call("register", key="a")]}, "A done"]),
               ("job B", [{"tool_calls": [tool_call(b_tool, key=b_key)]}, "B done"])],
        responses=[{"tool_calls": [tool_call("task", description="job A", subagent_type="a"),
                                   tool_call("task", description="job B", subagent_type="b")]},
                   "parent carried on"])
    return create_deep_agent(model, [register, register_approved], middleware=[UniqueStateMiddleware()], checkpointer=saver,
                             subagents=[{"name": "a", "description": "a", "tools": ["register"]},
                                        {"name": "b", "description": "b", "tools": [b_tool],
                                         "interrupt_on": {"register_approved": True}}])


def test_a_step_resumed_on_a_new_agent_tries_its_write_on_the_siblings_that_finished_before_the_pause(run):
    """Both children register "a"; one pauses for approval, the agent is built again (a restart), then resumed."""
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    paused = run(_registering(saver, "a", "register_approved"), {**user("go"), "registry": {}}, config)
    assert "__interrupt__" in paused
    out = run(_registering(saver, "a", "register_approved"), Command(resume={"decisions": [{"type": "approve"}]}),
              config)
    assert out["messages"][-1].content == "parent carried on"
    assert list(out["registry"]) == ["a"]
    skipped = [r for r in records(out) if r.get("skipped_writes")]
    assert len(skipped) == 1 and "registry" in skipped[0]["skipped_writes"]


def test_replaying_the_step_from_history_writes_the_siblings_additions_again(run):
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    agent = _registering(saver, "b", "register")
    first = run(agent, {**user("go"), "registry": {}}, config)
    before_tools = next(s for s in agent.get_state_history(config) if s.next and s.next[0] == "tools")
    replayed = run(agent, None, before_tools.config)
    assert sorted(first["registry"]) == sorted(replayed["registry"]) == ["a", "b"]


class _Fault(BaseException):
    pass


class _StepReadFails(InMemorySaver):
    """A checkpointer whose read of the step's own checkpoint fails (any exception type), or yields junk."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def get_tuple(self, config):
        found = super().get_tuple(config)
        if found is None or not config["configurable"].get("checkpoint_id"):
            return found
        if self.how == "raises":
            raise _Fault("checkpointer fault")
        return found._replace(pending_writes=[("not", "a write"), 5, None])

    async def aget_tuple(self, config):
        return self.get_tuple(config)


class _ChildWrites(AgentMiddleware):
    state_schema = _Findings

    def before_agent(self, state, runtime):
        return {"findings": [f"found by {state['messages'][0].text}"]}


@pytest.mark.parametrize("how", ["raises", "junk"])
def test_a_checkpointer_whose_step_read_fails_costs_the_write_back_trial_nothing(run, how):
    model = _delegating(("job a", "writer"), ("job b", "writer"), rules=[("job", ["done"])])
    spec = SubagentSpec(name="writer", description="writes", middleware=[_ChildWrites()])
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                         state_schema=_Findings, checkpointer=_StepReadFails(how))
    out = run(agent, {**user("go"), "findings": []}, {"configurable": {"thread_id": "t"}})
    assert sorted(out["findings"]) == ["found by job a", "found by job b"] and len(records(out)) == 2


class ChildWrites(AgentMiddleware):
    """A child middleware that writes both kinds of shared key, named for its task."""

    state_schema = SharedState

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        task = state["messages"][0].text
        return {"notes": f"note from {task}", "findings": [f"found by {task}"]}


def writer_agent(*calls: str) -> Any:
    model = ScriptedChatModel(
        rules=[("job", ["done"])],
        responses=[{"tool_calls": [tool_call("task", description=c, subagent_type="writer") for c in calls]},
                   "parent carried on"],
    )
    spec = SubagentSpec(name="writer", description="writes shared keys", middleware=[ChildWrites()])
    return create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                        state_schema=SharedState)


def test_parallel_children_writing_a_plain_key_never_crash_the_parent(run):
    out = run(writer_agent("job a", "job b"), start(notes="parent note", findings=["p1", "p2"]))
    assert out["messages"][-1].text == "parent carried on"
    msgs = tool_messages(out)
    assert len(msgs) == 2 and all(m.status == "success" for m in msgs)
    assert len(records(out)) == 2
    # No reducer and parallel siblings: not written, and each record says why.
    assert out["notes"] == "parent note"
    for record in records(out):
        assert "notes" in record["skipped_writes"]
    # The reducer key gets each child's own addition exactly once.
    assert sorted(out["findings"]) == sorted(["p1", "p2", "found by job a", "found by job b"])


def test_a_lone_child_writes_a_plain_key_back(run):
    out = run(writer_agent("job a"), start(notes="parent note", findings=["p1", "p2"]))
    assert out["notes"] == "note from job a"
    assert out["findings"] == ["p1", "p2", "found by job a"]
    assert not records(out)[0].get("skipped_writes")
