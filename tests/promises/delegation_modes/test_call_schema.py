"""A typed result for one call: ``output_schema`` on ``task`` and deepagents' config key."""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents._builder import (
    MAX_SCHEMA_CHARS,
    OUTPUT_SCHEMA_RETRIES,
    SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY,
    OutputSchemaError,
    call_format,
)
from subagents._registry import GraphCache
from subagents._settings import DelegationSettings

VERDICT = {
    "type": "object",
    "title": "Verdict",
    "properties": {"verdict": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["verdict", "confidence"],
}
GOOD = {"tool_calls": [tool_call("Verdict", verdict="yes", confidence=0.9)]}
BAD = {"tool_calls": [tool_call("Verdict", verdict="yes", confidence="high")]}


def typed_task(description: str, agent: str, schema=VERDICT) -> list:
    args = {"description": description, "subagent_type": agent}
    if schema is not None:
        args["output_schema"] = schema
    return [{"tool_calls": [tool_call("task", **args)]}, "parent done"]


def judge_agent(model, settings=DelegationSettings.of(structured_results=True), **kwargs):
    return create_deep_agent(
        model,
        subagents=[{"name": "judge", "description": "judges", "system_prompt": "Judge."}],
        settings=settings,
        **kwargs,
    )


def test_task_keeps_two_arguments_by_default_and_refuses_output_schema(run):
    model = ScriptedChatModel(responses=typed_task("judge it", "judge"))
    out = run(judge_agent(model, settings=DelegationSettings.of(structured_results=False)), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "output_schema" in msg.content
    # No child ran; the refused call is recorded as an invalid call.
    (record,) = records(out)
    assert record["stop_reason"] == "invalid_call" and record["model_calls"] == 0
    schema = SubAgentMiddleware().tools[0].args
    assert set(schema) == {"description", "subagent_type"}


def test_structured_results_offers_output_schema_on_task():
    (task,) = SubAgentMiddleware(settings=DelegationSettings.of(structured_results=True)).tools
    assert set(task.args) == {"description", "subagent_type", "output_schema"}
    assert "output_schema" in task.description


def test_per_call_schema_returns_json_in_that_shape(run):
    model = ScriptedChatModel(rules=[("judge it", [GOOD])], responses=typed_task("judge it", "judge"))
    out = run(judge_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "success"
    assert json.loads(msg.content) == {"verdict": "yes", "confidence": 0.9}
    (record,) = records(out)
    assert record["status"] == "completed" and record["output_schema"] == "Verdict"
    child = next(c for c in model.calls if c["messages"][-1].text == "judge it")
    assert "Verdict" in child["tools"]  # offered as LangChain's structured-output tool


def test_invalid_answer_is_retried_then_accepted(run):
    model = ScriptedChatModel(rules=[("judge it", [BAD, GOOD])], responses=typed_task("judge it", "judge"))
    out = run(judge_agent(model), user("go"))
    assert json.loads(tool_messages(out)[0].content)["confidence"] == 0.9
    retry = next(c for c in model.calls if len(c["messages"]) > 2 and c["messages"][1].text == "judge it")
    assert "$.confidence: 'high' is not of type 'number'" in retry["messages"][-1].text


def test_a_child_that_never_matches_fails_naming_the_violation(run):
    model = ScriptedChatModel(
        rules=[("judge it", [BAD] * 10)],
        responses=typed_task("judge it", "judge"),
    )
    out = run(judge_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'judge' failed:")
    assert f"'Verdict' after {OUTPUT_SCHEMA_RETRIES + 1} attempts" in msg.content
    assert "$.confidence: 'high' is not of type 'number'" in msg.content
    child_calls = [c for c in model.calls if c["messages"][1].text == "judge it"]
    assert len(child_calls) == OUTPUT_SCHEMA_RETRIES + 1
    assert out["messages"][-1].content == "parent done"
    assert records(out)[0]["status"] == "error"


def test_a_plain_text_answer_fails_the_typed_call(run):
    model = ScriptedChatModel(rules=[("judge it", ["yes, probably"])], responses=typed_task("judge it", "judge"))
    out = run(judge_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "answered in plain text instead of calling its output tool 'Verdict'" in msg.content


def test_a_missing_required_field_is_named(run):
    missing = {"tool_calls": [tool_call("Verdict", verdict="yes")]}
    model = ScriptedChatModel(rules=[("judge it", [missing] * 5)], responses=typed_task("judge it", "judge"))
    out = run(judge_agent(model), user("go"))
    assert "'confidence' is a required property" in tool_messages(out)[0].content


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "array", "items": {}}, 'top-level "type": "object"'),
        ({"type": "string"}, 'top-level "type": "object"'),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema at properties/a/type"),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema at required"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}}},
         "'$ref' is not accepted in a schema written in the call"),
    ],
)
def test_a_bad_schema_fails_that_call_naming_output_schema(run, schema, expected):
    model = ScriptedChatModel(responses=typed_task("judge it", "judge", schema))
    out = run(judge_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and msg.content.startswith("Subagent 'judge' failed: output_schema")
    assert expected in msg.content
    assert not any(c["messages"][-1].text == "judge it" for c in model.calls)  # no child ran


def test_a_schema_without_a_type_is_taken_as_an_object(run):
    untyped = {k: v for k, v in VERDICT.items() if k != "type"}
    model = ScriptedChatModel(rules=[("judge it", [GOOD])], responses=typed_task("judge it", "judge", untyped))
    out = run(judge_agent(model), user("go"))
    assert json.loads(tool_messages(out)[0].content) == {"verdict": "yes", "confidence": 0.9}


def test_a_huge_schema_is_refused_without_echoing_it():
    schema = {"type": "object", "description": "x" * (MAX_SCHEMA_CHARS + 1)}
    with pytest.raises(OutputSchemaError, match="at most") as info:
        call_format(schema)
    assert len(str(info.value)) < 200


def test_a_developers_schema_may_refer_only_inside_itself():
    with pytest.raises(OutputSchemaError, match="only local \\$ref values"):
        call_format({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/a.json"}}})


def test_a_self_referencing_schema_fails_the_call_cleanly(run):
    # A developer's schema (the config key): one the model writes may hold no $ref at all.
    looping = {"type": "object", "title": "Loop", "properties": {"x": {"$ref": "#/$defs/a"}},
               "$defs": {"a": {"$ref": "#/$defs/a"}}}
    model = ScriptedChatModel(rules=[("judge it", [{"tool_calls": [tool_call("Loop", x=1)]}] * 5)],
                              responses=typed_task("judge it", "judge", None))
    out = run(judge_agent(model), user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: looping}})
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "loop without end" in msg.content
    assert out["messages"][-1].content == "parent done"


def test_a_title_naming_a_delegation_tool_is_renamed():
    assert call_format({**VERDICT, "title": "task"}).label == "task_output"
    assert call_format({**VERDICT, "title": "My verdict!"}).label == "My_verdict"
    assert call_format({k: v for k, v in VERDICT.items() if k != "title"}).label == "structured_output"


def test_a_spec_keeps_its_own_response_format_unless_a_call_overrides_it(run):
    class Score(BaseModel):
        score: int

    model = ScriptedChatModel(
        rules=[
            ("plain", [{"tool_calls": [tool_call("Score", score=3)]}]),
            ("typed", [GOOD]),
        ],
        responses=[
            {"tool_calls": [tool_call("task", description="plain", subagent_type="scorer"),
                            tool_call("task", description="typed", subagent_type="scorer",
                                      output_schema=VERDICT)]},
            "parent done",
        ],
    )
    agent = create_deep_agent(
        model,
        subagents=[{"name": "scorer", "description": "scores", "response_format": Score}],
        settings=DelegationSettings.of(structured_results=True),
    )
    out = run(agent, user("go"))
    answers = sorted(json.loads(m.content).__repr__() for m in tool_messages(out))
    assert answers == sorted([repr({"score": 3}), repr({"verdict": "yes", "confidence": 0.9})])


class CState(TypedDict):
    messages: Annotated[list, add_messages]


def _compiled():
    g = StateGraph(CState)
    g.add_node("n", lambda s: {"messages": [AIMessage("fixed answer")]})
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile()


def test_a_per_call_schema_for_a_compiled_subagent_is_refused_clearly(run):
    model = ScriptedChatModel(responses=typed_task("judge it", "fixed"))
    agent = create_deep_agent(
        model,
        subagents=[{"name": "fixed", "description": "d", "runnable": _compiled()}],
        settings=DelegationSettings.of(structured_results=True),
    )
    out = run(agent, user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'fixed' failed:")
    assert "compiled subagent 'fixed'" in msg.content and "response_format" in msg.content


class Verdict(BaseModel):
    verdict: str
    confidence: float


def test_config_key_gives_every_call_of_the_run_a_response_format(run):
    model = ScriptedChatModel(rules=[("judge it", [GOOD])], responses=typed_task("judge it", "judge", None))
    agent = judge_agent(model, settings=DelegationSettings.of(structured_results=False))
    out = run(agent, user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: Verdict}})
    assert json.loads(tool_messages(out)[0].content) == {"verdict": "yes", "confidence": 0.9}
    assert records(out)[0]["output_schema"] == "Verdict"


@pytest.mark.parametrize("schema", [Verdict, VERDICT], ids=["model", "json-schema"])
def test_config_key_takes_langchains_auto_strategy(schema, run):
    from langchain.agents.structured_output import AutoStrategy

    model = ScriptedChatModel(rules=[("judge it", [GOOD])], responses=typed_task("judge it", "judge", None))
    agent = judge_agent(model, settings=DelegationSettings.of(structured_results=False))
    out = run(agent, user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: AutoStrategy(schema)}})
    assert json.loads(tool_messages(out)[0].content) == {"verdict": "yes", "confidence": 0.9}
    assert records(out)[0]["output_schema"] == "Verdict"


def test_config_key_json_schema_shares_the_argument_path(run):
    model = ScriptedChatModel(rules=[("judge it", [BAD] * 5)], responses=typed_task("judge it", "judge", None))
    out = run(judge_agent(model), user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: VERDICT}})
    assert "after 3 attempts: $.confidence" in tool_messages(out)[0].content


def test_config_key_with_a_pydantic_model_also_bounds_retries(run):
    model = ScriptedChatModel(rules=[("judge it", [BAD] * 5)], responses=typed_task("judge it", "judge", None))
    out = run(judge_agent(model), user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: Verdict}})
    msg = tool_messages(out)[0]
    assert msg.status == "error" and "'Verdict' after 3 attempts" in msg.content
    assert "confidence" in msg.content


def test_config_key_for_a_compiled_subagent_is_refused(run):
    model = ScriptedChatModel(responses=typed_task("judge it", "fixed", None))
    agent = create_deep_agent(model, subagents=[{"name": "fixed", "description": "d", "runnable": _compiled()}])
    out = run(agent, user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: Verdict}})
    assert "compiled subagent 'fixed'" in tool_messages(out)[0].content


def test_the_argument_wins_over_the_config_key(run):
    model = ScriptedChatModel(rules=[("judge it", [GOOD])], responses=typed_task("judge it", "judge"))
    other = {"type": "object", "title": "Other", "properties": {"x": {"type": "string"}}}
    out = run(judge_agent(model), user("go"), {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: other}})
    assert records(out)[0]["output_schema"] == "Verdict"


def test_the_config_key_is_deepagents_own():
    deepagents = pytest.importorskip("deepagents.middleware.subagents")
    assert SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY == deepagents.SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY


def test_one_graph_per_schema_is_built_and_reused():
    model = ScriptedChatModel(
        rules=[("judge 3", ["a plain answer"]), ("judge", [GOOD])],
        responses=[
            {"tool_calls": [tool_call("task", description="judge 1", subagent_type="judge", output_schema=VERDICT),
                            tool_call("task", description="judge 2", subagent_type="judge",
                                      output_schema=dict(reversed(list(VERDICT.items())))),
                            tool_call("task", description="judge 3", subagent_type="judge")]},
            "parent done",
        ],
    )
    mw = SubAgentMiddleware([{"name": "judge", "description": "judges"}],
                            model=model, tools=[], settings=DelegationSettings.of(structured_results=True))
    from langchain.agents import create_agent

    out = create_agent(model, middleware=[mw]).invoke(user("go"))
    assert [r["status"] for r in records(out)] == ["completed"] * 3
    assert len(mw.registry.call_graphs) == 1  # key order does not make a new schema
    assert mw.registry.built == {"judge"}  # the plain call used the declared graph


def test_the_graph_cache_is_bounded():
    cache = GraphCache(max_graphs=2)
    for i in range(5):
        cache.get(i, lambda i=i: f"graph {i}")
    assert len(cache) == 2 and cache.get(4, lambda: "rebuilt") == "graph 4"
    assert cache.get(0, lambda: "rebuilt") == "rebuilt"


@pytest.mark.parametrize("description", ["", "   \n\t ", "\u3000\u00a0", "\u200b\u200c\u200d", "\ufeff", "\u2060",
                                         "\x00", "\u3164", "\u115f\u1160\uffa0", "\u2800 \u2800",
                                         "\u034f\ufe0f\u17b4", "\u180b\U000e0100", "\u2065\ufff0", "\ue000",
                                         " \U0001d159\U0001d159 ", "\ufffc", "\u303f"],
                         ids=["empty", "whitespace", "wide-spaces", "zero-width", "byte-order-mark", "word-joiner",
                              "nul", "hangul-filler", "hangul-fillers", "blank-braille", "marks-alone",
                              "variation-selectors", "unassigned", "private-use", "null-noteheads",
                              "object-replacement", "half-fill-space"])
def test_a_blank_description_is_an_invalid_call_and_starts_no_child(run, description):
    """A child started on an empty message answered something, and the call read as completed."""
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description=description,
                                                                   subagent_type="general-purpose")]},
                                         "parent done"])
    out = run(create_deep_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "`description` is empty" in msg.content
    (record,) = records(out)
    assert record["stop_reason"] == "invalid_call" and record["model_calls"] == 0
    assert len(model.calls) == 2  # the parent's two calls: no child ever asked the model
    assert out["messages"][-1].content == "parent done"
