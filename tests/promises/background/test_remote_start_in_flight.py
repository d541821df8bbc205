"""A remote start still in flight when the next turn adopts orphans is adopted as the run it makes, never ``lost``.

Before: a run stopped while a start's run-create request waited for its
answer (the step's own tool stopped it, as Ctrl-C would). Cancelled with the
step, the start let go of the request, but the server still made the run. The
next turn's adoption found the task's thread without a run yet and recorded
it ``lost``, while its run went on unrecorded (and a retry would have run
the task a second time). Now a start, once begun, runs to its answer on the
background loop, and adoption waits for the starts of this process still in
flight before it asks the server. (Only an async step cancels its tools this way: a
sync step waits for its tools' threads, so the start has landed when it ends.)

A start that lands only after the task was recorded ``lost`` (sent by a
parent process that died, and made by its server later) is the other half:
``retry_async_task`` ran such a task a second time; it now adopts the run
found on the task's thread.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from helpers.attacks import _invoke
from helpers.background import ledger
from helpers.fault_servers import RecordingServer
from helpers.graphs import user
from helpers.stopped_start import stop_then_carry_on
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents.background._ledger import AsyncTaskRecord
from subagents.background._remote import task_thread_id
from subagents._settings import DelegationSettings

RUN_CREATE_DELAY_S = 1.5
"""How long the server takes to answer a run-create (it makes the run just before answering)."""


class SlowRunCreate(RecordingServer):
    """A server that keeps its threads and runs, and answers each run-create late."""

    def __init__(self) -> None:
        self.threads: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, list[dict[str, Any]]] = {}
        self.run_requested = threading.Event()
        self.answering = 0
        super().__init__()

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        bare = path.split("?")[0]
        parts = bare.split("/")
        if method == "POST" and bare == "/threads":
            thread_id = body.get("thread_id") or str(uuid.uuid4())
            self.threads.setdefault(thread_id, {"thread_id": thread_id, "metadata": body.get("metadata") or {},
                                                "status": "idle", "values": {}})
            return self.threads[thread_id]
        if method == "POST" and bare == "/threads/search":
            body = body or {}
            rows = list(self.threads.values())
            if body.get("ids") is not None:
                rows = [r for r in rows if r["thread_id"] in body["ids"]]
            wanted = body.get("metadata") or {}
            return [{**r, "status": "busy" if self.runs.get(r["thread_id"]) else "idle"} for r in rows
                    if all(r["metadata"].get(k) == v for k, v in wanted.items())]
        if method == "POST" and len(parts) == 4 and parts[3] == "runs":
            self.answering += 1
            self.run_requested.set()
            time.sleep(RUN_CREATE_DELAY_S)
            run = {"run_id": str(uuid.uuid4()), "thread_id": parts[2], "status": "running"}
            self.runs.setdefault(parts[2], []).append(run)
            self.answering -= 1
            return run
        if method == "GET" and len(parts) == 4 and parts[3] == "runs":
            return list(reversed(self.runs.get(parts[2], [])))
        return super().reply_to(method, path, body, headers)


def test_a_start_in_flight_during_adoption_is_recorded_as_its_run() -> None:
    server = SlowRunCreate()
    try:
        # The step stops once the start's run-create has reached the server.
        out, middleware = stop_then_carry_on("async", server.url, thread_id="in-flight-async",
                                             ready=server.run_requested)
        middleware.close()
        deadline = time.monotonic() + 30
        while server.answering and time.monotonic() < deadline:  # a run-create still being answered lands first
            time.sleep(0.05)
    finally:
        server.close()
    runs = [run for made in server.runs.values() for run in made]
    assert len(runs) == 1, "the task was started once on the server"
    (record,) = ledger(out).values()
    assert record["status"] in ("pending", "running"), record.get("error")
    assert record["run_id"] == runs[0]["run_id"] and record["thread_id"] == runs[0]["thread_id"]


class LateRun(RecordingServer):
    """A server on which one thread got its run after its task was recorded lost."""

    def __init__(self, thread_id: str) -> None:
        self.late_thread = thread_id
        super().__init__()

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        bare = path.split("?")[0]
        if method == "GET" and bare == f"/threads/{self.late_thread}/runs":
            return [{"run_id": "late-run", "thread_id": self.late_thread, "status": "running"}]
        return super().reply_to(method, path, body, headers)


@pytest.mark.parametrize("left_thread", [True, False], ids=["thread-without-run", "no-thread-seen"])
def test_retrying_a_lost_task_whose_start_landed_late_adopts_its_run(left_thread: bool) -> None:
    task_id = "task-late"
    server = LateRun(task_thread_id(task_id, 1))
    try:
        spec = {"name": "remote-worker", "description": "Works remotely.", "graph_id": "g", "url": server.url}
        model = ScriptedChatModel(rules=[("RETRY", [{"tool_calls": [tool_call("retry_async_task", task_id=task_id)]},
                                                    "retried"])], default="noted")
        middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False))
        agent = create_agent(model, checkpointer=InMemorySaver(), middleware=[middleware])
        config = {"configurable": {"thread_id": f"late-{left_thread}"}}
        _invoke("sync", agent, user("HELLO"), config)
        lost = AsyncTaskRecord(id=task_id, agent_type="remote-worker", runner="remote", status="lost",
                               description="the job", tool_call_id="call_1", created_at=0.0, error="lost",
                               announced=True,
                               thread_id=task_thread_id(task_id, 1) if left_thread else None).model_dump()
        agent.update_state(config, {"async_tasks": {task_id: lost}})
        out = _invoke("sync", agent, user("RETRY"), config)
        middleware.close()
    finally:
        server.close()
    made = [r for r in server.requests if r["method"] == "POST" and r["path"].split("?")[0] in
            ("/threads", f"/threads/{task_thread_id(task_id, 2)}/runs")]
    assert made == [], "no second thread or run: the task runs once"
    record = ledger(out)[task_id]
    assert record["run_id"] == "late-run" and record["thread_id"] == task_thread_id(task_id, 1)
    assert record["status"] in ("pending", "running") and record["attempt"] == 1
