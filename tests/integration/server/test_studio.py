"""LangGraph Studio: the example deep agent served by `langgraph dev`, run through langgraph-sdk."""

from __future__ import annotations

import json


from helpers import REPO as ROOT


def test_langgraph_json_exposes_the_deep_agent_and_the_subagent_graphs():
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    assert config["graphs"]["deep_agent"] == "./deep_agent/server_graphs.py:graph"
    assert {"scripted_worker", "scripted_approver"} <= set(config["graphs"])


def test_the_deep_agent_runs_on_the_server(langgraph_server):  # noqa: F811 - the fixture
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    assistants = client.assistants.search(graph_id="deep_agent")
    assert assistants, "langgraph dev serves the deep_agent graph"
    thread = client.threads.create()
    state = client.runs.wait(
        thread["thread_id"], "deep_agent",
        input={"messages": [{"role": "user", "content": "Compare LangGraph and Pydantic."}]},
    )
    records = list(state["subagent_tasks"].values())
    assert sorted(r["status"] for r in records) == ["completed", "completed", "error"]
    assert any("HTTP 500" in (r["error"] or "") for r in records)
    assert "not fatal" in state["messages"][-1]["content"]
    assert list(state["async_tasks"].values())[0]["agent_type"] == "writer"
