"""One policy object says how delegation treats a middleware, read one way (``subagents._roles.policy_of``).

Before: five class attributes, each read with a rule of its own (``keeps_model`` and ``request_neutral`` from
the class's own namespace, ``model_call_only``, ``inherited_by_subagents`` and
``inherited_by_every_subagent`` through inheritance, LangChain's classes by ``isinstance`` for one list and by
exact class for another).
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, PIIMiddleware

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user
from middleware import SubAgentMiddleware
from subagents import ChildPolicy, SubagentSpec
from subagents._roles import policy_of
from subagents._settings import DelegationSettings

SEEN: list[str] = []


class Explain(AgentMiddleware):
    """A parent's middleware every child takes, whatever its model."""

    child_policy = ChildPolicy(inherited="every")

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        SEEN.append(type(self).__name__)
        return handler(request)


class ExplainMore(Explain):  # a subclass keeps the floor
    pass


def _parent_with(floor: AgentMiddleware) -> Any:
    child = SubagentSpec(name="own-model", description="has a model of its own",
                         model=ScriptedChatModel(responses=["child done"]))
    parent = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description="go",
                                                                    subagent_type="own-model")]}, "done"])
    return create_agent(parent, [], middleware=[floor, SubAgentMiddleware(
        [child], model_middleware=[floor], settings=DelegationSettings.of(
            general_purpose=False,
        ))])


def test_a_floor_declared_once_reaches_a_child_with_its_own_model_and_holds_for_subclasses():
    for floor in (Explain(), ExplainMore()):
        SEEN.clear()
        _parent_with(floor).invoke(user("go"))
        assert SEEN.count(type(floor).__name__) == 3, SEEN  # the parent's two calls and the child's one


def test_what_a_class_says_its_code_does_holds_for_that_class_alone():
    class Neutral(AgentMiddleware):
        child_policy = ChildPolicy(request_neutral=True, keeps_model=True)

    class Sub(Neutral):  # may do anything
        pass

    replaced = Neutral()
    replaced.wrap_model_call = lambda request, handler: handler(request)  # type: ignore[method-assign]
    assert policy_of(Neutral()).request_neutral and policy_of(Neutral()).keeps_model
    assert policy_of(Sub()) == ChildPolicy() and policy_of(replaced) == ChildPolicy()
    assert policy_of(PIIMiddleware("email")).inherited == "every"
    assert policy_of(type("MyPII", (PIIMiddleware,), {})("email")) == ChildPolicy(inherited="every")


def test_a_subclass_or_an_instance_may_widen_a_floor_never_narrow_it():
    # Before: a PIIMiddleware subclass declaring child_policy = ChildPolicy(keeps_model=True) got inherited=None,
    # and a child's model saw the raw email the parent's policy redacts.
    class MyPII(PIIMiddleware):
        child_policy = ChildPolicy(keeps_model=True)

    narrowed = PIIMiddleware("email")
    narrowed.child_policy = ChildPolicy()  # type: ignore[attr-defined]
    assert policy_of(MyPII("email")) == ChildPolicy(inherited="every", keeps_model=True)
    assert policy_of(narrowed).inherited == "every"
    widened = Explain()
    assert policy_of(type("Model", (Explain,), {"child_policy": ChildPolicy(inherited="model")})()).inherited == "every"
    widened.child_policy = ChildPolicy(inherited="every", request_neutral=True)  # type: ignore[attr-defined]
    assert policy_of(widened).request_neutral
