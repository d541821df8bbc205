"""Measure 5, context economy: the parent's prompt tokens over a job of research subtasks.

The job is ``subtasks`` research questions done one after another. Done
inline, the parent calls ``search`` itself and every large result stays in
its context for the rest of the job. Done by delegation, the parent calls
``task`` once per question; the child calls ``search``, reads the large
result and returns a short summary, which is all the parent ever sees.

The figure is the parent's prompt tokens (summed over all its model calls)
with delegation over the same job inline. Tokens are the scripted model's
stand-in (four characters a token) over the messages *and* the tool schemas
sent with each call, since a real provider bills both; the parent and the
children use separate model instances, so only the parent's calls count.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from bench.common import (
    OURS,
    delegating_agent,
    record,
    sides,
    spec,
    theirs_note,
    user,
)
from deep_agent._testing import ScriptedChatModel, tool_call

NAME = "context"
GOAL = 0.2
SUMMARY = "Summary of {topic}: three key findings, each with its source, in two sentences. " * 2


class SchemaCountingModel(ScriptedChatModel):
    """A scripted model whose prompt-token count also covers the tool schemas it was sent."""

    prompt_tokens: int = 0

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        assert isinstance(message, AIMessage) and message.usage_metadata is not None  # ScriptedChatModel's own
        extra = len(json.dumps(tools)) // 4 if tools else 0
        usage = message.usage_metadata.copy()
        usage["input_tokens"] += extra
        usage["total_tokens"] += extra
        message.usage_metadata = usage
        self.prompt_tokens += usage["input_tokens"]
        return result


def _search_tool(output_chars: int) -> Any:
    @tool
    def search(query: str) -> str:
        """Search the web and return the full text of the best pages."""
        body = f"[{query}] lorem ipsum dolor sit amet, consectetur adipiscing elit. "
        return (body * (output_chars // len(body) + 1))[:output_chars]

    return search


def _topics(n: int) -> list[str]:
    return [f"topic-{i}" for i in range(n)]


def _parent_script(topics: list[str], delegate: bool) -> list[Any]:
    if delegate:
        turns = [
            {
                "tool_calls": [
                    tool_call(
                        "task",
                        description=f"Research {t}: search for it and summarise the findings.",
                        subagent_type="researcher",
                    )
                ]
            }
            for t in topics
        ]
    else:
        turns = [{"tool_calls": [tool_call("search", query=t)]} for t in topics]
    return [*turns, "Report: all topics researched and summarised."]


def _child_model() -> ScriptedChatModel:
    def search_call(messages: list[Any]) -> dict[str, Any]:
        topic = messages[-1].text.split()[1].rstrip(":")
        return {"tool_calls": [tool_call("search", query=topic)]}

    def summary(messages: list[Any]) -> str:
        human = next(m for m in messages if m.type == "human")
        return SUMMARY.format(topic=human.text.split()[1].rstrip(":"))

    return ScriptedChatModel(responses=[search_call, summary])


def _parent_tokens(agent: Any, model: SchemaCountingModel, topics: list[str]) -> int:
    state = agent.invoke(user("Research every topic on the list and report."))
    results = [m for m in state["messages"] if m.type == "tool"]
    if len(results) != len(topics) or any(m.status == "error" for m in results):
        raise RuntimeError(f"context: unexpected tool results {[m.text[:60] for m in results]}")
    return model.prompt_tokens


def run(quick: bool = False) -> list[dict[str, Any]]:
    subtasks, output_chars = (3, 2000) if quick else (10, 8000)
    topics = _topics(subtasks)
    search = _search_tool(output_chars)

    inline_model = SchemaCountingModel(responses=_parent_script(topics, delegate=False))
    inline_agent = create_agent(
        inline_model, [search], system_prompt="You research topics and report."
    )
    inline = _parent_tokens(inline_agent, inline_model, topics)

    delegated: dict[str, int] = {}
    for side in sides():
        parent_model = SchemaCountingModel(responses=_parent_script(topics, delegate=True))
        agent = delegating_agent(
            side,
            parent_model,
            [
                spec(
                    "researcher",
                    model=_child_model(),
                    tools=[search],
                    description="Researches one topic with `search` and returns a short summary.",
                    system_prompt="Search for the topic, then reply with a two-sentence summary.",
                )
            ],
            system_prompt="You research topics and report.",
        )
        delegated[side] = _parent_tokens(agent, parent_model, topics)

    ours = delegated[OURS] / inline
    theirs = delegated["theirs"] / inline if "theirs" in delegated else None
    return [
        record(
            NAME,
            unit="x inline prompt tokens",
            ours=ours,
            theirs=theirs,
            goal=f"ours <= {GOAL}",
            met=ours <= GOAL,
            sizes={"subtasks": subtasks, "search_output_chars": output_chars},
            notes=theirs_note(
                "Parent prompt tokens (messages + tool schemas, 4 chars a token) with "
                "delegation over the same job done inline."
            ),
            detail={
                "inline_tokens": inline,
                **{f"{side}_delegated_tokens": tokens for side, tokens in delegated.items()},
            },
        )
    ]
