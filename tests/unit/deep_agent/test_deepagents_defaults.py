"""deepagents' defaults spelled out (None, empty lists) run unchanged: they ask for nothing."""

from __future__ import annotations

import pytest

from deep_agent import SubAgentMiddleware, create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

ANSWER = "The helper's complete answer, long enough to stand as a full report. " * 4


def delegating_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("child job", [ANSWER])],
        responses=[{"tool_calls": [tool_call("task", description="child job", subagent_type="helper")]}, "root done"],
    )


def helper(**extra) -> dict:
    return {"name": "helper", "description": "Helps.", "system_prompt": "Help.", **extra}


def task_result(agent) -> str:
    out = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert out["messages"][-1].content == "root done"
    return next(m.content for m in out["messages"] if m.type == "tool")


@pytest.mark.parametrize("arguments", [
    {"tools": None}, {"middleware": None},
    {"backend": None}, {"memory": None}, {"memory": []}, {"skills": None}, {"skills": []},
    {"permissions": None}, {"permissions": []},
], ids=repr)
def test_create_deep_agent_takes_deepagents_defaults(arguments):
    agent = create_deep_agent(delegating_model(), subagents=[helper()], **arguments)
    assert task_result(agent).strip() == ANSWER.strip()


def test_subagents_none_is_no_subagents():
    agent = create_deep_agent(ScriptedChatModel(responses=["root done"]), subagents=None,
    settings=DelegationSettings.of(general_purpose=False))
    assert agent.invoke({"messages": [{"role": "user", "content": "go"}]})["messages"][-1].content == "root done"


@pytest.mark.parametrize("extra", [{"skills": None}, {"permissions": None}, {"permissions": []}], ids=repr)
def test_a_spec_takes_deepagents_defaults(extra):
    agent = create_deep_agent(delegating_model(), subagents=[helper(**extra)])
    assert task_result(agent).strip() == ANSWER.strip()


def test_the_middleware_takes_none_for_its_lists():
    mw = SubAgentMiddleware(subagents=None, private_state_keys=None, settings=DelegationSettings.of(
        general_purpose=False,
    ))
    assert mw.tools == []
    assert [t.name for t in SubAgentMiddleware(subagents=[helper()], private_state_keys=None).tools] == ["task"]


def test_a_skill_folder_under_an_unknown_home_names_the_field():
    from subagents import SpecError

    with pytest.raises(SpecError, match=r"subagent 'helper': field 'skills': '~no-such-user-here/skills'"):
        create_deep_agent(delegating_model(), subagents=[helper(skills=["~no-such-user-here/skills"])])
