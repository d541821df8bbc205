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

from subagents._boundary import graph_namespace, parent_channels
from subagents.definitions._models import inferred_provider
from subagents._errors import SubagentsError
from subagents._metering import in_tool_step


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


def test_a_model_call_made_in_a_tool_is_seen_in_the_tool_steps_namespace() -> None:
    """What the run's meter tells a root tool's own model call by (``RunMeter.in_tools``): LangChain's tool
    node is named ``tools``, and LangGraph puts each step's ``<node>:<task id>`` in a call's metadata."""
    from langchain.agents import create_agent
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.tools import tool

    from deep_agent._testing import ScriptedChatModel, tool_call

    seen: list[bool] = []

    class Namespaces(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            seen.append(in_tool_step(kwargs.get("metadata")))

    @tool
    def ask(question: str) -> str:
        """Asks a model of its own."""
        return str(ScriptedChatModel(responses=["an answer"]).invoke(question).content)

    root = ScriptedChatModel(responses=[{"tool_calls": [tool_call("ask", question="q")]}, "done"])
    create_agent(root, [ask]).with_config(callbacks=[Namespaces()]).invoke({"messages": [("user", "go")]})
    assert seen == [False, True, False]  # the root's call, the tool's own, the root's answer


def test_a_node_finds_its_graphs_checkpointer_in_its_config() -> None:
    # CONFIG_KEY_CHECKPOINTER: how a task reads its child's checkpoint (a resumed child's earlier calls, a stopped
    # run's open calls); gone, a resume would charge nothing of what the child spent before.
    from langgraph.constants import CONFIG_KEY_CHECKPOINTER

    saver, seen = InMemorySaver(), []

    def node(state: State) -> dict[str, Any]:
        seen.append(get_config()[CONF].get(CONFIG_KEY_CHECKPOINTER))
        return {}

    _graph(node, saver).invoke({}, {CONF: {"thread_id": "t"}})
    assert seen == [saver]


def test_a_chat_model_without_its_own_async_call_runs_its_sync_one_on_a_thread() -> None:
    # runs_on_a_thread: a model overriding neither _agenerate nor _astream has its ainvoke run _generate in an
    # executor, so a cancelled child's call goes on spending (the meter charges it when it ends).
    import asyncio
    import threading

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from subagents._builder import runs_on_a_thread

    class SyncOnly(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "sync-only"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(threading.current_thread().name))])

    class AsyncToo(SyncOnly):
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            return self._generate(messages)

    async def thread_of(model: BaseChatModel) -> str:
        return str((await model.ainvoke("hi")).content)

    loop_thread = threading.current_thread().name
    assert runs_on_a_thread(SyncOnly()) and asyncio.run(thread_of(SyncOnly())) != loop_thread
    assert not runs_on_a_thread(AsyncToo()) and asyncio.run(thread_of(AsyncToo())) == loop_thread
