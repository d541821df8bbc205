"""A server's data is data: thread values or usage the poll cannot read never stop the parent or the others.

A LangGraph Server (or anything answering on its url) may hold values of
any shape: a graph whose state is text, counts that are not numbers, token
counts no checkpointer can hold. One such thread must settle as well as it
can be read, never make its server look unreachable to every other task,
and never put a value in the ledger that fails the parent's next checkpoint.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.fault_servers import RecordingServer
from subagents.background._remote import RemoteSubagentSpec, RemoteTaskRunner
from subagents._metering import MAX_REPORTED_TOKENS
from subagents.background._remote import MAX_USAGE, fields_from_thread, usage
from subagents._settings import DelegationSettings

DONE = {"messages": [{"type": "ai", "content": "all done", "usage_metadata": {"input_tokens": 3, "output_tokens": 2}}]}


class ThreadsServer(RecordingServer):
    """Answers thread searches with the rows in ``threads``; a new run ends at once with ``final`` values."""

    def __init__(self, threads: dict[str, dict[str, Any]], final: Any = None, run_ids: bool = True) -> None:
        self.threads, self.final, self.run_ids = threads, final, run_ids
        super().__init__()

    def reply(self, method: str, path: str, body: Any) -> Any:
        if path.startswith("/threads/search"):
            ids = (body or {}).get("ids") or list(self.threads)
            wanted = (body or {}).get("metadata") or {}
            return [{"thread_id": i, **self.threads[i]} for i in ids if i in self.threads
                    and all((self.threads[i].get("metadata") or {}).get(k) == v for k, v in wanted.items())]
        if method == "GET" and "/runs?" in path and not self.run_ids:
            return [{"status": "running"}]
        if method == "POST" and path == "/threads":
            tid = body["thread_id"]
            self.threads.setdefault(tid, {"status": "busy", "values": {}, "metadata": body.get("metadata")})
            return {"thread_id": tid, **self.threads[tid]}
        if method == "POST" and path.endswith("/runs"):
            tid = path.split("/")[2]
            if self.final is not None:
                self.threads[tid].update(status="idle", values=self.final)
            return {"run_id": str(uuid.uuid4()), "status": "pending"} if self.run_ids else {"status": "pending"}
        return super().reply(method, path, body)


@pytest.fixture
def server_with():
    servers: list[ThreadsServer] = []

    def start(threads: dict[str, dict[str, Any]], final: Any = None, run_ids: bool = True) -> ThreadsServer:
        servers.append(ThreadsServer(threads, final, run_ids))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize(("bad_values", "result"), [
    ("the answer as plain text", "the answer as plain text"),
    ({"messages": [{"type": "ai", "content": "x", "usage_metadata": {"input_tokens": "many"}}]}, "x"),
    ({"messages": [{"type": "ai", "content": "x", "usage_metadata": ["not", "a", "mapping"]}]}, "x"),
    ({"messages": "not a list"}, ""),
])
def test_one_thread_the_poll_cannot_read_leaves_the_others_and_the_server_alone(server_with, bad_values, result):
    server = server_with({"bad": {"status": "idle", "values": bad_values}, "good": {"status": "idle", "values": DONE}})
    spec = RemoteSubagentSpec(name="w", description="d", graph_id="g", url=server.url)
    records = [{"id": t, "agent_type": "w", "runner": "remote", "status": "running", "thread_id": t, "run_id": "r"}
               for t in ("bad", "good")]

    async def two_turns() -> list[dict[str, tuple[dict[str, Any], str | None]]]:
        runner = RemoteTaskRunner([spec])
        return [await runner.refresh_many(records) for _ in range(2)]

    for out in asyncio.run(two_turns()):
        assert out["good"] == ({**out["good"][0], "status": "completed", "result": "all done"}, None)
        assert out["bad"][1] is None
        assert (out["bad"][0]["status"], out["bad"][0]["result"]) == ("completed", result)


@pytest.mark.parametrize(("reported", "read"), [
    (1e30, MAX_REPORTED_TOKENS), (2**70, MAX_REPORTED_TOKENS), (float("inf"), 0), (float("nan"), 0), (-5, 0),
    ("12", 12), ("1e3", 0), (True, 0), (None, 0), (7.0, 7),
])
def test_token_counts_are_read_as_counts_a_checkpoint_can_hold(reported, read):
    values = {"messages": [{"type": "ai", "content": "x", "usage_metadata": {"input_tokens": reported}}]}
    counts = usage(values)
    assert counts == {"model_calls": 1, "input_tokens": read, "output_tokens": 0}
    JsonPlusSerializer().dumps_typed(fields_from_thread({"status": "idle", "values": values}))


def test_token_totals_stop_where_a_checkpoint_still_holds_them():
    values = {"messages": [{"type": "ai", "content": "x", "usage_metadata": {"input_tokens": 1e30}}] * 20}
    assert usage(values)["input_tokens"] == MAX_USAGE
    JsonPlusSerializer().dumps_typed(fields_from_thread({"status": "idle", "values": values}))


def crawler_agent(url: str) -> Any:
    """A parent that starts one remote ``crawler`` task on ``KICKOFF``."""
    model = ScriptedChatModel(rules=[("KICKOFF", [
        {"tool_calls": [tool_call("start_async_task", description="crawl", subagent_type="crawler")]},
        "started it",
    ])], default="ok")
    return create_deep_agent(model, background=True, checkpointer=InMemorySaver(),
    settings=DelegationSettings.of(
        general_purpose=False,
        background_subagents=[{"name": "crawler", "description": "Crawls.",
                                                    "graph_id": "g", "url": url}],
    ))


def test_a_server_reporting_an_absurd_token_count_does_not_crash_the_parent(server_with):
    absurd = {"messages": [{"type": "ai", "content": "done", "usage_metadata": {"input_tokens": 1e30}}]}
    server = server_with({}, final=absurd)
    agent = crawler_agent(server.url)
    config = {"configurable": {"thread_id": "absurd-usage"}}
    agent.invoke({"messages": [{"role": "user", "content": "KICKOFF"}]}, config)
    time.sleep(0.6)  # past the settle time of a just-started remote task
    out = agent.invoke({"messages": [{"role": "user", "content": "how is it going?"}]}, config)
    (record,) = out["async_tasks"].values()
    assert record["status"] == "completed" and record["result"] == "done"
    assert record["input_tokens"] == MAX_REPORTED_TOKENS


def test_runs_without_a_run_id_fail_the_start_by_name_and_never_crash_the_parent(server_with):
    server = server_with({}, run_ids=False)
    agent = crawler_agent(server.url)
    # The failed start leaves a thread on the server naming this parent; the model was told the start
    # failed, so the next model call does not look for it (no second report of one call as `lost`).
    out = agent.invoke({"messages": [{"role": "user", "content": "KICKOFF"}]},
                       {"configurable": {"thread_id": "no-run-ids"}})
    failed = next(m for m in out["messages"] if m.type == "tool")
    assert failed.status == "error"
    assert f"the server at {server.url} did not start the task" in failed.content
    assert "a run that has no run_id" in failed.content
    assert out["messages"][-1].content == "started it"
    assert [r["status"] for r in out["async_tasks"].values()] == ["error"]  # the failed start has its record
    assert not any(r["path"].startswith("/threads/search") for r in server.requests)
