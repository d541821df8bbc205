"""Delegation settings: grouped once, validated with the argument's name, passed whole."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from pydantic import ValidationError

from helpers.graphs import records, user
from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware
from subagents import Budget, SpecError
from subagents.transcripts import jsonl_path
from subagents.settings import DelegationSettings, Limits, Observability


@tool
def lookup(q: str) -> str:
    """Look up."""
    return f"found {q}"


def scripted():
    return ScriptedChatModel(
        rules=[("research X", ["X is x."])],
        responses=[{"tool_calls": [tool_call("task", description="research X", subagent_type="general-purpose")]},
                   "parent done"],
    )


def test_flat_arguments_land_in_their_groups():
    budget = Budget(max_tokens=1000)
    settings = DelegationSettings.from_arguments("create_deep_agent", {
        "max_concurrent_tasks": 3, "budget": budget, "sessions_dir": "runs", "max_background_tasks": 2,
        "background": True, "risky_tools": ["shell"], "permission_mode": "confirm-risky",
    })
    assert settings.limits.max_concurrent_tasks == 3
    assert settings.limits.budget is budget
    assert settings.observability.sessions_dir == "runs"
    assert settings.background.max_tasks == 2 and settings.background.wanted
    assert settings.definitions.risky_tools == frozenset({"shell"})
    assert settings.definitions.permission_mode == "confirm_risky"
    # Untouched groups keep their defaults.
    assert settings.limits.max_delegations == DelegationSettings().limits.max_delegations


def test_background_subagents_alone_turn_the_tools_on():
    settings = DelegationSettings.from_arguments("x", {"background_subagents": [{"name": "r"}]})
    assert settings.background.wanted and not settings.background.enabled


def test_settings_are_frozen():
    settings = DelegationSettings()
    with pytest.raises(ValidationError):
        settings.limits.max_delegations = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.limits = Limits()  # type: ignore[misc]


def test_a_chat_model_in_a_mapping_survives_an_override_untouched():
    model = ScriptedChatModel()
    base = DelegationSettings.from_arguments("x", {"model_profiles": {"fast": model}})
    settings = DelegationSettings.from_arguments("x", {"unknown_model": "inherit"}, base=base)
    assert settings.definitions.model_profiles is not None
    assert settings.definitions.model_profiles["fast"] is model
    assert settings.definitions.unknown_model == "inherit"


@pytest.mark.parametrize("arguments, name", [
    ({"short_answer_threshold": -1}, "short_answer_threshold: must be >= 0"),
    ({"max_background_tasks": "many"}, "max_background_tasks: "),
    ({"unknown_tools": "shout"}, "unknown_tools: "),
    ({"sessions_dir": 42}, "sessions_dir: "),
    ({"background_subagents": "researcher"}, "background_subagents: expected a list of subagent specs"),
])
def test_a_bad_value_names_the_argument(arguments, name):
    with pytest.raises(SpecError, match=f"^{name}"):
        DelegationSettings.from_arguments("create_deep_agent", arguments)


def test_a_bad_value_through_the_factory_names_the_argument():
    with pytest.raises(SpecError, match="short_answer_threshold: must be >= 0"):
        create_deep_agent(ScriptedChatModel(), short_answer_threshold=-5)
    with pytest.raises(SpecError, match="unknown_tools: "):
        create_deep_agent(ScriptedChatModel(), unknown_tools="sometimes")  # type: ignore[arg-type]


def test_a_middlewares_own_name_for_an_argument_is_the_one_in_the_error():
    with pytest.raises(SpecError, match="^max_concurrent_tasks: "):
        BackgroundSubagentMiddleware(max_concurrent_tasks="lots")


def test_unknown_and_foreign_arguments_are_refused():
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_concurent_tasks'"):
        SubAgentMiddleware(max_concurent_tasks=2)
    # A settings argument another layer reads is still no argument of this one.
    with pytest.raises(TypeError, match="unexpected keyword argument 'agents_dirs'"):
        SubAgentMiddleware(agents_dirs=["agents"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'transcript_store'"):
        BackgroundSubagentMiddleware(transcript_store=True)


def test_keyword_arguments_override_a_whole_settings_object():
    budget = Budget(max_tokens=10_000)
    base = DelegationSettings(limits=Limits(max_delegations=3, budget=budget))
    middleware = SubAgentMiddleware(settings=base, max_concurrent_tasks=2)
    assert middleware.delegation_limit.max_delegations == 3
    assert middleware.budget is budget
    assert middleware.runner.budget is budget
    assert middleware.runner.limit.limit == 2


def test_a_settings_object_given_whole_reaches_the_runner(run, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    settings = DelegationSettings(observability=Observability(sessions_dir=tmp_path))
    agent = create_agent(scripted(), [lookup], middleware=[SubAgentMiddleware(settings=settings)],
                         checkpointer=InMemorySaver())
    out = run(agent, user("go"), {"configurable": {"thread_id": "t1"}})
    (record,) = records(out)
    assert record["transcript"] == f"jsonl:{jsonl_path(tmp_path, 't1', record['id'])}"


def test_background_middleware_takes_the_same_object_and_its_own_cap(tmp_path):
    settings = DelegationSettings.from_arguments("create_deep_agent", {
        "sessions_dir": str(tmp_path), "transcript_store": True, "max_background_tasks": 3,
        "max_concurrent_tasks": 5, "short_answer_threshold": 7,
    })
    background = BackgroundSubagentMiddleware(settings=settings)
    try:
        assert background.tasks.local.limit.limit == 3
        runner = background.tasks.local.runner
        assert runner.limit.limit is None  # the background cap is the local runner's, not the task runner's
        assert runner.short_answer_threshold == 7
        # Background children keep JSONL transcripts, never store ones, as before.
        assert runner.new_sink.__name__ == "jsonl"
    finally:
        background.close()
    assert SubAgentMiddleware(settings=settings).runner.limit.limit == 5


def test_bools_and_numeric_strings_are_no_counts():
    for bad in (True, "8", 2.0):
        with pytest.raises(SpecError, match="^max_dynamic_subagents: "):
            SubAgentMiddleware(max_dynamic_subagents=bad)
