"""deepagents' documented subagent examples (the docstrings of its subagent API), with the import swapped.

Each example is deepagents' text with ``deepagents`` imports replaced by
``deep_agent`` ones; the provider model strings stay (a dummy key lets them
build offline). Each then runs once on the scripted model, the only change.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from pydantic import BaseModel

from deep_agent import (  # swapped: deepagents, deepagents.middleware, deepagents.graph
    AsyncSubAgentMiddleware,
    CompiledSubAgent,
    DeepAgentState,
    SubAgent,
    SubAgentMiddleware,
    create_deep_agent,
)
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user

pytest.importorskip("deepagents")
from deepagents.backends import StateBackend  # noqa: E402


@pytest.fixture(autouse=True)
def _offline_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-offline-test")


@tool
def search_tool(query: str) -> str:
    """Search."""
    return f"results for {query}"


def _delegating(to: str, child_answer: Any = "child answer") -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("look into it", [child_answer])],
        responses=[{"tool_calls": [tool_call("task", description="look into it", subagent_type=to)]}, "parent done"],
    )


def _task_result(out: dict) -> str:
    (result,) = [m for m in out["messages"] if m.type == "tool" and m.name == "task"]
    return result.text


def test_subagent_middleware_with_backend_in_create_agent(run):
    my_backend = StateBackend()

    def build(model: Any) -> Any:
        return create_agent(
            model,
            middleware=[
                SubAgentMiddleware(
                    backend=my_backend,
                    subagents=[
                        {
                            "name": "researcher",
                            "description": "Research agent",
                            "system_prompt": "You are a researcher.",
                            "model": "openai:gpt-5.5",
                            "tools": [search_tool],
                        }
                    ],
                )
            ],
        )

    build("openai:gpt-5.5")  # deepagents' text, as is
    model = _delegating("researcher")
    agent = create_agent(model, middleware=[SubAgentMiddleware(backend=my_backend, subagents=[
        {"name": "researcher", "description": "Research agent", "system_prompt": "You are a researcher.",
         "tools": [search_tool]}])])
    assert "child answer" in _task_result(run(agent, user("go")))


def test_subagent_with_a_pydantic_response_format(run):
    class Findings(BaseModel):
        findings: str
        confidence: float

    analyzer: SubAgent = {
        "name": "analyzer",
        "description": "Analyzes data and returns structured findings",
        "system_prompt": "Analyze the data and return your findings.",
        "model": "openai:gpt-5.5",
        "tools": [],
        "response_format": Findings,
    }
    create_deep_agent("openai:gpt-5.5", subagents=[analyzer])
    answer = {"tool_calls": [tool_call("Findings", findings="all good", confidence=0.9)]}
    model = _delegating("analyzer", answer)
    out = run(create_deep_agent(model, subagents=[{**analyzer, "model": model}]), user("go"))
    assert "all good" in _task_result(out)


def test_compiled_subagent_with_a_response_format(run):
    class Findings(BaseModel):
        summary: str
        confidence: float

    researcher: CompiledSubAgent = {
        "name": "researcher",
        "description": "Researches a topic and returns findings.",
        "runnable": create_agent(
            "openai:gpt-5.5",
            tools=[],  # your tools here
            response_format=Findings,
        ),
    }
    create_deep_agent("openai:gpt-5.5", subagents=[researcher])
    child = ScriptedChatModel(responses=[{"tool_calls": [tool_call("Findings", summary="found it", confidence=0.8)]}])
    model = _delegating("researcher")
    runnable = create_agent(child, tools=[], response_format=Findings)
    out = run(create_deep_agent(model, subagents=[{**researcher, "runnable": runnable}]), user("go"))
    assert "found it" in _task_result(out)


def test_deep_agent_state_subclass_as_state_schema(run):
    class MyState(DeepAgentState):
        page_url: str
        file_urls: list[str]

    create_deep_agent(model="openai:gpt-5.5", state_schema=MyState)
    out = run(create_deep_agent(model=ScriptedChatModel(default="ok"), state_schema=MyState),
              {**user("go"), "page_url": "https://example.com", "file_urls": []})
    assert out["page_url"] == "https://example.com"


def test_async_subagent_middleware_with_async_subagents():
    middleware = AsyncSubAgentMiddleware(
        async_subagents=[
            {
                "name": "researcher",
                "description": "Research agent for deep analysis",
                "url": "https://my-deployment.langsmith.dev",
                "graph_id": "research_agent",
            }
        ],
    )
    tools = {t.name for t in middleware.tools}
    assert {"start_async_task", "check_async_task", "list_async_tasks"} <= tools
