"""Postgres, for real: the CLI's ``--db``, approvals and background restarts on a server the test starts.

Every test here runs against a PostgreSQL server started by
``helpers.postgres`` on a free loopback port (a database of its own per
test); nothing is mocked. If the server cannot be started the tests fail
with the reason.

The restart test's first process is a real one: this file run as a script
starts a never-ending background task under a ``PostgresSaver`` and exits
while the task runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.types import Command

from helpers.background import NOTICE, ledger, notices, on_task, run_script, start, started_ids, wait_for
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._ledger import saved_value
from subagents._ledger import LedgerChannel
from subagents._ledger import merge_records
from helpers.postgres import cli, project, rows  # noqa: F401 - project is a fixture
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.postgres


# -- helpers --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def postgres_saver(mode: str, url: str) -> AsyncIterator[Any]:
    """A fresh connection: ``PostgresSaver`` for the sync path, ``AsyncPostgresSaver`` for the async one."""
    if mode == "sync":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver


async def call(mode: str, graph: Any, inputs: Any, config: dict[str, Any]) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(graph.invoke, inputs, config)
    return await graph.ainvoke(inputs, config)


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# -- the command line -------------------------------------------------------------


def saved_ledger(url: str, thread_id: str) -> dict[str, dict[str, Any]]:
    """The thread's task ledger, read straight from the database."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        return saved_value(saver, saved, "subagent_tasks", LedgerChannel(dict, merge_records)) or {}


def test_a_cli_run_keeps_its_threads_ledgers_and_transcripts_in_postgres(project, tmp_path, postgres_url):
    run = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-pg", "--db", postgres_url,
              cwd=project)
    assert run.returncode == 0, run.stderr
    assert "researcher" in run.stdout and "Summary: LangGraph runs stateful agent graphs" in run.stdout
    assert not (project / ".deep_agent" / "state.sqlite").exists(), "--db must not write SQLite state"

    # The root's and the children's checkpoints are rows in Postgres.
    namespaces = {ns for (ns,) in rows(postgres_url, "SELECT checkpoint_ns FROM checkpoints WHERE thread_id = %s",
                                       "t-pg")}
    assert "" in namespaces and any(ns for ns in namespaces), namespaces
    first = saved_ledger(postgres_url, "t-pg")
    assert len(first) == 3 and {r["status"] for r in first.values()} == {"completed", "error"}

    # Read back from another folder: nothing local, everything from the database.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tasks = cli("tasks", "t-pg", "--db", postgres_url, cwd=elsewhere)
    assert tasks.returncode == 0, tasks.stderr
    assert "t-pg" in tasks.stdout and "completed" in tasks.stdout and "error" in tasks.stdout
    assert all(task_id[:8] in tasks.stdout for task_id in first), tasks.stdout

    task_id, record = next((t, r) for t, r in first.items() if r["status"] == "completed")
    shown = cli("transcript", task_id[:10], "--db", postgres_url, cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert task_id in shown.stdout
    assert record["description"] in shown.stdout and record["result"] in shown.stdout

    # A second process continues the same thread from the database.
    again = cli("run", "Compare LangGraph and Pydantic.", "--thread", "t-pg", "--db", postgres_url,
                cwd=project)
    assert again.returncode == 0, again.stderr
    both = saved_ledger(postgres_url, "t-pg")
    assert len(both) == 6 and set(first) < set(both)
    latest = cli("tasks", "--db", postgres_url, cwd=project)  # the thread run last here
    assert latest.returncode == 0, latest.stderr
    assert all(task_id[:8] in latest.stdout for task_id in set(both) - set(first)), latest.stdout


def test_an_unreachable_database_is_one_line_that_never_shows_the_password(tmp_path):
    from helpers.postgres import free_port

    url = f"postgresql://someone:s3cret-pw@127.0.0.1:{free_port()}/nothing?connect_timeout=3"
    for command in (("tasks", "t1"), ("run", "hello")):
        result = cli(*command, "--db", url, cwd=tmp_path)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
        assert "s3cret-pw" not in result.stderr + result.stdout
        assert "127.0.0.1" in result.stderr


def test_a_database_url_is_described_without_its_password_and_other_schemes_are_refused():
    from deep_agent.cli._store import DatabaseError, describe_url, open_checkpointer

    url = "postgresql://me:pw@db.example:6543/agents?sslmode=require"
    assert describe_url(url) == "postgresql://me@db.example:6543/agents"
    with pytest.raises(DatabaseError, match=r"^--db mysql://me@h:5432/db: expected a postgresql:// URL$"):
        with open_checkpointer(Path("unused"), "mysql://me:pw@h/db"):
            pass


# -- approvals --------------------------------------------------------------------

LONG = "sibling answer " + "s" * 220


def approval_scenario() -> tuple[ScriptedChatModel, Any, list[str]]:
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    def after_review(messages: list[Any]) -> str:
        last = messages[-1]
        verdict = "rejected: " if last.type == "tool" and last.status == "error" else "finished: "
        return "Deployment " + verdict + last.text

    model = ScriptedChatModel(
        rules=[
            ("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, after_review]),
            ("sibling job", [LONG]),
        ],
        responses=[
            {"tool_calls": [tool_call("task", description="deploy job", subagent_type="deployer"),
                            tool_call("task", description="sibling job", subagent_type="general-purpose")]},
            "parent finished",
        ],
    )
    return model, deploy, deployed


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_an_approval_pauses_into_postgres_and_resumes_on_a_new_connection(mode, decision, postgres_url):
    from deep_agent import create_deep_agent

    model, deploy, deployed = approval_scenario()

    def agent(saver: Any) -> Any:
        return create_deep_agent(
            model, [deploy], checkpointer=saver,
            subagents=[{"name": "deployer", "description": "deploys", "tools": ["deploy"],
                        "interrupt_on": {"deploy": True}}], settings=DelegationSettings.of(short_answer_threshold=0),
        )

    config = {"configurable": {"thread_id": f"approve-{mode}-{decision}"}}
    async with postgres_saver(mode, postgres_url) as saver:
        paused = await call(mode, agent(saver), user("go"), config)
    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["subagent"]["agent_type"] == "deployer"
    assert interrupt.value["action_requests"][0]["name"] == "deploy"
    assert deployed == []

    # The first connection is closed: the pause lives only in the database.
    resume = {"type": "approve"} if decision == "approve" else {"type": "reject", "message": "not today"}
    async with postgres_saver(mode, postgres_url) as saver:
        done = await call(mode, agent(saver), Command(resume={"decisions": [resume]}), config)

    siblings = [c for c in model.calls if any(m.text == "sibling job" for m in c["messages"])]
    assert len(siblings) == 1, "a finished sibling must not run again after the resume"
    results = [m.text for m in done["messages"] if m.type == "tool"]
    assert len(results) == 2 and LONG in results
    (child,) = [r for r in results if r != LONG]
    if decision == "approve":
        assert deployed == ["prod"] and child == "Deployment finished: deployed prod"
    else:
        assert deployed == [] and child.startswith("Deployment rejected:") and "not today" in child
    assert {r["status"] for r in done["subagent_tasks"].values()} == {"completed"}
    assert done["messages"][-1].text == "parent finished"


# -- background tasks across a process restart ---------------------------------------

WORKER = {"name": "worker", "description": "Works on long jobs.", "max_turns": 2000}
STEPS: list[int] = []


@tool
def step() -> str:
    """One step of long work."""
    STEPS.append(1)
    return "stepped"


def parent_model(child_reply: Any) -> ScriptedChatModel:
    def on_notice(messages: list[Any]) -> Any:
        if "): lost." in messages[-1].text:
            return on_task("retry_async_task")(messages)
        return "noted"

    return ScriptedChatModel(
        rules=[(NOTICE, [on_notice, "retried"]), ("long job", child_reply),
               ("PARENT start", [start(("long job", "worker")), "started"])],
        default="ok",
    )


def background_agent(model: Any, saver: Any, worker: dict[str, Any]) -> Any:
    from langchain.agents import create_agent

    from middleware import BackgroundSubagentMiddleware

    return create_agent(model, [step], middleware=[BackgroundSubagentMiddleware([worker])], checkpointer=saver)


def first_process(url: str, thread_id: str) -> None:
    """Start a never-ending background task, wait until it really runs, then die without cleaning up."""
    from langgraph.checkpoint.postgres import PostgresSaver

    busy = ScriptedChatModel(default={"tool_calls": [tool_call("step")]}, latency_s=0.05)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        agent = background_agent(parent_model([]), saver, {**WORKER, "model": busy})
        out = agent.invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})
        (task_id,) = started_ids(out["messages"])
        wait_for(lambda: len(STEPS) >= 2)
        print(json.dumps({"pid": os.getpid(), "task_id": task_id, "ledger": ledger(out)}), flush=True)
        os._exit(0)  # no shutdown: the running task dies with the process


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_background_task_of_a_dead_process_is_lost_then_retried_from_postgres(mode, postgres_url):
    from subagents import wait_for_background

    thread_id = f"restart-{mode}"
    first = await asyncio.to_thread(run_script, __file__, postgres_url, thread_id)
    task_id = first["task_id"]
    assert first["pid"] != os.getpid()
    assert first["ledger"][task_id]["status"] in ("pending", "running")

    model = parent_model(["finished after the restart"])
    config = {"configurable": {"thread_id": thread_id}}

    kept = []  # a dropped agent closes its background runtime (and its task) when collected

    async def turn(text: str) -> dict[str, Any]:
        async with postgres_saver(mode, postgres_url) as saver:
            kept.append(background_agent(model, saver, WORKER))
            return await call(mode, kept[-1], user(text), config)

    out = await turn("PARENT what happened?")
    lost = notices(out)[0]
    assert f"{task_id} (worker): lost." in lost and "retry_async_task" in lost
    retried = next(m for m in out["messages"] if m.type == "tool" and m.name == "retry_async_task")
    assert retried.content == f"Retrying background task {task_id} (attempt 2)."
    assert await asyncio.to_thread(wait_for_background, ledger(out), 120)

    out = await turn("PARENT and now?")
    record = ledger(out)[task_id]
    assert record["status"] == "completed" and record["result"] == "finished after the restart"
    assert record["attempt"] == 2 and record["error"] is None
    assert record["owner"] != first["ledger"][task_id]["owner"]
    assert sum("finished after the restart" in n for n in notices(out)) == 1


if __name__ == "__main__":
    first_process(sys.argv[1], sys.argv[2])
