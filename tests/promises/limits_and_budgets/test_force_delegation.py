"""Forced delegation, the ``subagent_type`` enum and the per-run delegation cap, on scripted models."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.graphs import parent_script, records, tool_messages, user
from helpers.server_like import ServerLikeModel
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import ForceDelegation, SubAgentMiddleware
from middleware._limits import DelegationLimit, truncated_reply
from middleware._task_tool import task_call_json_schema
from subagents._settings import DelegationSettings

SPECS = [
    {"name": "alpha", "description": "A.", "system_prompt": "You are alpha."},
    {"name": "beta", "description": "B.", "system_prompt": "You are beta."},
]


def _agent(parent: ScriptedChatModel, settings: DelegationSettings = DelegationSettings(), **options: Any) -> Any:
    children = [{**s, "model": ScriptedChatModel(default=f"{s['name']} answer")} for s in SPECS]
    return create_deep_agent(parent, subagents=children,
                             settings=settings.updated(short_answer_threshold=0), **options)


# -- the enum ------------------------------------------------------------------


def test_the_task_tool_schema_lists_the_agents_as_an_enum_when_asked():
    middleware = SubAgentMiddleware(SPECS, settings=DelegationSettings.of(name_enum=True))
    schema = convert_to_openai_tool(middleware.tools[0])["function"]["parameters"]
    assert schema["properties"]["subagent_type"]["enum"] == ["general-purpose", "alpha", "beta"]
    # By default the names are in <available_agents> only: the schema takes any string.
    plain = convert_to_openai_tool(SubAgentMiddleware(SPECS).tools[0])["function"]["parameters"]
    assert "enum" not in plain["properties"]["subagent_type"]


class _SchemaSeen(ScriptedChatModel):
    """Keeps the ``subagent_type`` field of the ``task`` schema the parent's model was sent."""

    field: dict[str, Any] = {}

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        (task,) = [t for t in tools if t["function"]["name"] == "task"]
        self.field = task["function"]["parameters"]["properties"]["subagent_type"]
        return super()._respond(messages, tools)


@pytest.mark.parametrize("name_enum", [False, True])
def test_create_deep_agent_sends_the_enum_only_when_asked(run, name_enum):
    parent = _SchemaSeen(responses=["done"])
    run(create_deep_agent(parent, subagents=SPECS, settings=DelegationSettings.of(
        general_purpose=False, name_enum=name_enum,
    )), user("hi"))
    assert parent.field.get("enum") == (["alpha", "beta"] if name_enum else None)


def test_an_unknown_name_from_a_provider_that_ignores_enums_still_gets_the_readable_error(run):
    state = run(_agent(ScriptedChatModel(responses=parent_script(("x", "function")))), user("go"))
    [message] = tool_messages(state)
    assert message.status == "error" and message.text.startswith("Subagent 'function' failed:")
    assert "alpha" in message.text and records(state)[0]["status"] == "error"


def test_the_forced_schema_puts_the_agent_first_and_can_bound_the_description():
    schema = task_call_json_schema(["a"], description_max_chars=30)
    assert list(schema["properties"]) == ["subagent_type", "description"]
    assert schema["properties"]["description"]["maxLength"] == 30
    assert schema["additionalProperties"] is False and schema["required"] == ["subagent_type", "description"]


def test_the_forced_schema_cannot_be_answered_with_an_empty_task():
    """A grammar built from the schema (llama.cpp's) could write `"description": ""`: a call with no task."""
    import jsonschema

    schema = task_call_json_schema(["a"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"subagent_type": "a", "description": ""}, schema)
    jsonschema.validate({"subagent_type": "a", "description": "x"}, schema)


# -- forced delegation -----------------------------------------------------------


def test_response_format_forcing_turns_the_json_reply_into_a_task_call(run):
    parent = ServerLikeModel(responses=["never used", "parent done"])
    state = run(_agent(parent, settings=DelegationSettings.of(
        force_delegation=ForceDelegation(mechanism="response_format"),
    )), user("hello"))
    [record] = records(state)
    assert record["status"] == "completed" and record["agent_type"] == "beta"
    assert record["description"] == "forced work" and record["result"] == "beta answer"
    assert state["messages"][-1].text == "parent done"
    first, second = parent.settings
    assert first["response_format"]["json_schema"]["schema"]["properties"]["subagent_type"]["enum"] == [
        "general-purpose", "alpha", "beta"]
    assert first["tools"] == []
    assert second["response_format"] is None and "task" in second["tools"]  # later calls are free


@pytest.mark.parametrize(("mechanism", "choice"), [("tool_choice", "task"), ("required", "required")])
def test_tool_choice_forcing_offers_only_task_on_the_first_call(run, mechanism, choice):
    parent = ServerLikeModel(honours_tool_choice=True, responses=["ignored", "parent done"])
    state = run(_agent(parent, settings=DelegationSettings.of(force_delegation=ForceDelegation(mechanism=mechanism))), user("hello"))
    assert records(state)[0]["status"] == "completed"
    first, second = parent.settings
    assert first["tools"] == ["task"]
    assert first["tool_choice"] in (choice, {"type": "function", "function": {"name": choice}})
    assert second["tool_choice"] is None


def test_auto_falls_back_to_response_format_once_and_remembers(run):
    parent = ServerLikeModel(responses=["plain text", "parent done"])
    agent = _agent(parent, checkpointer=InMemorySaver(), settings=DelegationSettings.of(
        force_delegation=True,
    ))
    config = {"configurable": {"thread_id": "t"}}
    run(agent, user("first"), config)
    assert [bool(s["response_format"]) for s in parent.settings] == [False, True, False]
    parent.settings.clear()
    state = run(agent, user("second"), config)
    assert [bool(s["response_format"]) for s in parent.settings] == [True, False]
    assert [r["status"] for r in records(state)] == ["completed", "completed"]


def test_auto_falls_back_when_the_server_rejects_tool_choice(run):
    class Rejecting(ServerLikeModel):
        def _server_reply(self, messages: list[Any], kwargs: dict[str, Any]) -> ChatResult | None:
            if kwargs.get("tool_choice") == "task":
                raise ValueError("HTTP 400: tool_choice not supported")
            return super()._server_reply(messages, kwargs)

    state = run(_agent(Rejecting(responses=["x", "parent done"]), settings=DelegationSettings.of(
        force_delegation=True,
    )), user("hello"))
    assert [r["agent_type"] for r in records(state)] == ["beta"]


def test_an_explicit_mechanism_lets_the_servers_error_through(run):
    class Rejecting(ServerLikeModel):
        def _server_reply(self, messages: list[Any], kwargs: dict[str, Any]) -> ChatResult | None:
            raise ValueError("HTTP 400: tool_choice not supported")

    agent = _agent(Rejecting(responses=["x"]), settings=DelegationSettings.of(
        force_delegation=ForceDelegation(mechanism="tool_choice"),
    ))
    with pytest.raises(ValueError, match="HTTP 400"):
        run(agent, user("hello"))


def test_auto_keeps_tool_choice_when_the_provider_honours_it(run):
    parent = ServerLikeModel(honours_tool_choice=True, responses=["ignored", "parent done"])
    state = run(_agent(parent, settings=DelegationSettings.of(force_delegation=True)), user("hello"))
    assert [r["agent_type"] for r in records(state)] == ["alpha"]
    assert not any(s["response_format"] for s in parent.settings)


def test_forcing_a_named_agent_narrows_the_enum_to_it(run):
    parent = ServerLikeModel(responses=["x", "parent done"], json_reply={"subagent_type": "beta", "description": "d"})
    state = run(_agent(parent, settings=DelegationSettings.of(
        force_delegation=ForceDelegation(agent="beta", mechanism="response_format"),
    )),
                user("hello"))
    schema = parent.settings[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["subagent_type"]["enum"] == ["beta"]
    assert records(state)[0]["agent_type"] == "beta"


def test_forcing_an_unknown_agent_is_an_error_naming_the_option():
    with pytest.raises(ValueError, match="force_delegation: unknown subagent 'nobody'"):
        SubAgentMiddleware(SPECS, settings=DelegationSettings.of(force_delegation="nobody"))
    with pytest.raises(ValueError, match="force_delegation: invalid field"):
        SubAgentMiddleware(SPECS, settings=DelegationSettings.of(force_delegation={"mechanism": "telepathy"}))
    with pytest.raises(TypeError, match="force_delegation"):
        SubAgentMiddleware(SPECS, settings=DelegationSettings.of(force_delegation=3.5))  # type: ignore[arg-type]


def test_a_reply_that_is_not_a_task_call_is_left_as_the_answer(run):
    parent = ServerLikeModel(json_reply="not json at all", responses=["x"])
    state = run(_agent(parent, settings=DelegationSettings.of(
        force_delegation=ForceDelegation(mechanism="response_format"),
    )), user("hello"))
    assert records(state) == [] and state["messages"][-1].text == "not json at all"


def test_a_json_reply_cut_short_by_the_token_limit_still_delegates(run):
    from openai import LengthFinishReasonError
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": '{"subagent_type": "alpha", "description": "wri'}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    })
    parent = ServerLikeModel(json_reply=LengthFinishReasonError(completion=completion), responses=["x", "done"])
    state = run(_agent(parent, settings=DelegationSettings.of(
        force_delegation=ForceDelegation(mechanism="response_format"),
    )), user("hello"))
    [record] = records(state)
    assert record["agent_type"] == "alpha" and record["description"] == "wri" and record["status"] == "completed"
    assert state["messages"][1].usage_metadata["output_tokens"] == 7


def test_an_error_without_a_partial_reply_is_not_swallowed():
    assert truncated_reply(RuntimeError("boom")) is None


# -- the delegation cap ------------------------------------------------------------


def test_past_max_delegations_task_answers_an_error_and_is_withdrawn(run):
    calls = [{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="alpha")]} for i in range(3)]
    parent = ScriptedChatModel(responses=[*calls, "parent done"])
    state = run(_agent(parent, settings=DelegationSettings.of(max_delegations=2)), user("go"))
    statuses = [r["status"] for r in sorted(records(state), key=lambda r: r["description"])]
    assert statuses == ["completed", "completed", "error"]
    refused = next(r for r in records(state) if r["status"] == "error")
    assert "max_delegations=2" in refused["error"]
    assert tool_messages(state)[-1].text.startswith("Subagent 'alpha' failed: delegation limit reached")
    assert ["task" in c["tools"] for c in parent.calls] == [True, True, False, False]
    assert state["messages"][-1].text == "parent done"


def test_parallel_calls_past_the_cap_are_refused_in_order(run):
    parent = ScriptedChatModel(responses=parent_script(("one", "alpha"), ("two", "beta"), ("three", "alpha")))
    state = run(_agent(parent, settings=DelegationSettings.of(max_delegations=2)), user("go"))
    by_description = {r["description"]: r["status"] for r in records(state)}
    assert by_description == {"one": "completed", "two": "completed", "three": "error"}


def test_the_count_starts_again_with_each_user_message(run):
    parent = ScriptedChatModel(responses=parent_script(("one", "alpha")))
    agent = _agent(parent, checkpointer=InMemorySaver(), settings=DelegationSettings.of(
        max_delegations=1,
    ))
    config = {"configurable": {"thread_id": "t"}}
    run(agent, user("first"), config)
    state = run(agent, user("second"), config)
    assert [r["status"] for r in records(state)] == ["completed", "completed"]


@pytest.mark.parametrize("bad", [0, -1, True])
def test_max_delegations_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_delegations"):
        DelegationLimit(bad)


def test_no_cap_when_max_delegations_is_none():
    assert SubAgentMiddleware(settings=DelegationSettings.of(max_delegations=None)).delegation_limit is None


@given(batches=st.lists(st.lists(st.sampled_from(["task", "search"]), max_size=4), max_size=6),
       cap=st.integers(min_value=1, max_value=6), earlier=st.integers(min_value=0, max_value=4))
def test_exactly_the_first_max_delegations_calls_of_a_run_may_delegate(batches, cap, earlier):
    limit = DelegationLimit(cap)
    before = [AIMessage("", tool_calls=[{"name": "task", "args": {}, "id": f"old{i}"} for i in range(earlier)])]
    messages: list[Any] = [*before, HumanMessage("new run")]
    ids = []
    for b, names in enumerate(batches):
        calls = [{"name": n, "args": {}, "id": f"c{b}_{i}"} for i, n in enumerate(names)]
        messages.append(AIMessage("", tool_calls=calls))
        ids += [c["id"] for c in calls if c["name"] == "task"]
    allowed = [i for i in ids if limit.refusal(messages, i) is None]
    assert allowed == ids[:cap]
    assert limit.exhausted(messages) == (len(ids) >= cap)
