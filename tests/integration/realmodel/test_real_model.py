"""Delegation driven by a real model: SmolLM2-135M on llama.cpp's OpenAI-compatible server.

Every assertion is about structure (records, statuses, counts, names),
never about what a 135M model chose to say.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.graphs import parent_script, records, tool_messages, user
from helpers.local_model import running_local_model
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import ForceDelegation, SubAgentMiddleware
from middleware._limits import ForcedDelegation
from subagents import read_transcript, wait_for_background
from subagents.background import BackgroundRuntime
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.realmodel

SPECS = [
    {"name": "alpha", "description": "Writes one short sentence.", "system_prompt": "Answer in one short sentence."},
    {"name": "beta", "description": "Answers with two words.", "system_prompt": "Answer with two words."},
]
FORCED = ForceDelegation(mechanism="response_format", description_max_chars=40)


def _specs(model: Any, **extra: Any) -> list[dict[str, Any]]:
    return [{**spec, "model": model, **extra} for spec in SPECS]


@pytest.fixture(scope="module")
def forced_run(local_model) -> dict[str, Any]:  # noqa: F811 - the fixture
    agent = create_deep_agent(
        local_model.chat_model(max_tokens=24), subagents=SPECS, system_prompt="You delegate.",
        settings=DelegationSettings.of(general_purpose=False, force_delegation=FORCED, short_answer_threshold=0),
    )
    # The prompt names an agent that does not exist: the enum keeps the model to real ones.
    return agent.invoke(user("Ask the function agent to greet the user."))


def test_forced_delegation_completes_with_the_servers_token_counts(forced_run):
    [record] = records(forced_run)
    assert record["status"] == "completed", record
    child = [m for m in read_transcript(record, thread_id=None) if m.type == "ai"]
    server = [m.response_metadata["token_usage"] for m in child]
    assert record["model_calls"] == len(child) >= 1
    assert record["input_tokens"] == sum(u["prompt_tokens"] for u in server) > 0
    assert record["output_tokens"] == sum(u["completion_tokens"] for u in server) > 0
    # The parent's answer follows the tool result, and its own call was free.
    assert forced_run["messages"][-1].type == "ai" and not forced_run["messages"][-1].tool_calls


def test_the_enum_keeps_the_model_to_valid_agent_names(forced_run):
    calls = [c for m in forced_run["messages"] if m.type == "ai" for c in m.tool_calls]
    assert calls and all(c["args"]["subagent_type"] in {"alpha", "beta"} for c in calls)
    assert [r["agent_type"] for r in records(forced_run)] == [calls[0]["args"]["subagent_type"]]


def test_parallel_delegations_run_at_once_on_the_server(local_model):  # noqa: F811
    parent = ScriptedChatModel(responses=parent_script(("Greet Ann.", "alpha"), ("Greet Bob.", "beta")))
    agent = create_deep_agent(parent, subagents=_specs(local_model.chat_model(max_tokens=8)),
    settings=DelegationSettings.of(general_purpose=False, short_answer_threshold=0))
    state = asyncio.run(agent.ainvoke(user("go")))
    done = records(state)
    assert sorted(r["agent_type"] for r in done) == ["alpha", "beta"]
    assert all(r["status"] == "completed" and r["input_tokens"] > 0 for r in done)
    assert max(r["started_at"] for r in done) < min(r["finished_at"] for r in done)
    assert state["messages"][-1].text == "parent carried on"


def test_a_child_timeout_is_an_error_record_and_the_parent_goes_on(local_model):  # noqa: F811
    parent = ScriptedChatModel(responses=parent_script(("Write a long story.", "alpha")))
    # ignore_eos: the child writes all 48 tokens, far longer than the timeout.
    slow = local_model.chat_model(max_tokens=48, extra_body={"ignore_eos": True})
    agent = create_deep_agent(parent, subagents=_specs(slow, timeout_s=0.2), settings=DelegationSettings.of(
        general_purpose=False, short_answer_threshold=0,
    ))
    state = agent.invoke(user("go"))
    [record] = records(state)
    assert record["status"] == "error" and record["error"]
    [message] = tool_messages(state)
    assert message.status == "error" and message.text.startswith("Subagent 'alpha' failed:")
    assert state["messages"][-1].text == "parent carried on"


class _KillOnFirstRequest(BaseCallbackHandler):
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        threading.Timer(0.3, self.process.kill).start()


def test_a_server_killed_mid_task_is_an_error_record_and_the_parent_goes_on(tmp_path):
    with running_local_model(tmp_path, parallel=1) as server:
        child_model = server.chat_model(max_tokens=48, extra_body={"ignore_eos": True},
                                        callbacks=[_KillOnFirstRequest(server.process)])
        parent = ScriptedChatModel(responses=parent_script(("Write a long story.", "alpha")))
        agent = create_deep_agent(parent, subagents=_specs(child_model), settings=DelegationSettings.of(
            general_purpose=False, short_answer_threshold=0,
        ))
        state = agent.invoke(user("go"))
        assert server.process.wait(timeout=15) is not None
    [record] = records(state)
    assert record["status"] == "error" and record["error"]
    assert tool_messages(state)[0].status == "error"
    assert state["messages"][-1].text == "parent carried on"


class _EveryCallForced(ForcedDelegation):
    """A parent that would delegate on every call while ``task`` is offered."""

    def applies(self, request: Any) -> bool:
        return any(getattr(t, "name", None) == "task" for t in request.tools)


def test_max_delegations_stops_a_model_that_always_delegates(local_model):  # noqa: F811
    from langchain.agents import create_agent

    delegation = SubAgentMiddleware(SPECS, model=local_model.chat_model(max_tokens=8),
    settings=DelegationSettings.of(general_purpose=False, short_answer_threshold=0, max_delegations=2))
    delegation.forced = _EveryCallForced(FORCED, delegation.registry.names)
    agent = create_agent(local_model.chat_model(max_tokens=24), middleware=[delegation])
    state = agent.invoke(user("Greet the user."), {"recursion_limit": 40})
    assert len(records(state)) == 2
    assert state["messages"][-1].type == "ai" and not state["messages"][-1].tool_calls


def test_the_cli_runs_with_force_delegation_against_the_server(local_model, tmp_path):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_AGENT_"))}
    env.update(OPENAI_API_KEY="local", OPENAI_BASE_URL=local_model.url, OPENAI_MODEL="smollm2")
    cli = [sys.executable, "-m", "deep_agent"]
    state_dir = str(tmp_path / "state")
    run = subprocess.run([*cli, "run", "Say hello.", "--force-delegation", "--state-dir", state_dir],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Final answer" in run.stdout and "scripted model" not in run.stdout  # the CLI ran, not the demo
    tasks = subprocess.run([*cli, "tasks", "--state-dir", state_dir], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)
    assert tasks.returncode == 0, tasks.stderr[-2000:]
    assert "completed" in tasks.stdout


@pytest.mark.parametrize("compatible", [False, True], ids=["ChatOpenAI", "OpenAICompatibleChat"])
def test_the_compatible_client_sends_empty_content_and_max_tokens_which_the_server_honours(local_model, compatible):  # noqa: F811
    import httpx
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from deep_agent._local_model import OpenAICompatibleChat

    sent: list[dict[str, Any]] = []
    client = httpx.Client(event_hooks={"request": [lambda r: sent.append(json.loads(r.read()))]})
    cls = OpenAICompatibleChat if compatible else None
    model = local_model.chat_model(max_tokens=4, http_client=client, **({"cls": cls} if cls else {}))
    reply = model.invoke([
        HumanMessage("Say hi."),
        AIMessage("", tool_calls=[{"name": "task", "args": {"description": "hi", "subagent_type": "alpha"},
                                   "id": "call_1"}]),
        ToolMessage("Hi!", tool_call_id="call_1"),
    ])
    [assistant] = [m for m in sent[-1]["messages"] if m["role"] == "assistant"]
    if compatible:
        assert assistant["content"] == "" and sent[-1]["max_tokens"] == 4
        assert "max_completion_tokens" not in sent[-1]
    else:  # ChatOpenAI's own habits, which llama.cpp's server accepts
        assert assistant["content"] is None and sent[-1]["max_completion_tokens"] == 4
    assert 0 < reply.usage_metadata["output_tokens"] <= 4


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([str(Path(__file__))]))


def _background_parent() -> ScriptedChatModel:
    """Starts one background task to ``alpha`` on a user's first message; answers anything else plainly."""
    return ScriptedChatModel(
        rules=[("Background task updates", ["noted"])],
        responses=[{"tool_calls": [tool_call("start_async_task", description="Greet Ann.", subagent_type="alpha")]},
                   "started"],
        default="parent carried on",
    )


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_background_child_on_the_server_completes_and_the_parents_next_turn_runs(local_model, mode):  # noqa: F811
    """The child calls llama.cpp's server from the background runtime's loop, with a client of that loop."""
    runtime = BackgroundRuntime()
    agent = create_deep_agent(_background_parent(), subagents=_specs(local_model.chat_model(max_tokens=8)), background=True,
                              checkpointer=InMemorySaver(), settings=DelegationSettings.of(
                                  general_purpose=False, background_runtime=runtime,
                              ))
    config = {"configurable": {"thread_id": f"bg-{mode}"}}

    async def turn(text: str) -> dict[str, Any]:
        if mode == "invoke":
            return await asyncio.to_thread(agent.invoke, user(text), config)
        last: dict[str, Any] = {}
        async for kind, chunk in agent.astream(user(text), config, stream_mode=["messages", "values"]):
            if kind == "values":
                last = chunk
        return last

    async def rounds() -> tuple[dict[str, Any], dict[str, Any]]:
        first = await turn("start it")
        assert await asyncio.to_thread(wait_for_background, first["async_tasks"], 120.0)
        return first, await turn("anything new?")

    try:
        first, after = asyncio.run(rounds())
    finally:
        runtime.close()
    assert first["messages"][-1].text == "started"
    [record] = after["async_tasks"].values()
    assert record["status"] == "completed", record
    assert record["input_tokens"] > 0 and record["result"]  # the server's counts and answer
    assert after["messages"][-1].text in {"parent carried on", "noted"}
