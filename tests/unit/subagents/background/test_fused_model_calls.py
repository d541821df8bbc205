"""Neighbouring model-call-only middlewares run as one wrap, in the same order, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, SystemMessage

from deep_agent._testing import ScriptedChatModel
from subagents.background._runtime import FusedModelCalls, LoopModels, OwnLoopModels, fused_model_calls
from subagents import ChildPolicy
from subagents._boundary import OneLevelGuard, OneLevelToolGuard
from subagents._truncation import RetryTruncated


class Tag(AgentMiddleware):
    """Appends its letter to the system prompt on the way in and records the order of calls."""

    child_policy = ChildPolicy(model_call_only=True)

    def __init__(self, letter: str, seen: list[str]) -> None:
        super().__init__()
        self.letter, self.seen = letter, seen

    @property
    def name(self) -> str:
        return f"Tag{self.letter}"

    def _in(self, request: Any) -> Any:
        self.seen.append(f"in {self.letter}")
        text = request.system_message.text if request.system_message is not None else ""
        return request.override(system_message=SystemMessage(content=text + self.letter))

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        reply = handler(self._in(request))
        self.seen.append(f"out {self.letter}")
        return reply

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        reply = await handler(self._in(request))
        self.seen.append(f"out {self.letter}")
        return reply


class Hooked(Tag):
    """Says it only wraps model calls, but has another hook: it must stay on its own."""

    def before_model(self, state: Any, runtime: Any) -> None:
        return None


def test_neighbours_are_joined_in_order_and_others_left_alone() -> None:
    seen: list[str] = []
    a, b, c, hooked = Tag("a", seen), Tag("b", seen), Tag("c", seen), Hooked("h", seen)
    plain = AgentMiddleware()
    out = fused_model_calls([a, b, plain, c, hooked])
    assert isinstance(out[0], FusedModelCalls)
    assert out[0].parts == (a, b) and out[0].name == "Taga+Tagb"
    assert out[1:] == [plain, c, hooked]  # a lone one, and one with another hook, stay as they are


def test_our_model_call_middlewares_opt_in_and_the_tool_guard_does_not() -> None:
    guard, own, retry = OneLevelGuard(), OwnLoopModels(LoopModels()), RetryTruncated(True)
    tool_guard = OneLevelToolGuard()
    fused = fused_model_calls([own, retry, guard])
    assert len(fused) == 1 and fused[0].parts == (own, retry, guard)
    assert fused_model_calls([own, tool_guard]) == [own, tool_guard]  # it also wraps tool calls


def _run(path: str) -> tuple[list[str], str]:
    seen: list[str] = []
    model = ScriptedChatModel(responses=["done"])
    agent = create_agent(model, system_prompt="p", middleware=fused_model_calls(
        [Tag("a", seen), Tag("b", seen), Tag("c", seen)]))
    inputs: Any = {"messages": [HumanMessage(content="go")]}
    state = agent.invoke(inputs) if path == "invoke" else asyncio.run(agent.ainvoke(inputs))
    return seen, state["messages"][-1].text


def test_a_joined_run_behaves_as_the_separate_middlewares_on_both_paths() -> None:
    for path in ("invoke", "ainvoke"):
        seen, answer = _run(path)
        assert seen == ["in a", "in b", "in c", "out c", "out b", "out a"], path
        assert answer == "done"


def test_the_model_sees_every_layer_change() -> None:
    seen: list[str] = []
    model = ScriptedChatModel(responses=["done"])
    agent = create_agent(model, system_prompt="p", middleware=fused_model_calls([Tag("a", seen), Tag("b", seen)]))
    agent.invoke({"messages": [HumanMessage(content="go")]})
    assert model.calls[0]["system"] == "pab"
