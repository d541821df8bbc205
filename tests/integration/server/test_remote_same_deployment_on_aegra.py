"""Same-deployment mode on aegra: a remote spec without a url runs its child on the aegra it runs on.

The session's aegra pair (``helpers/aegra.py``) serves the project's own
``scripted_delegator`` and ``scripted_worker`` (``deep_agent/_server_graphs.py``).
The delegator's background subagent names ``graph_id`` only; its start must
create the child's thread and run on that same aegra deployment (reached
in-process, through aegra's app) and the parent's next turn must report the
child's answer. Before, the start was refused: the spec has no url and the
parent ran on no server known to serve an in-process client.
"""

from __future__ import annotations

import time

import pytest
from helpers.aegra import AegraInstance
from langgraph_sdk import get_sync_client

SETTLE_DEADLINE_S = 120  # generous: a loaded machine


@pytest.fixture
def pair(aegra_served_pair: tuple[AegraInstance, AegraInstance]) -> tuple[AegraInstance, AegraInstance]:
    """The session's pair (``helpers.aegra``), which serves these graphs too; shared with ``test_aegra_pair.py``."""
    return aegra_served_pair


def _wait(client, thread_id: str, run_id: str) -> dict:
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while (run := client.runs.get(thread_id, run_id))["status"] in ("pending", "running"):
        assert time.monotonic() < deadline, f"run {run_id} did not end within {SETTLE_DEADLINE_S} s"
        time.sleep(0.3)
    return run


def _turn(client, thread_id: str, text: str) -> dict:
    run = client.runs.create(thread_id, "scripted_delegator",
                             input={"messages": [{"role": "user", "content": text}]})
    assert _wait(client, thread_id, run["run_id"])["status"] == "success", run
    return client.threads.get_state(thread_id)["values"]


def test_a_spec_without_url_starts_its_child_on_the_aegra_its_parent_runs_on(pair):
    a, b = pair
    client = get_sync_client(url=a.url, api_key=None)
    parent = client.threads.create()["thread_id"]
    out = _turn(client, parent, "DELEGATE sum the numbers")
    (record,) = out["async_tasks"].values()
    assert record["runner"] == "remote" and record["agent_type"] == "same-server-worker", record
    assert record["status"] != "error", record

    # The child is a thread and run of this same deployment (seen through either instance).
    other = get_sync_client(url=b.url, api_key=None)
    child = other.threads.get(record["thread_id"])
    assert child["metadata"]["parent_thread_id"] == parent, child
    assert _wait(other, record["thread_id"], record["run_id"])["status"] == "success"

    later = _turn(client, parent, "anything new?")
    done = later["async_tasks"][record["id"]]
    assert done["status"] == "completed" and done["result"] == "Done: sum the numbers", done
    assert any("Done: sum the numbers" in str(m.get("content")) for m in later["messages"] if m["type"] == "human")


def test_an_in_process_task_that_ends_after_the_run_shows_on_the_aegra_thread_without_another_run(pair):
    """As on ``langgraph dev`` (tests/integration/server/test_studio.py): the demo's background writer outlives
    its run, and the instance that ran it writes its record to the thread through aegra's own app."""
    a, _ = pair
    client = get_sync_client(url=a.url, api_key=None)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "graph",
                             input={"messages": [{"role": "user", "content": "Compare LangGraph and Pydantic."}]})
    assert _wait(client, thread_id, run["run_id"])["status"] == "success", run
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while True:
        state = client.threads.get_state(thread_id)
        (record,) = state["values"]["async_tasks"].values()
        if record["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert record["status"] == "completed" and record["result"] and record["announced"] is False, record
    assert len(client.runs.list(thread_id)) == 1
    sources = [c["metadata"]["source"] for c in client.threads.get_history(thread_id, limit=100)]
    assert sources[0] == "update" and "update" not in sources[1:]  # written once, by the catch-up
