"""Fault injection: any exception, from any place a child can fail, never takes the parent down.

Hypothesis picks an exception (every builtin ``Exception`` subclass that can
be built, plus hostile ones), a place (the child's model, tool, middleware
hooks, structured-output parsing, the transcript sinks, the stream writer,
pricing), the driver (invoke or ainvoke) and 1 or 3 parallel children. The
invariant for every case: the parent returns; each ``task`` call has exactly
one ToolMessage and one ledger record; no parent key changes.

A second property draws random parent/child state schemas (reducer and plain
keys) with parallel writes and checks the documented write-back rule.
"""

from __future__ import annotations

import asyncio
import builtins
import operator
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import SubagentSpec
from subagents._outcome import TaskCall
from subagents._settings import DelegationSettings


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("unprintable")


class ReprRaises(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("unrepresentable")

    def __str__(self) -> str:
        raise ValueError("unprintable")


class HugeMessage(Exception):
    def __init__(self) -> None:
        super().__init__("x" * 2_000_000)


class OddArgs(Exception):
    def __init__(self) -> None:
        super().__init__(object(), {"nested": [1, 2]}, b"\xff\xfe")


def _builtin_exceptions() -> list[type[Exception]]:
    found = []
    for name in dir(builtins):
        value = getattr(builtins, name)
        if isinstance(value, type) and issubclass(value, Exception):
            try:
                _make(value)
            except Exception:  # noqa: BLE001 - needs arguments we cannot guess
                continue
            found.append(value)
    return found


def _make(cls: type[BaseException]) -> BaseException:
    try:
        return cls("boom")
    except TypeError:
        return cls()


EXCEPTIONS = [*_builtin_exceptions(), StrRaises, ReprRaises, HugeMessage, OddArgs]
POINTS = ["model", "tool", "before_agent", "before_model", "after_model", "wrap_model_call",
          "wrap_tool_call", "after_agent", "output_parsing", "jsonl_sink", "store_sink",
          "stream_writer", "prices"]


class ParentState(AgentState):
    notes: NotRequired[str]
    findings: NotRequired[Annotated[list, operator.add]]


class Injector(AgentMiddleware):
    """A child middleware that raises at one hook."""

    def __init__(self, point: str, exc: BaseException) -> None:
        super().__init__()
        self.point, self.exc = point, exc

    def _at(self, point: str) -> None:
        if self.point == point:
            raise self.exc

    def before_agent(self, state: Any, runtime: Any) -> None:
        self._at("before_agent")

    def before_model(self, state: Any, runtime: Any) -> None:
        self._at("before_model")

    def after_model(self, state: Any, runtime: Any) -> None:
        self._at("after_model")

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._at("after_agent")

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self._at("wrap_model_call")
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self._at("wrap_model_call")
        return await handler(request)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self._at("wrap_tool_call")
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self._at("wrap_tool_call")
        return await handler(request)


class Answer(BaseModel):
    value: int


class RaisingStore:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def put(self, *args: Any, **kwargs: Any) -> None:
        raise self.exc


class RaisingPrices(Mapping[str, tuple[float, float]]):
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getitem__(self, key: str) -> tuple[float, float]:
        raise self.exc

    def get(self, key: str, default: Any = None) -> Any:
        raise self.exc

    def __iter__(self) -> Iterator[str]:
        raise self.exc

    def __len__(self) -> int:
        return 1


def build(point: str, exc: BaseException, children: int, tmp_path: Any) -> Any:
    @tool
    def work(x: str) -> str:
        """Do the work."""
        if point == "tool":
            raise exc
        return x

    if point == "model":
        child_script: list[Any] = [exc]
    elif point == "output_parsing":
        child_script = [AIMessage(content="", tool_calls=[
            {"name": "Answer", "args": {"value": "not a number"}, "id": f"c{i}", "type": "tool_call"}])
            for i in range(5)]
    else:
        child_script = [{"tool_calls": [tool_call("work", x="y")]}, "child done"]
    child_model = ScriptedChatModel(rules=[("job", child_script)])
    spec = SubagentSpec(
        name="worker", description="works", model=child_model, tools=[work], max_turns=3,
        middleware=[Injector(point, exc)],
        response_format=Answer if point == "output_parsing" else None,
    )
    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="worker")
                        for i in range(children)]},
        "parent done",
    ])
    options: dict[str, Any] = {}
    if point == "jsonl_sink":
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("a file where a folder should be")
        options["sessions_dir"] = str(blocker)
    elif point == "store_sink":
        options["transcript_store"] = RaisingStore(exc)
    elif point == "prices":
        options["prices"] = RaisingPrices(exc)
    middleware = SubAgentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False, **options))
    return create_agent(parent, [], middleware=[middleware], state_schema=ParentState)


def check_invariant(out: dict[str, Any], children: int) -> None:
    calls = next(m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls).tool_calls
    assert len(calls) == children
    ledger = out.get("subagent_tasks") or {}
    for call in calls:
        answers = [m for m in out["messages"] if m.type == "tool" and m.tool_call_id == call["id"]]
        assert len(answers) == 1
        assert sum(r["tool_call_id"] == call["id"] for r in ledger.values()) == 1
    assert len(ledger) == children
    assert out["notes"] == "parent note" and out["findings"] == ["p1"]
    assert out["messages"][-1].text == "parent done"


@pytest.fixture
def raising_stream_writer(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(exc: BaseException) -> None:
        original = TaskCall.from_runtime.__func__

        def from_runtime(cls: Any, *args: Any, **kwargs: Any) -> TaskCall:
            call = original(cls, *args, **kwargs)

            def emit(event: Any) -> None:
                raise exc

            return TaskCall(**{**call.__dict__, "emit": emit})

        monkeypatch.setattr(TaskCall, "from_runtime", classmethod(from_runtime))

    return install


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    exc_type=st.sampled_from(EXCEPTIONS),
    point=st.sampled_from(POINTS),
    mode=st.sampled_from(["sync", "async"]),
    children=st.sampled_from([1, 3]),
)
def test_no_exception_from_anywhere_takes_the_parent_down(
    tmp_path: Any, raising_stream_writer: Any, exc_type: type[Exception], point: str, mode: str, children: int
) -> None:
    exc = _make(exc_type)
    if point == "stream_writer":
        raising_stream_writer(exc)
    if point == "prices":
        # Prices are read once, when the agent is built: a hostile table is refused there, by name.
        with pytest.raises(ValueError, match="prices"):
            build(point, exc, children, tmp_path)
        return
    agent = build(point, exc, children, tmp_path)
    inputs = {"messages": [{"role": "user", "content": "go"}], "notes": "parent note", "findings": ["p1"]}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    check_invariant(out, children)


# -- random schemas, parallel writes ----------------------------------------------------

KEY_NAMES = ["alpha", "beta", "gamma", "delta"]


@st.composite
def schemas(draw: Any) -> tuple[dict[str, bool], list[dict[str, int]]]:
    keys = draw(st.lists(st.sampled_from(KEY_NAMES), min_size=1, max_size=4, unique=True))
    reducer = {k: draw(st.booleans()) for k in keys}
    children = draw(st.integers(min_value=1, max_value=3))
    writes = [{k: draw(st.integers(0, 9)) for k in draw(st.lists(st.sampled_from(keys), unique=True))}
              for _ in range(children)]
    return reducer, writes


def _annotation(has_reducer: bool) -> Any:
    return NotRequired[Annotated[list, operator.add]] if has_reducer else NotRequired[list]


@settings(max_examples=40, deadline=None)
@given(case=schemas(), mode=st.sampled_from(["sync", "async"]))
def test_parallel_writes_follow_the_write_back_rule(case: tuple[dict[str, bool], list[dict[str, int]]],
                                                   mode: str) -> None:
    reducer, writes = case
    fields = {k: _annotation(r) for k, r in reducer.items()}
    state = TypedDict("RandomState", {**AgentState.__annotations__, **fields})  # type: ignore[misc]

    class Writer(AgentMiddleware):
        state_schema = state

        def before_agent(self, s: Any, runtime: Any) -> dict[str, Any]:
            index = int(s["messages"][0].text.split()[-1])
            return {k: ([v] if reducer[k] else [*s.get(k, []), v]) for k, v in writes[index].items()}

    spec = SubagentSpec(name="writer", description="writes", model=ScriptedChatModel(rules=[("job", ["ok"])]),
                        middleware=[Writer()])
    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="writer")
                        for i in range(len(writes))]},
        "parent done",
    ])
    agent = create_agent(parent, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                         state_schema=state)
    inputs = {"messages": [{"role": "user", "content": "go"}], **{k: [100] for k in reducer}}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))

    assert out["messages"][-1].text == "parent done"
    ledger = out["subagent_tasks"]
    assert len(ledger) == len(writes) == sum(m.type == "tool" for m in out["messages"])
    lone = len(writes) == 1
    for key, has_reducer in reducer.items():
        added = [w[key] for w in writes if key in w]
        if has_reducer:
            assert sorted(out[key]) == sorted([100, *added])
        elif lone and added:
            assert out[key] == [100, *added]
        else:
            assert out[key] == [100]
