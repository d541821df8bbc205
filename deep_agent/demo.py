"""An offline, scripted delegation run that prints what happened.

Everything here runs on :class:`deep_agent.testing.ScriptedChatModel`: no
network, no API key. The parent delegates two research tasks in parallel and
one to a subagent whose model fails; the failure comes back as an error
result and the parent still answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.tools import tool

from deep_agent.factory import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call


@tool
def search(query: str) -> str:
    """Search a small offline corpus."""
    corpus = {
        "langgraph": "LangGraph builds stateful agent graphs with checkpoints.",
        "pydantic": "Pydantic validates data with Python type hints.",
    }
    return corpus.get(query.lower(), f"no entry for {query!r}")


def demo_model() -> ScriptedChatModel:
    """The scripted parent and children of the demo (one model, chosen by prompt)."""
    return ScriptedChatModel(
        rules=[
            ("Research LangGraph", [{"tool_calls": [tool_call("search", query="langgraph")]},
                           "LangGraph: stateful agent graphs with checkpoints."]),
            ("Research Pydantic", [{"tool_calls": [tool_call("search", query="pydantic")]},
                          "Pydantic: data validation from type hints."]),
            ("flaky source", [RuntimeError("upstream model returned HTTP 500")]),
        ],
        responses=[
            {
                "content": "I will delegate three research tasks in parallel.",
                "tool_calls": [
                    tool_call("task", description="Research LangGraph in one line.",
                              subagent_type="researcher"),
                    tool_call("task", description="Research Pydantic in one line.",
                              subagent_type="researcher"),
                    tool_call("task", description="Use the flaky source.",
                              subagent_type="researcher"),
                ],
            },
            "Summary: LangGraph runs stateful agent graphs; Pydantic validates data. "
            "One source failed and was reported, not fatal.",
        ],
        latency_s=0.05,
    )


DEMO_PROMPT = "Compare LangGraph and Pydantic."


def build_demo_agent(model: Any = None, **options: Any) -> Any:
    """The demo's deep agent; ``options`` go to :func:`create_deep_agent`."""
    return create_deep_agent(
        model or demo_model(),
        [search],
        subagents=[
            {
                "name": "researcher",
                "description": "Researches one topic with the search tool.",
                "system_prompt": "Research the topic with `search`; answer in one line.",
                "tools": ["search"],
                "max_turns": 4,
            }
        ],
        system_prompt="You are a planner: delegate research, then summarise.",
        max_concurrent_tasks=4,
        **options,
    )


async def run_demo() -> dict[str, Any]:
    """Run the scripted scenario and return the final state."""
    agent = build_demo_agent()
    return await agent.ainvoke({"messages": [{"role": "user", "content": DEMO_PROMPT}]})


def format_report(state: dict[str, Any]) -> str:
    lines = ["[scripted model: offline demo, no real LLM was called]", ""]
    for record in state.get("subagent_tasks", {}).values():
        outcome = record["result"] if record["status"] == "completed" else record["error"]
        lines.append(
            f"- task {record['id'][:8]} {record['agent_type']:<11} {record['status']:<9} "
            f"{record['duration_ms']:7.1f} ms  {record['model_calls']} calls  "
            f"{record['input_tokens']}+{record['output_tokens']} tokens  -> {outcome}"
        )
    lines += ["", f"Final answer: {state['messages'][-1].text}"]
    return "\n".join(lines)


def main() -> int:
    print(format_report(asyncio.run(run_demo())))
    return 0
