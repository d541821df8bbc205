"""Background tasks on a real LangGraph Server (``langgraph dev``), serving this repo's graphs."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import (
    NOTICE,
    Turns,
    as_json,
    last_tool_result,
    ledger,
    notices,
    on_task,
    run_script,
    start,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents._settings import DelegationSettings


def remote_specs(url: str) -> list[dict[str, Any]]:
    return [
        {"name": "remote-worker", "description": "Works on a LangGraph Server.",
         "graph_id": "scripted_worker", "url": url},
        {"name": "remote-approver", "description": "Publishes after approval, on a server.",
         "graph_id": "scripted_approver", "url": url},
    ]


def live(middleware: BackgroundSubagentMiddleware, record: dict[str, Any]) -> dict[str, Any]:
    """The task as the server has it now (what check_async_task would say)."""
    return middleware.runtime.run(middleware.tasks.check(record))[0]


def wait_status(middleware: BackgroundSubagentMiddleware, record: dict[str, Any], status: str) -> dict[str, Any]:
    return wait_for(lambda: (now := live(middleware, record))["status"] == status and now, every=0.1)


def sdk(url: str) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=url, api_key=None)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"remote-{time.monotonic_ns()}"}}


def test_a_remote_task_runs_on_the_server_and_is_announced(run, langgraph_server):
    url = langgraph_server
    model = ScriptedChatModel(
        rules=[(NOTICE, ["noted"]),
               ("PARENT start", [start(("Sum the numbers", "remote-worker")), "started"])],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(remote_specs(url), settings=DelegationSettings.of(
        general_purpose=False,
    ))
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    ((task_id, record),) = ledger(out).items()
    assert record["runner"] == "remote" and record["thread_id"] and record["run_id"]
    assert record["owner"] is None

    server_thread = sdk(url).threads.get(record["thread_id"])
    metadata = server_thread["metadata"]
    assert metadata["parent_thread_id"] == config["configurable"]["thread_id"]
    assert metadata["agent_type"] == "remote-worker" and metadata["subagent_task_id"] == task_id
    assert metadata["tool_call_id"] == record["tool_call_id"]

    wait_status(middleware, record, "completed")
    out = run(agent, user("PARENT news"), config)
    done = ledger(out)[task_id]
    assert done["status"] == "completed" and done["result"] == "Done: Sum the numbers"
    assert done["model_calls"] == 1 and done["input_tokens"] > 0 and done["announced"]
    assert "Done: Sum the numbers" in notices(out)[0]


def test_remote_failure_carries_the_servers_message(langgraph_server):
    middleware = BackgroundSubagentMiddleware(remote_specs(langgraph_server), settings=DelegationSettings.of(
        general_purpose=False,
    ))
    model = ScriptedChatModel(rules=[("PARENT start", [start(("please fail", "remote-worker")), "ok"])],
                              default="ok")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT start"), thread())
    (record,) = ledger(out).values()
    failed = wait_status(middleware, record, "error")
    assert failed["error"] == "RuntimeError: the worker's model failed on purpose"


def test_cancel_and_steer_running_remote_tasks(run, langgraph_server):
    url = langgraph_server
    model = ScriptedChatModel(
        rules=[
            ("PARENT start", [start(("slow job one", "remote-worker"), ("slow job two", "remote-worker")),
                              "started"]),
            ("PARENT cancel", [on_task("cancel_async_task", 0), "cancelled"]),
            ("PARENT steer", [on_task("update_async_task", 1, message="Wrap up now"), "steered"]),
            ("PARENT check", [on_task("check_async_task", 1), "checked"]),
        ],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(remote_specs(url), settings=DelegationSettings.of(
        general_purpose=False, notify=False,
    ))
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    first, second = sorted(ledger(out).values(), key=lambda r: r["description"])
    wait_status(middleware, first, "running")
    wait_status(middleware, second, "running")

    out = run(agent, user("PARENT cancel"), config)
    assert ledger(out)[first["id"]]["status"] == "cancelled"
    assert sdk(url).runs.get(first["thread_id"], first["run_id"])["status"] == "interrupted"

    out = run(agent, user("PARENT steer"), config)
    steered = ledger(out)[second["id"]]
    assert "stopped and restarted with the new instruction" in last_tool_result(out).content
    assert steered["thread_id"] == second["thread_id"] and steered["run_id"] != second["run_id"]
    wait_status(middleware, steered, "completed")
    out = run(agent, user("PARENT check"), config)
    checked = as_json(last_tool_result(out))
    assert checked["status"] == "completed" and checked["result"] == "Wrapped up as asked."
    messages = sdk(url).threads.get(second["thread_id"])["values"]["messages"]
    # The stopped run's open tool call was answered before the new instruction.
    assert [m["type"] for m in messages[-4:]] == ["ai", "tool", "human", "ai"]
    assert ledger(out)[first["id"]]["status"] == "cancelled"


def test_a_remote_task_whose_run_has_begun_is_listed_running_not_pending(run, langgraph_server):
    model = ScriptedChatModel(
        rules=[(NOTICE, ["noted"]),
               ("PARENT start", [start(("slow job", "remote-worker")), "started"]),
               ("PARENT list", [{"tool_calls": [tool_call("list_async_tasks")]}, "listed"])],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(remote_specs(langgraph_server), settings=DelegationSettings.of(
        general_purpose=False,
    ))
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (record,) = ledger(out).values()
    wait_for(lambda: sdk(langgraph_server).threads.get(record["thread_id"])["status"] == "busy", every=0.1)
    # As a start that returned before the server began the run leaves it (a cold server does).
    agent.update_state(config, {"async_tasks": {record["id"]: {"status": "pending", "updated_at": 0.0}}})
    out = run(agent, user("PARENT list"), config)
    (listed,) = as_json(last_tool_result(out))
    assert listed["status"] == "running" and ledger(out)[record["id"]]["status"] == "running"


def test_follow_up_and_approval_on_the_same_remote_thread(run, langgraph_server):
    model = ScriptedChatModel(
        rules=[
            ("PARENT start", [start(("First part", "remote-worker"), ("publish it", "remote-approver")),
                              "started"]),
            ("PARENT follow", [on_task("update_async_task", 0, message="Second part"), "sent"]),
            ("PARENT approve", [on_task("update_async_task", 1, message="approve"), "approved"]),
        ],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(remote_specs(langgraph_server), settings=DelegationSettings.of(
        general_purpose=False, notify=False,
    ))
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    worker, approver = sorted(ledger(out).values(), key=lambda r: r["agent_type"] != "remote-worker")
    wait_status(middleware, worker, "completed")
    waiting = wait_status(middleware, approver, "waiting_for_approval")
    (request,) = waiting["approval_request"]
    assert request["value"]["action_requests"][0]["name"] == "publish"

    out = run(agent, user("PARENT follow"), config)
    assert "follow-up on the same thread" in last_tool_result(out).content
    followed = wait_status(middleware, ledger(out)[worker["id"]], "completed")
    assert followed["result"] == "Done: Second part" and followed["thread_id"] == worker["thread_id"]
    assert followed["turns"] == 2 and followed["model_calls"] == 2

    out = run(agent, user("PARENT approve"), config)  # the model tries, and cannot
    assert "a model cannot give it" in last_tool_result(out).content
    middleware.answer_approval(out, approver["id"], "approve")  # the person can
    published = wait_status(middleware, ledger(out)[approver["id"]], "completed")
    assert published["result"] == "Outcome: published to production"


def first_parent(db: str, thread_id: str, url: str) -> None:
    """The first parent process: start a slow remote task, then exit while it runs on the server."""
    import os
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    model = ScriptedChatModel(rules=[("PARENT start", [start(("slow survivor", "remote-worker")), "ok"])],
                              default="ok")
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    agent = create_agent(model, middleware=[BackgroundSubagentMiddleware(remote_specs(url))],
                         checkpointer=saver)
    out = agent.invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})
    print(json.dumps(ledger(out)), flush=True)
    os._exit(0)


def test_a_restarted_parent_keeps_checking_from_the_checkpoint(run, langgraph_server, tmp_path):
    db, thread_id = tmp_path / "parent.db", f"remote-restart-{run.mode}"
    ((task_id, first),) = run_script(__file__, str(db), thread_id, langgraph_server).items()
    assert first["runner"] == "remote" and first["status"] in ("pending", "running")

    model = ScriptedChatModel(
        rules=[(NOTICE, ["noted"]),
               ("PARENT steer", [on_task("update_async_task", message="Wrap up now"), "steered"])],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(remote_specs(langgraph_server))
    turn = Turns(run.mode, db, thread_id, model, middleware)
    record = turn.state()["async_tasks"][task_id]
    wait_status(middleware, record, "running")  # still working on the server, never lost
    out = turn("PARENT steer")
    assert "restarted with the new instruction" in last_tool_result(out).content
    wait_status(middleware, ledger(out)[task_id], "completed")
    out = turn("PARENT news")
    assert ledger(out)[task_id]["result"] == "Wrapped up as asked."
    assert "Wrapped up as asked." in notices(out)[0]


if __name__ == "__main__":
    first_parent(*sys.argv[1:4])
