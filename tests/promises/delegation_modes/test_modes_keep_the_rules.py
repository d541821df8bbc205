"""Each delegation mode keeps the common rules: budget, ledger, transcript, fault isolation."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.graphs import records, tool_messages, user
from langchain.agents.middleware import after_model

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, get_transcript
from subagents._settings import DelegationSettings

SCHEMA = {"type": "object", "title": "Answer", "properties": {"text": {"type": "string"}}, "required": ["text"]}
CREATE = tool_call("create_subagent", name="made", description="made at run time", system_prompt="Work.")


def scenario(mode: str, child: list[Any]) -> tuple[ScriptedChatModel, dict[str, Any]]:
    """A parent that delegates "the job" in ``mode``; the child replies with ``child``."""
    if mode == "dynamic":
        responses = [{"tool_calls": [CREATE]},
                     {"tool_calls": [tool_call("task", description="the job", subagent_type="made")]}, "parent done"]
        return ScriptedChatModel(rules=[("the job", child)], responses=responses), {"settings": DelegationSettings.of(dynamic_subagents=True)}
    if mode == "fork":
        responses = [{"tool_calls": [tool_call("task", description="the job", subagent_type="forker")]}, "parent done"]
        spec = {"name": "forker", "description": "forks", "context": "fork"}
        return ScriptedChatModel(rules=[("the job", child)], responses=responses), {"subagents": [spec], "settings": DelegationSettings()}
    responses = [{"tool_calls": [tool_call("task", description="the job", subagent_type="general-purpose",
                                           output_schema=SCHEMA)]}, "parent done"]
    return ScriptedChatModel(rules=[("the job", child)], responses=responses), {"settings": DelegationSettings.of(structured_results=True)}


def answer_for(mode: str) -> list[Any]:
    if mode == "typed":
        return [{"tool_calls": [tool_call("Answer", text="done")]}]
    return ["done"]


MODES = ["dynamic", "fork", "typed"]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_is_recorded_charged_and_transcribed(run, mode):
    model, kwargs = scenario(mode, answer_for(mode))
    budget = Budget(max_tokens=1_000_000)
    kwargs["settings"] = kwargs["settings"].updated(short_answer_threshold=0, budget=budget)
    out = run(create_deep_agent(model, **kwargs), user("go"))
    (task,) = [r for r in records(out) if r.get("kind") is None]
    assert task["status"] == "completed" and task["model_calls"] == 1 and task["input_tokens"] > 0
    assert budget.tokens >= task["input_tokens"] + task["output_tokens"]
    assert out["subagent_usage"]["tasks"] == 1
    transcript = get_transcript(out, {}, task["id"])
    assert transcript[-1].type in ("ai", "tool") and any(m.text == "the job" for m in transcript)


@pytest.mark.parametrize("mode", MODES)
def test_a_spent_budget_refuses_every_mode(run, mode):
    model, kwargs = scenario(mode, answer_for(mode))
    budget = Budget(max_tokens=10**6)

    @after_model
    def spend_it(state: Any, runtime: Any) -> None:  # spent once the parent has asked for the delegation
        if any(c["name"] == "task" for c in state["messages"][-1].tool_calls):
            budget.charge("scripted", 10**6, 0)

    kwargs["settings"] = kwargs["settings"].updated(budget=budget)
    out = run(create_deep_agent(model, middleware=[spend_it], **kwargs), user("go"))
    failed = [m for m in tool_messages(out) if m.content.startswith("Subagent '")
              and "failed:" in m.content]
    assert len(failed) == 1 and "budget is spent" in failed[0].content
    assert out["messages"][-1].content.startswith("parent done")  # the parent's last answer, then the limit's note


@pytest.mark.parametrize("mode", MODES)
def test_a_crashing_child_fails_alone_in_every_mode(run, mode):
    model, kwargs = scenario(mode, [ConnectionError("upstream 503")])
    out = run(create_deep_agent(model, **kwargs), user("go"))
    failed = [m for m in tool_messages(out) if m.status == "error"]
    assert len(failed) == 1 and "failed: ConnectionError: upstream 503" in failed[0].content
    assert out["messages"][-1].content == "parent done"
    assert [r["status"] for r in records(out) if r.get("kind") is None] == ["error"]


@pytest.mark.parametrize("mode", MODES)
def test_no_child_can_delegate_in_any_mode(run, mode):
    model, kwargs = scenario(mode, answer_for(mode))
    run(create_deep_agent(model, **kwargs), user("go"))
    child = next(c for c in model.calls if c["messages"][-1].text == "the job")
    assert not {"task", "create_subagent"} & set(child["tools"])
