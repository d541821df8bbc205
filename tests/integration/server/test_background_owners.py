"""Two real processes on one SQLite thread: outcomes survive a crash, live owners are respected.

This file is also the first process: run as a script it starts a background
task under a SQLite checkpointer, then either dies the moment the task has
settled (``settle``) or stays alive with the task running until killed
(``hold``).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool

from helpers.background import (  # noqa: F401 - background is a fixture
    NOTICE,
    REPO,
    TESTS,
    Turns,
    background,
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
from subagents._settings import DelegationSettings

WORKER = {"name": "worker", "description": "Works on jobs.", "max_turns": 2000}


@tool
def step() -> str:
    """One step of long work."""
    return "stepped"


def parent_model(child_reply: Any) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("the job", child_reply),
            ("PARENT start", [start(("the job", "worker")), "started"]),
            ("PARENT retry", [on_task("retry_async_task"), "asked to retry"]),
            ("PARENT cancel", [on_task("cancel_async_task"), "asked to cancel"]),
            ("PARENT steer", [on_task("update_async_task", message="faster"), "asked to steer"]),
        ],
        default="ok",
    )


def first_process(db: str, thread_id: str, mode: str) -> None:
    """Start one task; ``settle``: die as soon as it has settled; ``hold``: keep it running until killed."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    if mode == "settle":
        # Slower than the parent's turn, so its last checkpoint still shows the task running.
        child = ScriptedChatModel(default="answer from before the crash", latency_s=1.0)
    else:
        child = ScriptedChatModel(default={"tool_calls": [tool_call("step")]}, latency_s=0.05)
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    middleware = BackgroundSubagentMiddleware([{**WORKER, "model": child}], settings=DelegationSettings.of(
        notify=False,
    ))
    agent = create_agent(parent_model([]), [step], middleware=[middleware], checkpointer=saver)
    out = agent.invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})
    (task_id,) = started_ids(out["messages"])
    task = middleware.runtime.table.get(task_id)
    if mode == "settle":
        wait_for(lambda: task.fields["status"] == "completed")
    else:
        wait_for(lambda: task.session.meter.model_calls >= 2)
    print(json.dumps({"owner": middleware.runtime.owner.name, "task_id": task_id,
                      "ledger": ledger(out)}), flush=True)
    if mode == "hold":
        sys.stdin.read()  # alive, the task running, until the test kills this process
    os._exit(0)  # no shutdown, no parent turn: only what was stored survives


def test_an_outcome_settled_just_before_a_crash_is_reported_completed_after_restart(run, tmp_path, background):
    db, thread_id = tmp_path / "parent.db", f"settled-{run.mode}"
    first = run_script(__file__, str(db), thread_id, "settle")
    task_id = first["task_id"]
    # The dead process's last checkpoint still has the task running: its parent never took another turn.
    assert first["ledger"][task_id]["status"] in ("pending", "running")

    turn = Turns(run.mode, db, thread_id, parent_model([]), background([WORKER], settings=DelegationSettings.of(
        notify=True,
    )))
    out = turn("PARENT what happened?")
    record = ledger(out)[task_id]
    assert record["status"] == "completed" and record["result"] == "answer from before the crash"
    assert record["owner"] == first["owner"] and record["error"] is None and record["model_calls"] >= 1
    (notice,) = notices(out)
    assert f"{task_id} (worker): completed" in notice and "answer from before the crash" in notice
    assert "lost" not in notice


def test_a_live_task_of_another_process_is_not_lost_and_cannot_be_run_twice(run, tmp_path, background):
    db, thread_id = tmp_path / "parent.db", f"live-{run.mode}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), str(TESTS), os.environ.get("PYTHONPATH")) if p)}
    first = subprocess.Popen([sys.executable, __file__, str(db), thread_id, "hold"], cwd=REPO, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = first.stdout.readline()
        assert line, first.stderr.read()[-3000:]
        task_id = json.loads(line)["task_id"]

        middleware = background([{**WORKER, "model": ScriptedChatModel(default="second run")}])
        turn = Turns(run.mode, db, thread_id, parent_model([]), middleware)
        out = turn("PARENT what happened?")
        # Live in its own process: what this one knows is the first process's last checkpoint, which says
        # pending or running depending on whether that loop had taken the task when its turn ended.
        assert ledger(out)[task_id]["status"] in ("pending", "running") and notices(out) == []
        for ask in ("PARENT retry", "PARENT cancel", "PARENT steer"):
            out = turn(ask)
            refused = next(m for m in reversed(out["messages"]) if m.type == "tool")
            assert refused.status == "error", refused.content
            assert f"process {first.pid}" in refused.content and "still alive" in refused.content
        assert ledger(out)[task_id]["status"] in ("pending", "running") and ledger(out)[task_id]["attempt"] == 1
        assert middleware.runtime.table.get(task_id) is None  # nothing of it ran here
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        first.stdout.close(), first.stderr.close(), first.stdin.close()

    out = turn("PARENT and now?")
    assert ledger(out)[task_id]["status"] == "lost"
    assert f"{task_id} (worker): lost." in notices(out)[-1]
    out = turn("PARENT retry")
    assert ledger(out)[task_id]["attempt"] == 2
    wait_for(lambda: middleware.runtime.table.get(task_id).fields["status"] == "completed")
    out = turn("PARENT and now?")
    assert ledger(out)[task_id]["result"] == "second run"


if __name__ == "__main__":
    first_process(sys.argv[1], sys.argv[2], sys.argv[3])
