"""LangGraph Studio: the example deep agent served by `langgraph dev`, run through langgraph-sdk."""

from __future__ import annotations

import json


from helpers import REPO as ROOT


def test_langgraph_json_exposes_the_deep_agent_and_the_subagent_graphs():
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    assert config["graphs"]["deep_agent"] == "./deep_agent/_server_graphs.py:graph"
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


def test_a_background_task_that_ends_after_the_run_shows_on_the_thread_without_another_run(langgraph_server):
    """Studio read the writer ``running`` for as long as nobody started a run; the server now catches the
    thread up once the task settles and no run is on it (a checkpoint of source ``update``)."""
    import time

    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_server)
    thread_id = client.threads.create()["thread_id"]
    state = client.runs.wait(thread_id, "deep_agent",
                             input={"messages": [{"role": "user", "content": "Compare LangGraph and Pydantic."}]})
    (task_id,) = state["async_tasks"]
    assert state["async_tasks"][task_id]["status"] in ("pending", "running")  # the writer outlives the turn
    seen = []
    for _ in range(240):  # a bound for a stuck server, not a time budget
        now = client.threads.get_state(thread_id)
        seen.append(now["values"]["async_tasks"][task_id]["status"])
        if seen[-1] == "completed":
            break
        time.sleep(0.5)
    assert seen[-1] == "completed", seen
    record = now["values"]["async_tasks"][task_id]
    assert record["result"] and record["announced"] is False  # the next turn still announces it
    assert now["next"] == [] and len(client.runs.list(thread_id)) == 1
    sources = [c["metadata"]["source"] for c in client.threads.get_history(thread_id, limit=100)]
    assert sources[0] == "update" and "update" not in sources[1:]  # written once, by the catch-up
