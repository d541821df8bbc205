"""Delegation settings: one typed object, validated with the field's name, passed whole."""

from __future__ import annotations

import pytest
from helpers.graphs import records, user
from langchain.agents import create_agent
from langchain_core.tools import tool
from pydantic import ValidationError

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware
from subagents import Budget, SpecError
from subagents._settings import DelegationSettings, Limits, Observability
from subagents._transcripts import jsonl_path


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


def test_flat_names_land_in_their_groups():
    budget = Budget(max_tokens=1000)
    settings = DelegationSettings.of(
        max_concurrent_tasks=3, budget=budget, sessions_dir="runs", max_background_tasks=2,
        risky_tools=["shell"], permission_mode="confirm-risky",
    )
    assert settings.limits.max_concurrent_tasks == 3
    assert settings.limits.budget is budget
    assert settings.observability.sessions_dir == "runs"
    assert settings.background.max_background_tasks == 2
    assert settings.definitions.risky_tools == frozenset({"shell"})
    assert settings.definitions.permission_mode == "confirm_risky"
    # Untouched groups keep their defaults; the flat form equals the grouped one.
    assert settings.limits.max_delegations == DelegationSettings().limits.max_delegations
    assert DelegationSettings.of(max_concurrent_tasks=4) == DelegationSettings(limits=Limits(max_concurrent_tasks=4))


def test_every_field_name_is_one_settings_name():
    from subagents._settings import _GROUP_OF

    fields = [name for info in DelegationSettings.model_fields.values() for name in info.annotation.model_fields]
    assert sorted(fields) == sorted(_GROUP_OF)  # no name in two groups: the flat form is unambiguous


def test_settings_are_frozen():
    settings = DelegationSettings()
    with pytest.raises(ValidationError):
        settings.limits.max_delegations = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.limits = Limits()  # type: ignore[misc]


def test_a_chat_model_in_a_mapping_survives_an_update_untouched():
    model = ScriptedChatModel()
    settings = DelegationSettings.of(model_profiles={"fast": model}).updated(unknown_model="inherit")
    assert settings.definitions.model_profiles is not None
    assert settings.definitions.model_profiles["fast"] is model
    assert settings.definitions.unknown_model == "inherit"


@pytest.mark.parametrize("fields, name", [
    ({"short_answer_threshold": -1}, "short_answer_threshold: must be >= 0"),
    # Each count is checked where it is defined, naming itself (max_background_tasks=0 was refused later as
    # max_concurrent_tasks; a notice size of -5 was never refused).
    ({"max_background_tasks": 0}, "max_background_tasks: Input should be greater than or equal to 1"),
    ({"max_concurrent_tasks": 0}, "max_concurrent_tasks: Input should be greater than or equal to 1"),
    ({"max_delegations": -1}, "max_delegations: Input should be greater than or equal to 1"),
    ({"max_root_turns": 0}, "max_root_turns: Input should be greater than or equal to 1"),
    ({"max_dynamic_subagents": -1}, "max_dynamic_subagents: Input should be greater than or equal to 1"),
    ({"notice_result_chars": -5}, "notice_result_chars: Input should be greater than or equal to 0"),
    ({"notice_total_chars": -5}, "notice_total_chars: Input should be greater than or equal to 0"),
    ({"max_background_tasks": "many"}, "max_background_tasks: "),
    ({"unknown_tools": "shout"}, "unknown_tools: "),
    ({"sessions_dir": 42}, "sessions_dir: "),
    ({"background_subagents": "researcher"}, "background_subagents: expected a list of subagent specs"),
    # What children are built with is checked here too, once (a copy of these fields checked them at build time).
    ({"mcp_servers": 5}, "mcp_servers: expected a mapping of MCP server names to configs"),
    ({"mcp_servers": {"s": {}}}, "mcp_servers: server 's' has no config"),
    ({"model_profiles": {"fast": "nonsense"}}, "model_profiles: profile 'fast': expected 'inherit' or 'provider:model'"),
    ({"retry_truncated": "yes"}, "retry_truncated: "),
    ({"unknown_model": "sometimes"}, "unknown_model: "),
])
def test_a_bad_value_names_the_field(fields, name):
    with pytest.raises(SpecError, match=f"^{name}"):
        DelegationSettings.of(**fields)


def test_a_bad_value_in_a_group_names_the_field():
    with pytest.raises(SpecError, match="^max_concurrent_tasks: "):
        Limits(max_concurrent_tasks="lots")
    with pytest.raises(SpecError, match="short_answer_threshold: must be >= 0"):
        create_deep_agent(ScriptedChatModel(), settings=DelegationSettings(limits={"short_answer_threshold": -5}))


def test_an_unknown_name_is_refused():
    with pytest.raises(TypeError, match="no setting 'max_concurent_tasks'"):
        DelegationSettings.of(max_concurent_tasks=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_concurrent_tasks'"):
        SubAgentMiddleware(max_concurrent_tasks=2)


def test_the_limits_reach_the_middleware_and_its_runner():
    budget = Budget(max_tokens=10_000)
    middleware = SubAgentMiddleware(settings=DelegationSettings.of(max_delegations=3, max_concurrent_tasks=2,
                                                                   budget=budget))
    assert middleware.delegation_limit.max_delegations == 3
    assert middleware.budget is middleware.runner.budget is budget
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
    settings = DelegationSettings.of(
        sessions_dir=str(tmp_path), transcript_store=True, max_background_tasks=3,
        max_concurrent_tasks=5, short_answer_threshold=7,
    )
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
            DelegationSettings.of(max_dynamic_subagents=bad)


def test_every_setting_is_documented_in_its_group():
    for info in DelegationSettings.model_fields.values():
        group = info.annotation
        attributes = group.__doc__.split("Attributes:", 1)[1]
        for name in group.model_fields:
            assert f"{name}" in attributes, f"{group.__name__}.{name} has no docstring entry"
