"""SubAgentMiddleware next to LangChain's own middleware, in both orders, on invoke and ainvoke.

Each case builds ``create_agent(middleware=[...])`` with the other
middleware before and after ``SubAgentMiddleware`` and checks the promise
that composition must keep: the child runs (or fails alone), and the
parent's result is what the middleware says it should be.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, get_type_hints

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
    TodoListMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain.tools import ToolRuntime
from langchain_core.exceptions import ModelAPIError, ModelRateLimitError
from langchain_core.tools import tool
from langchain.agents.middleware.types import PrivateStateAttr
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from helpers.background import started_ids, wait_for
from helpers.graphs import records, tool_messages, user
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware
from subagents.background._local import known_task
from subagents._boundary import child_state_schema
from subagents._settings import DelegationSettings

ANSWER = "The child's full report: " + "everything it found, in order. " * 3


@pytest.fixture(params=["subagents-first", "subagents-last"])
def order(request: pytest.FixtureRequest) -> str:
    return request.param


def compose(other: Any, order: str, settings: DelegationSettings = DelegationSettings(), **kwargs: Any) -> list[Any]:
    # A plain create_agent user hands the delegation middleware the list it gives create_agent.
    delegation = SubAgentMiddleware(settings=settings.updated(short_answer_threshold=0), model_middleware=[other],
                                    **kwargs)
    return [delegation, other] if order == "subagents-first" else [other, delegation]


def delegate(description: str, subagent_type: str = "general-purpose") -> list[Any]:
    return [
        {"tool_calls": [tool_call("task", description=description, subagent_type=subagent_type)]},
        "parent done",
    ]


def flaky(error: BaseException, answer: str, failures: int = 1):
    """A reply that raises ``error`` ``failures`` times, then answers."""
    seen = {"n": 0}

    def reply(_messages: Any) -> Any:
        seen["n"] += 1
        if seen["n"] <= failures:
            raise error
        return answer

    return reply


# -- state the child's inherited tools need --------------------------------------


def test_inherited_filesystem_tools_get_their_state(order, run):
    filesystem = pytest.importorskip("deepagents.middleware.filesystem")
    model = ScriptedChatModel(
        rules=[("write notes", [{"tool_calls": [tool_call("write_file", file_path="/notes.txt", content="hi")]},
                                ANSWER])],
        responses=delegate("write notes"),
    )
    agent = create_agent(model, [], middleware=compose(filesystem.FilesystemMiddleware(), order))
    out = run(agent, user("go"))
    (message,) = tool_messages(out)
    assert message.status == "success" and message.text == ANSWER.rstrip()
    assert "/notes.txt" in out["files"]


def test_a_long_child_answer_is_evicted_by_deepagents_filesystem_middleware(order, run):
    # Our task reply keeps a dict update (record and usage beside the ToolMessage) although the tool
    # node deep-copies it, because middleware like this one reads it as a dict: bench/README.md.
    filesystem = pytest.importorskip("deepagents.middleware.filesystem")
    long_answer = "The child's long report. " + "One finding after another, in detail. " * 60
    model = ScriptedChatModel(rules=[("long job", [long_answer])], responses=delegate("long job"))
    agent = create_agent(model, [], middleware=compose(
        filesystem.FilesystemMiddleware(tool_token_limit_before_evict=100), order))
    out = run(agent, user("go"))
    (message,) = tool_messages(out)
    assert message.text.startswith("Tool result too large") and len(message.text) < len(long_answer)
    (path,) = [p for p in out["files"] if "large_tool_results" in p]
    assert "One finding after another" in str(out["files"][path])
    (record,) = records(out)
    assert record["status"] == "completed" and record["result_chars"] == len(long_answer.rstrip())
    assert out["subagent_usage"]["tasks"] == 1


class ProjectState(AgentState):
    project: NotRequired[str]


@tool
def which_project(runtime: ToolRuntime[None, ProjectState]) -> str:
    """Name the current project."""
    return f"project is {runtime.state.get('project')}"


def test_custom_parent_state_reaches_a_declarative_child(run):
    model = ScriptedChatModel(
        rules=[("which", [{"tool_calls": [tool_call("which_project")]},
                          lambda messages: messages[-1].text + ". " + ANSWER])],
        responses=delegate("which project?"),
    )
    agent = create_agent(model, [which_project], middleware=[SubAgentMiddleware(settings=DelegationSettings.of(short_answer_threshold=0))],
                         state_schema=ProjectState)
    out = run(agent, {**user("go"), "project": "apollo"})
    assert tool_messages(out)[0].text.startswith("project is apollo.")


@tool
def which_project_untyped(runtime: ToolRuntime) -> str:
    """Name the current project (declaring no state of its own)."""
    return f"project is {runtime.state.get('project')}"


def test_create_deep_agent_state_schema_reaches_children(run):
    from deep_agent import create_deep_agent

    model = ScriptedChatModel(
        rules=[("which", [{"tool_calls": [tool_call("which_project_untyped")]},
                          lambda messages: messages[-1].text + ". " + ANSWER])],
        responses=delegate("which project?"),
    )
    agent = create_deep_agent(model, [which_project_untyped], state_schema=ProjectState,
    settings=DelegationSettings.of(short_answer_threshold=0))
    out = run(agent, {**user("go"), "project": "apollo"})
    assert tool_messages(out)[0].text.startswith("project is apollo.")


class Wide(AgentState):
    notes: NotRequired[Annotated[list[str], operator.add]]
    secret: NotRequired[Annotated[int, PrivateStateAttr]]
    todos: NotRequired[list[dict[str, Any]]]
    subagent_tasks: NotRequired[dict[str, Any]]


def test_child_state_keeps_reducers_and_drops_private_and_excluded_keys():
    from middleware._task_tool import EXCLUDED_STATE_KEYS

    schema = child_state_schema([], parent_schemas=[Wide], excluded=EXCLUDED_STATE_KEYS)
    hints = get_type_hints(schema, include_extras=True)
    assert {"messages", "notes"} <= set(hints)
    assert not {"secret", "todos", "subagent_tasks"} & set(hints)
    assert operator.add in hints["notes"].__args__[0].__metadata__
    assert child_state_schema([echo_tool], parent_schemas=[]) is None


@tool
def echo_tool(x: str) -> str:
    """Echo."""
    return x


# -- the parent's model-level middleware --------------------------------------------


def test_model_fallback_applies_to_an_inheriting_child(order, run):
    broken = ScriptedChatModel(default=ModelAPIError("primary down"), model_name="primary")
    backup = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegate("job"), model_name="backup")
    agent = create_agent(broken, [], middleware=compose(ModelFallbackMiddleware(backup), order))
    out = run(agent, user("go"))
    (message,) = tool_messages(out)
    assert message.status == "success" and message.text == ANSWER.rstrip()
    # The child was built on the configured model and fell back, as the parent did.
    assert any("job" in c["messages"][-1].text for c in backup.calls)


def test_without_model_middleware_a_plain_create_agent_child_calls_only_its_model(run):
    """LangChain exposes no public way to read a graph's middleware: what children inherit is passed."""
    broken = ScriptedChatModel(default=ModelAPIError("primary down"), model_name="primary")
    backup = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegate("job"), model_name="backup")
    delegation = SubAgentMiddleware(settings=DelegationSettings.of(short_answer_threshold=0))
    agent = create_agent(broken, [], middleware=[delegation, ModelFallbackMiddleware(backup)])
    (message,) = tool_messages(run(agent, user("go")))
    assert message.status == "error" and "primary down" in message.text


def test_only_model_level_middleware_of_the_list_reaches_children(run):
    parent = ScriptedChatModel(responses=delegate("job"))
    summarise = SummarizationMiddleware(model=parent, trigger=("tokens", 10_000))
    delegation = SubAgentMiddleware(model_middleware=[summarise],
    settings=DelegationSettings.of(short_answer_threshold=0))
    assert delegation.registry.inherited_middleware == (summarise,)
    child = delegation.registry.graph("general-purpose", parent_model=parent, parent_tools=[])
    assert "SummarizationMiddleware" not in str(child.get_graph().nodes)


def test_model_fallback_given_to_create_deep_agent_reaches_children(run):
    from deep_agent import create_deep_agent

    broken = ScriptedChatModel(default=ModelAPIError("primary down"), model_name="primary")
    backup = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegate("job"), model_name="backup")
    agent = create_deep_agent(broken, middleware=[ModelFallbackMiddleware(backup)],
    settings=DelegationSettings.of(short_answer_threshold=0))
    (message,) = tool_messages(run(agent, user("go")))
    assert message.status == "success" and message.text == ANSWER.rstrip()


def test_model_retry_applies_to_an_inheriting_child(order, run):
    model = ScriptedChatModel(
        rules=[("job", [flaky(ModelRateLimitError("slow down"), ANSWER)])], responses=delegate("job")
    )
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    out = run(create_agent(model, [], middleware=compose(retry, order)), user("go"))
    (message,) = tool_messages(out)
    assert message.status == "success" and message.text == ANSWER.rstrip()


def test_a_child_with_its_own_model_keeps_its_own_pipeline(order, run):
    parent = ScriptedChatModel(responses=delegate("job", "own"))
    own = ScriptedChatModel(default=ModelAPIError("own model down"))
    backup = ScriptedChatModel(default=ANSWER)
    agent = create_agent(
        parent, [],
        middleware=compose(ModelFallbackMiddleware(backup), order,
                           subagents=[{"name": "own", "description": "Own model.", "model": own}]),
    )
    (message,) = tool_messages(run(agent, user("go")))
    assert message.status == "error" and "own model down" in message.text
    assert backup.calls == []


# -- approvals, summarisation, tool-call limits, todos ------------------------------


def test_approval_on_task_pauses_and_resumes(order, run):
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegate("job"))
    hitl = HumanInTheLoopMiddleware(interrupt_on={"task": True})
    agent = create_agent(model, [], middleware=compose(hitl, order), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused = run(agent, user("go"), config)
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "task"
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert tool_messages(out)[0].text == ANSWER.rstrip()


def test_an_edited_task_call_gets_the_reviewers_notice_and_keeps_its_record(order, run):
    # The task reply keeps a dict update, copied by the tool node, because LangChain's approval middleware
    # adds its edit notice to a Command's ToolMessage only in a dict update: bench/README.md.
    model = ScriptedChatModel(rules=[("edited job", [ANSWER])], responses=delegate("first job"))
    hitl = HumanInTheLoopMiddleware(interrupt_on={"task": True})
    if not getattr(hitl, "edit_notice", None):
        pytest.skip("this LangChain's approval middleware adds no edit notice")
    agent = create_agent(model, [], middleware=compose(hitl, order), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, user("go"), config)
    edited = {"name": "task", "args": {"description": "edited job", "subagent_type": "general-purpose"}}
    out = run(agent, Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}), config)
    (message,) = tool_messages(out)
    assert message.text.startswith(hitl.edit_notice) and ANSWER.rstrip() in message.text
    (record,) = records(out)
    assert record["status"] == "completed" and record["description"] == "edited job"
    assert out["subagent_usage"]["tasks"] == 1


def test_summarisation_on_the_parent_composes(order, run):
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegate("job"), default="a summary")
    summarise = SummarizationMiddleware(model, trigger=("messages", 3), keep=("messages", 2))
    out = run(create_agent(model, [], middleware=compose(summarise, order)), user("go"))
    assert any(m.type == "tool" and m.text == ANSWER.rstrip() for m in out["messages"])
    assert out["messages"][-1].text == "parent done"


def test_tool_call_limit_on_task_stops_the_extra_delegation(order, run):
    model = ScriptedChatModel(
        rules=[("job", [ANSWER])],
        responses=[
            {"tool_calls": [tool_call("task", description="job one", subagent_type="general-purpose"),
                            tool_call("task", description="job two", subagent_type="general-purpose")]},
            "parent done",
        ],
    )
    limit = ToolCallLimitMiddleware(tool_name="task", run_limit=1)
    out = run(create_agent(model, [], middleware=compose(limit, order)), user("go"))
    statuses = sorted(m.status for m in tool_messages(out))
    assert statuses == ["error", "success"]
    assert len(records(out)) == 1


def test_todo_list_stays_with_the_parent(order, run):
    model = ScriptedChatModel(
        rules=[("job", [ANSWER])],
        responses=[
            {"tool_calls": [tool_call("write_todos", todos=[{"content": "x", "status": "pending"}])]},
            *delegate("job"),
        ],
    )
    out = run(create_agent(model, [], middleware=compose(TodoListMiddleware(), order)), user("go"))
    child = next(c for c in model.calls if c["messages"][-1].text == "job")
    assert "write_todos" not in child["tools"]
    assert out["todos"] == [{"content": "x", "status": "pending"}]


def test_tool_retry_on_task_sees_one_error_result(order, run):
    model = ScriptedChatModel(rules=[("job", [ValueError("child broke")])], responses=delegate("job"))
    retry = ToolRetryMiddleware(tools=["task"], max_retries=2, initial_delay=0, jitter=False)
    out = run(create_agent(model, [], middleware=compose(retry, order)), user("go"))
    (message,) = tool_messages(out)
    assert message.status == "error" and message.text.startswith("Subagent 'general-purpose' failed:")
    # A failed child is already a result: the task tool does not raise, so it is not retried.
    assert sum(c["messages"][-1].text == "job" for c in model.calls) == 1


# -- a spec's own retries ---------------------------------------------------------------


def retrying_agent(reply: Any, retries: int) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(rules=[("job", [reply])], responses=delegate("job", "r"))
    spec = {"name": "r", "description": "Retries.", "retries": retries}
    return create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        short_answer_threshold=0,
    ))]), model


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    import subagents._builder as mm

    monkeypatch.setattr(mm, "RETRY_INITIAL_DELAY_S", 0.0)


@pytest.mark.parametrize(
    "error",
    [ModelRateLimitError("429"), ModelAPIError("503"), TimeoutError("read timed out")],
    ids=["rate-limit", "server-error", "timeout"],
)
def test_spec_retries_recover_from_transient_errors(run, error):
    agent, _ = retrying_agent(flaky(error, ANSWER, failures=2), retries=2)
    (message,) = tool_messages(run(agent, user("go")))
    assert message.status == "success" and message.text == ANSWER.rstrip()


def test_spec_retries_never_retry_a_permanent_error(run):
    agent, model = retrying_agent(flaky(ValueError("bad request"), ANSWER), retries=3)
    (message,) = tool_messages(run(agent, user("go")))
    assert message.status == "error" and "bad request" in message.text
    assert sum(c["messages"][-1].text == "job" for c in model.calls) == 1


def test_spent_retries_give_the_parent_one_error_result(run):
    agent, model = retrying_agent(flaky(ModelRateLimitError("429"), ANSWER, failures=5), retries=2)
    out = run(agent, user("go"))
    (message,) = tool_messages(out)
    assert message.status == "error" and message.text.startswith("Subagent 'r' failed:")
    assert sum(c["messages"][-1].text == "job" for c in model.calls) == 3


@pytest.mark.parametrize("bad", [-1, 11, "2", True])
def test_retries_must_be_a_small_count(bad):
    from subagents import SpecError, coerce_spec

    with pytest.raises(SpecError, match="field 'retries'"):
        coerce_spec({"name": "r", "description": "R.", "retries": bad})


# -- background children inherit the parent's model pipeline too ------------------------


def test_background_children_inherit_the_model_fallback(order, run):
    broken = ScriptedChatModel(default=ModelAPIError("primary down"), model_name="primary")
    # The parent's script is keyed on its prompt: a notice of the finished task (a turn of its own, when the
    # task beats the parent's next call) gets a plain answer, not the script's first reply again.
    backup = ScriptedChatModel(
        rules=[("bg job", [ANSWER]),
               ("START-BG", [{"tool_calls": [tool_call("start_async_task", description="bg job",
                                                 subagent_type="general-purpose")]}, "started"])],
        default="noted",
        model_name="backup",
    )
    fallback = ModelFallbackMiddleware(backup)
    background = BackgroundSubagentMiddleware(model_middleware=[fallback],
    settings=DelegationSettings.of(short_answer_threshold=0))
    middleware = [background, fallback] if order == "subagents-first" else [fallback, background]
    agent = create_agent(broken, [], middleware=middleware, checkpointer=InMemorySaver())
    out = run(agent, user("START-BG"), {"configurable": {"thread_id": f"bg-{order}-{run.mode}"}})
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: known_task(task_id).fields["status"] in ("completed", "error"))
    assert known_task(task_id).fields["status"] == "completed"
    assert known_task(task_id).fields["result"] == ANSWER.rstrip()
