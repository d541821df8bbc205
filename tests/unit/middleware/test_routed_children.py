"""A child inheriting the parent's model is routed by the parent's ModelRouterMiddleware, in either order.

Before, with ``[SubAgentMiddleware, ModelRouterMiddleware]`` the child ran on
the unrouted model (the delegation middleware saw the model request before
the router changed it); router first, it was routed.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelChoice, ModelRouterMiddleware
from langchain_core.decisions import BaseDecisionModel, ClassifierResponse

from deep_agent import SubAgentMiddleware, create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user

pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")


class AlwaysStrong(BaseDecisionModel):
    """Routes every task to the 'strong' choice; counts what it was asked to route."""

    model: str = "always-strong"
    asked: list[str] = []

    @property
    def _provider(self) -> str:
        return "test"

    def _classify(self, state, questions):
        self.asked.append(str(getattr(state, "content", state)))
        return ClassifierResponse.model_validate({"model": self.model, "answers": {
            qid: {"type": "choice", "choice": "strong", "probabilities": {"strong": 1.0}, "confidence": 1.0}
            for qid in questions}})


@pytest.mark.parametrize("build", ["create_agent", "create_deep_agent"])
@pytest.mark.parametrize("router_first", [True, False])
def test_the_general_purpose_child_runs_on_the_routed_model_whatever_the_order(router_first, build, run):
    unrouted = ScriptedChatModel(default="unrouted answer")
    strong = ScriptedChatModel(
        rules=[("summarise the notes", ["routed child answer"])],
        responses=[{"tool_calls": [tool_call("task", description="summarise the notes",
                                             subagent_type="general-purpose")]}, "parent done"],
    )
    classifier = AlwaysStrong(asked=[])
    router = ModelRouterMiddleware(choices={"strong": ModelChoice(model=strong, criteria="everything")},
                                   instructions="Pick one.", classifier=classifier)
    if build == "create_deep_agent":
        agent = create_deep_agent(unrouted, middleware=[router])
    else:  # LangChain exposes no graph's middleware: the parent's model middleware is given, as documented
        delegation = SubAgentMiddleware([], model_middleware=[router])
        agent = create_agent(unrouted, [], middleware=[router, delegation] if router_first else [delegation, router])
    out = run(agent, user("go"))
    assert unrouted.calls == []
    (answer,) = [m for m in out["messages"] if m.type == "tool"]
    assert "routed child answer" in answer.text
