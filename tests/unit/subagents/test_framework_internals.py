"""The LangGraph and LangChain internals the library reads (docs/layout.md lists them) still are what it reads.

Each has no public twin. When LangGraph or LangChain changes one, a test here
fails, and the library raises rather than guessing.
"""

from __future__ import annotations

import operator
from functools import partial
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import BinaryOperatorAggregate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.constants import CONF
from langgraph.graph import StateGraph
from langgraph.runtime import get_runtime

from subagents.boundary import graph_namespace, parent_channels
from subagents.definitions.models import inferred_provider
from subagents.errors import SubagentsError


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    note: str


def _graph(node: Any, checkpointer: Any = None) -> Any:
    return StateGraph(State).add_node("node", node).add_edge("__start__", "node").compile(checkpointer=checkpointer)


def test_a_task_sees_its_graphs_channels_with_their_reducers() -> None:
    seen: dict[str, Any] = {}

    def node(state: State) -> dict[str, Any]:
        seen.update(parent_channels(get_config()) or {})
        return {}

    _graph(node).invoke({"log": ["a"]})
    assert isinstance(seen["log"], BinaryOperatorAggregate)
    assert "note" in seen and not isinstance(seen["note"], BinaryOperatorAggregate)


def test_outside_a_run_no_channels_and_a_changed_reader_raises() -> None:
    assert parent_channels({}) is None
    from langgraph._internal._constants import CONFIG_KEY_READ

    with pytest.raises(SubagentsError, match="channels"):
        parent_channels({CONF: {CONFIG_KEY_READ: partial(print, "no channels")}})


@pytest.mark.parametrize("nested", [False, True])
def test_a_tasks_graph_namespace_finds_the_checkpoint_its_step_runs_from(nested: bool) -> None:
    """What the write-back reads its siblings' pending writes from, and a stopped run's open calls."""
    saver = InMemorySaver()
    found: list[Any] = []

    def node(state: State) -> dict[str, Any]:
        info = get_runtime().execution_info
        assert info is not None
        config = {CONF: {"thread_id": info.thread_id, "checkpoint_id": info.checkpoint_id,
                         "checkpoint_ns": graph_namespace(info.checkpoint_ns, info.task_id)}}
        found.append(saver.get_tuple(config))
        return {"log": ["ran"]}

    graph = _graph(node)  # as a subgraph it inherits the parent's checkpointer
    outer = _graph(graph, saver) if nested else _graph(node, saver)
    outer.invoke({"log": []}, {"configurable": {"thread_id": "t"}})
    assert found and found[0] is not None
    assert found[0].checkpoint["channel_values"].get("log") == []


def test_a_namespace_in_another_format_raises() -> None:
    assert graph_namespace("tools:abc", "abc") == ""
    assert graph_namespace("outer:1|tools:abc", "abc") == "outer:1"
    with pytest.raises(SubagentsError, match="checkpoint namespace"):
        graph_namespace("tools/abc", "xyz")


def test_langchains_provider_rule_still_infers_bare_model_names() -> None:
    assert inferred_provider("gpt-4.1-mini") == "openai"
    assert inferred_provider("claude-sonnet-4-5") == "anthropic"
    assert inferred_provider("no-such-model") is None
