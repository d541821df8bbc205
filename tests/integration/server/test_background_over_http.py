"""Background tasks over a real HTTP model: the child's calls never cross event loops.

A background child runs on its runtime's own loop; the parent runs on the
caller's (or on none, for ``invoke``). LangChain's OpenAI integration keeps
one async connection pool per process for every ``ChatOpenAI`` with the same
base URL and timeout, and a keep-alive connection opened on one loop fails on
another (``<asyncio.locks.Event ...> is bound to a different event loop``):
in the child, or in the parent's next turn. ``ChatAnthropic`` does the same
with its own pool. These tests start a scripted OpenAI- and
Anthropic-compatible server on a free loopback port and drive background
tasks through ``invoke``, ``ainvoke``, ``stream`` and ``astream``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.background import started_ids, wait_for
from helpers.chat_server import CARRIED_ON, CHILD_ANSWER, STARTED, ScriptedChatServer
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._local_model import OpenAICompatibleChat
from subagents.background import BackgroundRuntime
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.server

@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    running = ScriptedChatServer()
    yield running
    running.close()


@pytest.fixture
def runtimes() -> Iterator[Callable[[], BackgroundRuntime]]:
    """``runtimes()`` makes a background runtime; every one is closed after the test."""
    made: list[BackgroundRuntime] = []

    def make() -> BackgroundRuntime:
        made.append(BackgroundRuntime())
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class Parent:
    """One parent agent and its thread, driven by ``invoke``, ``ainvoke``, ``stream`` or ``astream``."""

    def __init__(self, model: Any, runtime: BackgroundRuntime, mode: str,
                 settings: DelegationSettings = DelegationSettings(), **options: Any) -> None:
        self.runtime, self.mode = runtime, mode
        self.agent = create_deep_agent(model, background=True, settings=settings.updated(background_runtime=runtime),
                                       checkpointer=InMemorySaver(), **options)
        self.config = {"configurable": {"thread_id": f"http-{mode}-{time.monotonic_ns()}"}}

    async def turn(self, text: str) -> dict[str, Any]:
        """One parent turn; the async modes run on the caller's loop, the sync ones in a worker thread."""
        if self.mode == "invoke":
            return await asyncio.to_thread(self.agent.invoke, user(text), self.config)
        if self.mode == "ainvoke":
            return await self.agent.ainvoke(user(text), self.config)
        if self.mode == "stream":
            return await asyncio.to_thread(self._stream, text)
        last: dict[str, Any] = {}
        async for mode, chunk in self.agent.astream(user(text), self.config, stream_mode=["messages", "values"]):
            if mode == "values":
                last = chunk
        return last

    def _stream(self, text: str) -> dict[str, Any]:
        last: dict[str, Any] = {}
        for mode, chunk in self.agent.stream(user(text), self.config, stream_mode=["messages", "values"]):
            if mode == "values":
                last = chunk
        return last

    def settled(self, task_id: str) -> bool:
        task = self.runtime.table.get(task_id)
        return task is not None and task.fields["status"] not in ("pending", "running")


async def start_and_carry_on(parents: list[Parent], server: ScriptedChatServer) -> list[dict[str, Any]]:
    """Each parent in turn starts a background task and waits for it to settle; then each takes its next turn.

    One after another, so each connection a child leaves in the pool is idle
    when the next model call looks for one. Returns each parent's task record
    after its next turn.
    """
    ids = []
    for parent in parents:
        asked = len(server.child_requests())
        first = await parent.turn("please start a background task")
        assert first["messages"][-1].text == STARTED
        ids.append(started_ids(first["messages"])[-1])
        await asyncio.to_thread(wait_for, lambda: parent.settled(ids[-1]))  # noqa: B023 - awaited here
        assert len(server.child_requests()) > asked  # the child's request reached the server
    records = []
    for parent, task_id in zip(parents, ids, strict=True):
        out = await parent.turn("anything new?")  # the parent's next turn runs
        assert out["messages"][-1].text == CARRIED_ON
        records.append(out["async_tasks"][task_id])
    return records


MODES = ["invoke", "ainvoke", "stream", "astream"]


@pytest.mark.parametrize("mode", MODES)
def test_a_background_task_over_http_completes_with_the_servers_answer_and_the_parent_goes_on(
        server, runtimes, mode):
    model = ChatOpenAI(model="scripted", base_url=server.url, api_key="x", max_retries=0, timeout=30)

    async def rounds() -> list[dict[str, Any]]:
        parent = Parent(model, runtimes(), mode)
        return [*await start_and_carry_on([parent], server), *await start_and_carry_on([parent], server)]

    for record in asyncio.run(rounds()):
        assert (record["status"], record["result"], record["error"]) == ("completed", CHILD_ANSWER, None)


@pytest.mark.parametrize("mode", MODES)
def test_two_agents_on_one_model_run_background_tasks_side_by_side(server, runtimes, mode):
    """Two agents, two runtimes (two background loops), one model object and its connections."""
    model = ChatOpenAI(model="scripted", base_url=server.url, api_key="x", max_retries=0, timeout=30)

    async def both() -> list[dict[str, Any]]:
        parents = [Parent(model, runtimes(), mode), Parent(model, runtimes(), mode)]
        return [*await start_and_carry_on(parents, server), *await start_and_carry_on(parents, server)]

    for record in asyncio.run(both()):
        assert (record["status"], record["result"], record["error"]) == ("completed", CHILD_ANSWER, None)


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
def test_a_child_on_a_named_model_of_the_same_server_completes_and_the_parent_goes_on(server, runtimes, mode):
    """The child's model resolved from a profile (``init_chat_model``) and an ``OpenAICompatibleChat`` parent."""
    model = OpenAICompatibleChat(model="scripted", base_url=server.url, api_key="x", max_retries=0, timeout=30)
    profiles = {"local": {"model": "scripted", "model_provider": "openai", "base_url": server.url,
                          "api_key": "x", "max_retries": 0, "timeout": 30}}
    worker = {"name": "general-purpose", "description": "Does anything.", "system_prompt": "Answer.",
              "model": "local"}

    async def rounds() -> list[dict[str, Any]]:
        parent = Parent(model, runtimes(), mode, subagents=[worker], settings=DelegationSettings.of(
            model_profiles=profiles, general_purpose=False,
        ))
        return [*await start_and_carry_on([parent], server), *await start_and_carry_on([parent], server)]

    for record in asyncio.run(rounds()):
        assert (record["status"], record["result"], record["error"]) == ("completed", CHILD_ANSWER, None)


def _openai_models(url: str) -> list[Any]:
    from langchain_openai import AzureChatOpenAI

    return [
        ChatOpenAI(model="scripted", base_url=url, api_key="x", temperature=0, max_tokens=5, timeout=3),
        OpenAICompatibleChat(model="scripted", base_url=url, api_key="x", max_tokens=7, empty_content=False),
        AzureChatOpenAI(azure_deployment="d", api_version="2024-06-01", azure_endpoint="https://e.example.com",
                        api_key="x"),
        ChatOpenAI(model="scripted", api_key="x", openai_proxy="http://127.0.0.1:9"),
    ]


@pytest.mark.parametrize("index", range(4), ids=["ChatOpenAI", "OpenAICompatibleChat", "Azure", "proxied"])
def test_a_background_copy_keeps_the_models_settings_and_gets_a_client_of_its_own(index):
    from subagents.definitions._models import CLIENT_FIELDS, with_own_async_client

    model = _openai_models("http://127.0.0.1:9/v1")[index]
    copy, close = with_own_async_client(model)
    assert type(copy) is type(model) and close is not None
    settings = [name for name in model.model_fields_set if name not in CLIENT_FIELDS | {"http_client"}]
    assert {n: getattr(copy, n) for n in settings} == {n: getattr(model, n) for n in settings}
    assert copy.root_async_client is not model.root_async_client
    assert copy.http_async_client is not None and copy.http_async_client is not model.http_async_client
    asyncio.run(close())


def test_an_anthropic_copy_keeps_the_models_settings_and_sends_on_a_pool_of_its_own(server):
    from langchain_anthropic import ChatAnthropic

    from subagents.definitions._models import with_own_async_client

    model = ChatAnthropic(model="claude-scripted", base_url=server.anthropic_url, api_key="x", max_retries=0,
                          timeout=30, max_tokens=9, default_headers={"x-team": "a"})
    copy, close = with_own_async_client(model)
    assert type(copy) is ChatAnthropic and close is not None
    assert {n: getattr(copy, n) for n in model.model_fields_set} == \
        {n: getattr(model, n) for n in model.model_fields_set}

    async def both_answer() -> None:
        assert (await model.ainvoke("hi")).text == CHILD_ANSWER
        assert (await copy.ainvoke("hi")).text == CHILD_ANSWER
        await close()
        with pytest.raises(Exception, match="[Cc]onnection|closed"):  # its own pool is closed...
            await copy.ainvoke("hi")
        assert (await model.ainvoke("hi")).text == CHILD_ANSWER  # ...not the model's

    asyncio.run(both_answer())


def test_a_client_the_caller_chose_is_kept_with_a_warning_and_a_scripted_model_as_it_is():
    import openai

    from deep_agent._testing import ScriptedChatModel
    from subagents.definitions._models import with_own_async_client
    from subagents._errors import SharedModelClient

    model = ChatOpenAI(model="scripted", api_key="x", http_async_client=openai.DefaultAsyncHttpxClient())
    with pytest.warns(SharedModelClient):
        assert with_own_async_client(model) == (model, None)
    scripted = ScriptedChatModel(responses=["hi"])
    assert with_own_async_client(scripted) == (scripted, None)


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
def test_an_anthropic_model_used_on_the_callers_loop_first_serves_a_background_task_too(server, runtimes, mode):
    """``ChatAnthropic`` shares one async connection pool per base URL and timeout, as ``ChatOpenAI`` does.

    The caller's loop uses the model first (a direct ``ainvoke``, then the
    parent's turn), leaving keep-alive connections of that loop in the pool.
    """
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(model="claude-scripted", base_url=server.anthropic_url, api_key="x", max_retries=0,
                          timeout=30)

    async def rounds() -> list[dict[str, Any]]:
        assert (await model.ainvoke("hello")).text == CHILD_ANSWER  # a connection of the caller's loop
        parent = Parent(model, runtimes(), mode)
        return [*await start_and_carry_on([parent], server), *await start_and_carry_on([parent], server)]

    for record in asyncio.run(rounds()):
        assert (record["status"], record["result"], record["error"]) == ("completed", CHILD_ANSWER, None)
