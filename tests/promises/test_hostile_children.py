"""Children and calls that still took the parent down, or left a gap in the records, until this file.

Each test is one attack, run on ``invoke`` and ``ainvoke`` (the ``run`` fixture):
the library's own error raised by a child's tool, an error whose attributes
raise, a write-back whose copy raises a ``BaseException``, sibling write-backs
across a replay and a restart, hostile call ids and arguments, and a private
key the agent's own schema declares.
"""

from __future__ import annotations

import json
import operator
import threading
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from helpers.registry import UniqueStateMiddleware, register

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from middleware.task_tool import MAX_ARGUMENT_DEPTH
from subagents import CompiledSubagent, SubagentError, SubagentSpec, get_transcript


class Boom(BaseException):
    """Not cancellation (pytest's Failed, gevent's Timeout, trio's Cancelled ...)."""


def _delegating(*calls: tuple[str, str], rules: list[Any] = ()) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=list(rules),
        responses=[{"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
                   "parent carried on"])


# -- the library's own error, raised by a child's tool ------------------------------------------


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


# -- errors whose attributes raise ---------------------------------------------------------------


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


# -- write-backs ---------------------------------------------------------------------------------


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
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], general_purpose=False)],
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


# -- hostile calls -------------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def provider_usage(monkeypatch):
    """Usage as a real provider reports it: the scripted model's own estimate would json.dumps the arguments."""
    import deep_agent.testing as testing

    monkeypatch.setattr(testing, "_usage", lambda *_: testing.UsageMetadata(input_tokens=1, output_tokens=1,
                                                                            total_tokens=2))


def test_task_arguments_nested_past_the_limit_are_answered_and_recorded(run, provider_usage):
    """At about 990 levels (what a provider's JSON parser still reads) LangChain's str() of them recursed too deep."""
    deep = _nested(989)
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": deep, "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"], default="x"))
    out = run(agent, user("go"))
    (answer,) = tool_messages(out)
    (record,) = records(out)
    assert out["messages"][-1].content == "parent carried on"
    assert answer.status == "error" and f"more than {MAX_ARGUMENT_DEPTH} levels" in answer.content
    assert (record["stop_reason"], record["tool_call_id"]) == ("invalid_call", "c1")


def test_arguments_at_the_limit_still_reach_validation(run):
    nested = _nested(MAX_ARGUMENT_DEPTH - 2)
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": nested, "subagent_type": "general-purpose"}}])
    out = run(create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"])), user("go"))
    (answer,) = tool_messages(out)
    assert "levels" not in answer.content and "description" in answer.content  # pydantic's own complaint


def _create(name: str, call_id: str | None, prompt: str = "Answer.") -> dict[str, Any]:
    return {"name": "create_subagent", "id": call_id, "type": "tool_call",
            "args": {"name": name, "description": f"{name} agent", "system_prompt": prompt}}


def test_parallel_creations_sharing_one_call_id_still_respect_the_cap(run):
    message = AIMessage(content="", tool_calls=[_create("alpha", "c0"), _create("beta", "c0"), _create("gamma", "c0")])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]),
                              dynamic_subagents=True, max_dynamic_subagents=1)
    out = run(agent, user("go"))
    assert list(out["dynamic_subagents"]) == ["alpha"]
    answers = [m.content for m in tool_messages(out)]
    assert len(answers) == 3 and sum(a.startswith("Created") for a in answers) == 1
    assert len({m.tool_call_id for m in tool_messages(out)}) == 3


def test_an_id_less_create_subagent_call_is_answered(run):
    message = AIMessage(content="", tool_calls=[_create("alpha", None)])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]), dynamic_subagents=True)
    out = run(agent, user("go"))
    assert out["messages"][-1].content == "parent carried on" and list(out["dynamic_subagents"]) == ["alpha"]


def test_an_invalid_calls_record_has_an_empty_transcript_that_reads_back(run):
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": 5, "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    (record,) = records(run(agent, user("go"), config))
    assert record["transcript"] == "none:"
    assert get_transcript(agent, config, record["id"]) == []


def test_a_call_id_with_a_lone_surrogate_still_delegates(run):
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "call_\ud800", "type": "tool_call",
                                                 "args": {"description": "job", "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(rules=[("job", ["child ok"])], responses=[message, "parent carried on"]))
    (record,) = records(run(agent, user("go")))
    assert (record["status"], record["result"]) == ("completed", "child ok")


# -- a private key of the agent's own schema -----------------------------------------------------


class _WithSecret(AgentState):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]


def test_a_key_the_agents_own_state_schema_marks_private_never_crosses(run):
    @tool
    def login(runtime: ToolRuntime) -> Command:
        """Log in, keeping a token in private state."""
        return Command(update={"secret": "parent-only token",
                               "messages": [ToolMessage("logged in", tool_call_id=runtime.tool_call_id)]})

    def child(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [*state["messages"], AIMessage(json.dumps({"saw": state.get("secret")}))],
                "secret": "overwritten by the child"}

    seen: dict[str, Any] = {}

    class Peek(AgentMiddleware):
        def after_agent(self, state, runtime):
            seen["secret"] = state.get("secret")

    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("login")]},
                                         {"tool_calls": [tool_call("task", description="peek", subagent_type="peeker")]},
                                         "parent carried on"])
    agent = create_deep_agent(model, [login], state_schema=_WithSecret, middleware=[Peek()], subagents=[
        CompiledSubagent(name="peeker", description="peeks", runnable=RunnableLambda(child))])
    out = run(agent, user("go"))
    assert json.loads(tool_messages(out)[-1].content) == {"saw": None}
    assert seen["secret"] == "parent-only token"


def test_private_state_keys_reads_a_state_schema_as_it_reads_middleware():
    from subagents.boundary import private_state_keys

    assert "secret" in private_state_keys([_WithSecret])


# -- second pass: the fixes above, attacked --------------------------------------------------------


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
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], general_purpose=False)],
                         state_schema=_Findings, checkpointer=_StepReadFails(how))
    out = run(agent, {**user("go"), "findings": []}, {"configurable": {"thread_id": "t"}})
    assert sorted(out["findings"]) == ["found by job a", "found by job b"] and len(records(out)) == 2


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


def test_a_valid_call_sharing_its_id_with_an_unreadable_one_still_runs(run):
    message = AIMessage(content="", tool_calls=[
        {"name": "task", "args": {"description": "job one", "subagent_type": "general-purpose"}, "id": "0",
         "type": "tool_call"}], invalid_tool_calls=[
        {"name": "task", "args": '{"description": "job two", ', "id": "0", "error": "bad json",
         "type": "invalid_tool_call"}])
    agent = create_deep_agent(ScriptedChatModel(rules=[("job", ["child did it"])],
                                                responses=[message, "parent carried on"]))
    out = run(agent, user("go"))
    by_reason = {r["stop_reason"]: r for r in records(out)}
    assert by_reason["completed"]["result"] == "child did it" and "invalid_call" in by_reason
    assert len({m.tool_call_id for m in tool_messages(out)}) == 2


def test_create_subagent_arguments_nested_past_the_limit_are_answered(run, provider_usage):
    deep = _nested(989)
    message = AIMessage(content="", tool_calls=[{"name": "create_subagent", "id": "c1", "type": "tool_call", "args": {
        "name": "helper", "description": "d", "system_prompt": "p", "tools": deep}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]), dynamic_subagents=True)
    out = run(agent, user("go"))
    (answer,) = tool_messages(out)
    assert out["messages"][-1].content == "parent carried on"
    assert answer.status == "error" and f"more than {MAX_ARGUMENT_DEPTH} levels" in answer.content
