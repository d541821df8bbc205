"""A restart loses nothing: a second process reports the dead process's tasks as lost, then retries.

The first process is a real one: this file run as a script starts a
background task under a SQLite checkpointer and exits while the task runs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool

from helpers.background import (  # noqa: F401 - background is a fixture
    NOTICE,
    background,
    Turns,
    ledger,
    notices,
    on_task,
    run_script,
    start,
    started_ids,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware

WORKER = {"name": "worker", "description": "Works on long jobs.", "max_turns": 2000}


def parent_model(child_reply: Any) -> ScriptedChatModel:
    def on_notice(messages: list[Any]) -> Any:
        if "): lost." in messages[-1].text:
            return on_task("retry_async_task")(messages)
        return "noted"

    return ScriptedChatModel(
        rules=[
            (NOTICE, [on_notice, "retried"]),
            ("long job", child_reply),
            ("PARENT start", [start(("long job", "worker")), "started"]),
        ],
        default="ok",
    )


@tool
def step() -> str:
    """One step of long work."""
    return "stepped"


def first_process(db: str, thread_id: str) -> None:
    """Start a never-ending task, wait until it really runs, then die without cleaning up."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    busy = ScriptedChatModel(default={"tool_calls": [tool_call("step")]}, latency_s=0.05)
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    middleware = BackgroundSubagentMiddleware([{**WORKER, "model": busy}])
    agent = create_agent(parent_model([]), [step], middleware=[middleware], checkpointer=saver)
    out = agent.invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: middleware.runtime.table.get(task_id).session.meter.model_calls >= 2)
    print(json.dumps({"owner": middleware.runtime.owner.name, "task_id": task_id, "ledger": ledger(out)}),
          flush=True)
    os._exit(0)  # no shutdown: the running task dies with the process


def test_tasks_of_a_dead_process_are_lost_and_retry_relaunches_them(run, tmp_path, background):
    db, thread_id = tmp_path / "parent.db", f"restart-{run.mode}"
    first = run_script(__file__, str(db), thread_id)
    task_id = first["task_id"]
    assert first["ledger"][task_id]["status"] in ("pending", "running")
    assert first["ledger"][task_id]["owner"] == first["owner"]

    middleware = background([WORKER])
    assert first["owner"] != middleware.runtime.owner.name
    turn = Turns(run.mode, db, thread_id, parent_model(["finished after the restart"]), middleware)
    out = turn("PARENT what happened?")
    lost = notices(out)[0]
    assert f"{task_id} (worker): lost." in lost and "retry_async_task" in lost
    retried = next(m for m in out["messages"] if m.type == "tool" and m.name == "retry_async_task")
    assert retried.content == f"Retrying background task {task_id} (attempt 2)."
    wait_for(lambda: background.status(task_id) == "completed")

    out = turn("PARENT and now?")
    record = ledger(out)[task_id]
    assert record["status"] == "completed" and record["result"] == "finished after the restart"
    assert record["attempt"] == 2 and record["owner"] == middleware.runtime.owner.name and record["error"] is None
    # Announced once, in this turn or (if it finished that fast) the one before.
    assert sum("finished after the restart" in n for n in notices(out)) == 1


if __name__ == "__main__":
    first_process(sys.argv[1], sys.argv[2])
