"""An offline delegation run on :class:`deep_agent.ScriptedChatModel` that prints what happened: three
parallel research tasks (one failing), and a background report the next turn is told about."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.tools import tool

from deep_agent._factory import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import wait_for_background
from subagents._settings import DelegationSettings


@tool
def search(query: str) -> str:
    """Search a small offline corpus."""
    corpus = {"langgraph": "LangGraph builds stateful agent graphs with checkpoints.",
              "pydantic": "Pydantic validates data with Python type hints."}
    return corpus.get(query.lower(), f"no entry for {query!r}")


BACKGROUND_REPORT = (
    "Background report: LangGraph checkpointers save the graph state after every step, "
    "so a run can pause for approval, resume after a crash, or be inspected later; "
    "SQLite suits one machine and Postgres suits servers."
)
NOTICE_REPLY = "The background report arrived: checkpointers save state after every step."


def demo_model() -> ScriptedChatModel:
    """The scripted parent and research children of the demo (one model, chosen by prompt)."""
    return ScriptedChatModel(
        rules=[
            # Announcements of finished background tasks reach the parent as a message.
            ("Background task updates", [NOTICE_REPLY]),
            ("Research LangGraph", [{"tool_calls": [tool_call("search", query="langgraph")]},
                                    "LangGraph: stateful agent graphs with checkpoints."]),
            ("Research Pydantic", [{"tool_calls": [tool_call("search", query="pydantic")]},
                                   "Pydantic: data validation from type hints."]),
            ("flaky source", [RuntimeError("upstream model returned HTTP 500")]),
        ],
        responses=[
            {"content": "I will delegate three research tasks in parallel and start a report.",
             "tool_calls": [
                 tool_call("task", description="Research LangGraph in one line.", subagent_type="researcher"),
                 tool_call("task", description="Research Pydantic in one line.", subagent_type="researcher"),
                 tool_call("task", description="Use the flaky source.", subagent_type="researcher"),
                 tool_call("start_async_task", description="Write a background report on checkpointers.",
                           subagent_type="writer"),
             ]},
            "Summary: LangGraph runs stateful agent graphs; Pydantic validates data. "
            "One source failed and was reported, not fatal. The report runs in the background.",
        ],
        latency_s=0.05,
    )


DEMO_PROMPT = "Compare LangGraph and Pydantic."
FOLLOW_UP_PROMPT = "Any news?"


def build_demo_agent(model: Any = None, settings: DelegationSettings | None = None, **options: Any) -> Any:
    """The demo's deep agent; ``options`` go to :func:`create_deep_agent`, over ``settings``."""
    return create_deep_agent(
        model or demo_model(),
        [search],
        subagents=[
            {"name": "researcher", "description": "Researches one topic with the search tool.",
             "system_prompt": "Research the topic with `search`; answer in one line.", "tools": ["search"],
             "max_turns": 4},
            {"name": "writer", "description": "Writes longer reports; best started in the background.",
             "system_prompt": "Write a short report on the topic.", "tools": [],
             # Slow enough to outlive the parent's first turn.
             "model": ScriptedChatModel(default=BACKGROUND_REPORT, latency_s=1.0)},
        ],
        system_prompt="You are a planner: delegate research, then summarise.",
        background=True,
        settings=(settings or DelegationSettings()).updated(max_concurrent_tasks=4),
        **options,
    )


async def run_demo() -> list[dict[str, Any]]:
    """Run the scripted scenario: two turns of one thread; return each turn's final state."""
    from langgraph.checkpoint.memory import InMemorySaver

    agent = build_demo_agent(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo"}}
    first = await agent.ainvoke({"messages": [{"role": "user", "content": DEMO_PROMPT}]}, config)
    await asyncio.to_thread(wait_for_background, first.get("async_tasks", {}))
    second = await agent.ainvoke({"messages": [{"role": "user", "content": FOLLOW_UP_PROMPT}]}, config)
    return [first, second]


def format_report(turns: list[dict[str, Any]]) -> str:
    first, last = turns[0], turns[-1]
    lines = ["[scripted model: offline demo, no real LLM was called]", "", "Delegations (task):"]
    for record in first.get("subagent_tasks", {}).values():
        outcome = record["result"] if record["status"] == "completed" else record["error"]
        lines.append(f"- task {record['id'][:8]} {record['agent_type']:<11} {record['status']:<9} "
                     f"{record['duration_ms']:7.1f} ms  {record['model_calls']} calls  "
                     f"{record['input_tokens']}+{record['output_tokens']} tokens  -> {outcome}")
    lines += ["", f"Answer of turn 1: {first['messages'][-1].text}", "", "Background tasks:"]
    for record in last.get("async_tasks", {}).values():
        outcome = record.get("result") if record["status"] == "completed" else record.get("error")
        lines.append(f"- task {record['id'][:8]} {record['agent_type']:<11} {record['status']:<9} -> {outcome}")
    lines += ["", f"Final answer: {last['messages'][-1].text}"]
    return "\n".join(lines)


def main() -> int:
    print(format_report(asyncio.run(run_demo())))
    return 0
