"""A limit that stops the short-answer continuation keeps the first answer, even when a middleware answered."""
from __future__ import annotations

from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.messages import HumanMessage, ToolMessage

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call


def test_a_retry_middleware_answer_to_a_stopped_continuation_is_not_the_answer() -> None:
    # The child's one allowed call answers short; the continuation's call is refused by max_turns,
    # and ModelRetryMiddleware answers with its failure text, longer than the first answer.
    child = ScriptedChatModel(responses=["ok."], default="ok.")
    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="Do X", subagent_type="w")]}, "Done."])
    agent = create_deep_agent(model=parent, subagents=[{
        "name": "w", "description": "worker", "system_prompt": "work", "model": child, "tools": [],
        "max_turns": 1, "short_answer_threshold": 50,
        "middleware": [ModelRetryMiddleware(max_retries=1, initial_delay=0.0)],
    }])
    out = agent.invoke({"messages": [HumanMessage("go")]})
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage)).content
    assert "Model call failed" not in answer
    assert answer.startswith("ok.")
    assert "the request for a fuller report failed" in answer and "max_turns" in answer
    (record,) = out["subagent_tasks"].values() if isinstance(out["subagent_tasks"], dict) else out["subagent_tasks"]
    assert record["status"] == "completed"
