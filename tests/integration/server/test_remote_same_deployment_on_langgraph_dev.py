"""Same-deployment mode: a remote spec without a url runs its child on the server its parent runs on.

``scripted_delegator`` (``deep_agent/_server_graphs.py``) is a parent served
by ``langgraph dev`` whose background subagent names ``graph_id`` only. Its
start must create the child's thread and run on that same server (reached
in-process), and the parent's next turn must report the child's answer.
Before, a spec without a url was refused ("url: Field required") when the
graph was built, so the server could not serve the parent at all.
"""

from __future__ import annotations

import time

from langgraph_sdk import get_sync_client


def test_a_spec_without_url_starts_its_child_on_the_server_its_parent_runs_on(langgraph_server):
    client = get_sync_client(url=langgraph_server, api_key=None)
    parent = client.threads.create()["thread_id"]
    out = client.runs.wait(parent, "scripted_delegator",
                           input={"messages": [{"role": "user", "content": "DELEGATE sum the numbers"}]})
    (record,) = out["async_tasks"].values()
    assert record["runner"] == "remote" and record["agent_type"] == "same-server-worker", record
    child = client.threads.get(record["thread_id"])
    assert child["metadata"]["parent_thread_id"] == parent and child["metadata"]["graph_id"] == "scripted_worker"

    deadline = time.monotonic() + 60
    while client.runs.get(record["thread_id"], record["run_id"])["status"] in ("pending", "running"):
        assert time.monotonic() < deadline, "the child's run did not end"
        time.sleep(0.2)
    later = client.runs.wait(parent, "scripted_delegator",
                             input={"messages": [{"role": "user", "content": "anything new?"}]})
    done = later["async_tasks"][record["id"]]
    assert done["status"] == "completed" and done["result"] == "Done: sum the numbers", done
    assert any("Done: sum the numbers" in str(m.get("content")) for m in later["messages"] if m["type"] == "human")
